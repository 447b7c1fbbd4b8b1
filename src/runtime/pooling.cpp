#include "runtime/pooling.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

namespace minfer::runtime {

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::kNone:
      return "none";
    case Pooling::kMean:
      return "mean";
    case Pooling::kCls:
      return "cls";
    case Pooling::kLast:
      return "last";
  }
  return "?";
}

Result<Pooling> parse_pooling(std::string_view name) {
  for (Pooling p : {Pooling::kNone, Pooling::kMean, Pooling::kCls, Pooling::kLast}) {
    if (name == pooling_name(p)) return p;
  }
  return Status::invalid_argument("pooling '" + std::string(name) +
                                  "' is not one of none, mean, cls, last");
}

Result<Pooling> pooling_from_gguf(uint32_t value) {
  constexpr Pooling kByValue[] = {Pooling::kNone, Pooling::kMean, Pooling::kCls, Pooling::kLast};
  if (value < std::size(kByValue)) return kByValue[value];
  return Status::unimplemented("pooling type " + std::to_string(value) +
                               (value == 4 ? " (rank)" : "") + " is not supported");
}

Pooler::Pooler(Pooling pooling, int64_t n_embd, int64_t n_positions)
    : pooling_(pooling), n_embd_(n_embd), n_positions_(n_positions) {
  if (pooling_ == Pooling::kMean) sum_.assign(static_cast<size_t>(n_embd_), 0.0);
}

Status Pooler::add(int64_t first, std::span<const float> rows) {
  const auto width = static_cast<size_t>(n_embd_);
  const auto n = static_cast<int64_t>(rows.size() / width);
  if (first != seen_ || rows.size() != static_cast<size_t>(n) * width || first + n > n_positions_) {
    return Status::invalid_argument("pooling: rows of positions " + std::to_string(first) + ".." +
                                    std::to_string(first + n - 1) + " after " +
                                    std::to_string(seen_) + " of " + std::to_string(n_positions_));
  }
  for (int64_t i = 0; i < n; ++i) {
    const std::span<const float> row = rows.subspan(static_cast<size_t>(i) * width, width);
    const int64_t pos = first + i;
    switch (pooling_) {
      case Pooling::kMean:
        for (size_t j = 0; j < width; ++j) sum_[j] += row[j];
        break;
      case Pooling::kNone:
        kept_.emplace_back(row.begin(), row.end());
        break;
      case Pooling::kCls:
        if (pos == 0) kept_.emplace_back(row.begin(), row.end());
        break;
      case Pooling::kLast:
        if (pos == n_positions_ - 1) kept_.emplace_back(row.begin(), row.end());
        break;
    }
  }
  seen_ += n;
  return Status::ok();
}

std::vector<std::vector<float>> Pooler::result() const {
  if (!complete()) return {};
  if (pooling_ != Pooling::kMean) return kept_;
  std::vector<float> mean(sum_.size());
  for (size_t j = 0; j < sum_.size(); ++j) {
    mean[j] = static_cast<float>(sum_[j] / static_cast<double>(n_positions_));
  }
  return {std::move(mean)};
}

// As llama.cpp's common_embd_normalize computes it (the sum in double of
// float terms), so that a normalized vector matches llama-server's bits for
// the same input vector.
void normalize_embedding(std::span<float> v, int norm) {
  double sum = 0.0;
  if (norm < 0) return;
  if (norm == 0) {
    for (float x : v) sum = std::max(sum, static_cast<double>(std::abs(x)));
    sum /= 32760.0;
  } else if (norm == 2) {
    for (float x : v) sum += x * x;
    sum = std::sqrt(sum);
  } else {
    for (float x : v) sum += std::pow(std::abs(x), norm);
    sum = std::pow(sum, 1.0 / norm);
  }
  const float scale = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
  for (float& x : v) x *= scale;
}

}  // namespace minfer::runtime
