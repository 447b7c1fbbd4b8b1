#include "runtime/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace minfer::runtime {

namespace {

float clean(float v) {
  return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;
}

}  // namespace

Result<LogSoftmax> LogSoftmax::of(std::span<const float> logits) {
  float max = -std::numeric_limits<float>::infinity();
  for (float v : logits) max = std::max(max, clean(v));
  if (!std::isfinite(max)) {
    return Status::invalid_argument("logprobs: the row of " + std::to_string(logits.size()) +
                                    " logits has no finite maximum");
  }
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(clean(v)) - max);
  LogSoftmax l;
  l.logits_ = logits;
  l.shift_ = static_cast<double>(max) + std::log(sum);
  return l;
}

float LogSoftmax::logprob(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= logits_.size()) {
    return -std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(static_cast<double>(clean(logits_[static_cast<size_t>(id)])) - shift_);
}

// One pass with a bounded heap (the row is up to 262k entries; n <= 20).
std::vector<TokenLogprob> LogSoftmax::top(int n) const {
  const size_t k = std::min(logits_.size(), static_cast<size_t>(std::max(n, 0)));
  const auto higher = [&](int32_t a, int32_t b) {
    const float la = clean(logits_[static_cast<size_t>(a)]);
    const float lb = clean(logits_[static_cast<size_t>(b)]);
    return la != lb ? la > lb : a < b;
  };
  std::vector<int32_t> heap;  // front: the last of the k kept so far
  heap.reserve(k);
  for (size_t i = 0; i < logits_.size() && k > 0; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (heap.size() < k) {
      heap.push_back(id);
      std::push_heap(heap.begin(), heap.end(), higher);
    } else if (higher(id, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), higher);
      heap.back() = id;
      std::push_heap(heap.begin(), heap.end(), higher);
    }
  }
  std::sort(heap.begin(), heap.end(), higher);
  std::vector<TokenLogprob> out;
  for (int32_t id : heap) out.push_back({id, logprob(id)});
  return out;
}

}  // namespace minfer::runtime
