#include "runtime/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

// Reproducibility across machines needs every a*b+c below rounded twice, as
// written; a fused multiply-add would change the last bits on some targets.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace minfer::runtime {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// e^x for x <= 0, from + - * and exact power-of-two scaling only, so the
// result is the same bits everywhere. Relative error ~1e-16 (less precise
// only where the result is subnormal, below 2^-1022).
double exp_nonpositive(double x) {
  if (!(x > -745.0)) return 0.0;  // rounds to 0 anyway; also catches NaN
  if (x >= 0.0) return 1.0;
  constexpr double kInvLn2 = 1.4426950408889634;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // trailing zero bits: k*hi is exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  // Any integer within ~0.5 of x/ln2 will do; truncating x/ln2 - 0.5 towards zero gives one.
  const int64_t ki = static_cast<int64_t>(x * kInvLn2 - 0.5);
  const double k = static_cast<double>(ki);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;  // |r| <= ~0.35
  // Taylor series to r^13: the truncation error is below 1e-17.
  constexpr double kInvFact[] = {1.0 / 479001600.0,
                                 1.0 / 39916800.0,
                                 1.0 / 3628800.0,
                                 1.0 / 362880.0,
                                 1.0 / 40320.0,
                                 1.0 / 5040.0,
                                 1.0 / 720.0,
                                 1.0 / 120.0,
                                 1.0 / 24.0,
                                 1.0 / 6.0,
                                 1.0 / 2.0,
                                 1.0,
                                 1.0};
  double p = 1.0 / 6227020800.0;  // 1/13!
  for (double c : kInvFact) p = p * r + c;
  // p * 2^k; ki is in [-1075, 0]. Below 2^-1022 scale in two exact-then-rounded steps.
  auto pow2 = [](int64_t e) {
    return std::bit_cast<double>(static_cast<uint64_t>(e + 1023) << 52);
  };
  if (ki >= -1022) return p * pow2(ki);
  return (p * pow2(ki + 64)) * pow2(-64);
}

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

Sampler::Sampler(SamplerParams params) : params_(std::move(params)) {
  reset();
}

Result<Sampler> Sampler::create(SamplerParams p) {
  auto bad = [](const char* name, double v, const char* want) {
    return Status::invalid_argument(std::string("sampler parameter ") + name + " = " + num(v) +
                                    " is invalid: must be " + want);
  };
  if (std::isnan(p.temperature) || std::isinf(p.temperature))
    return bad("temperature", p.temperature, "finite (<= 0 for greedy)");
  if (p.top_k < 0) return bad("top_k", p.top_k, ">= 0 (0 = off)");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return bad("top_p", p.top_p, "in (0, 1] (1 = off)");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return bad("min_p", p.min_p, "in [0, 1] (0 = off)");
  if (!(p.repeat_penalty > 0.0f) || std::isinf(p.repeat_penalty))
    return bad("repeat_penalty", p.repeat_penalty, "finite and > 0 (1 = off)");
  if (p.repeat_last_n < -1)
    return bad("repeat_last_n", p.repeat_last_n, ">= -1 (0 = off, -1 = whole history)");
  if (!std::isfinite(p.presence_penalty))
    return bad("presence_penalty", p.presence_penalty, "finite (0 = off)");
  if (!std::isfinite(p.frequency_penalty))
    return bad("frequency_penalty", p.frequency_penalty, "finite (0 = off)");
  for (const LogitBias& b : p.logit_bias) {
    if (b.id < 0) return bad("logit_bias id", b.id, "a token id (>= 0)");
    if (std::isnan(b.bias) || b.bias == kPosInf)
      return bad("logit_bias", b.bias, "a number or -inf (never)");
  }
  return Sampler(std::move(p));
}

void Sampler::reset() {
  history_.clear();
  uint64_t s = params_.seed;
  for (auto& word : rng_) word = splitmix64(s);
}

void Sampler::accept(int32_t token) {
  if (params_.repeat_last_n == 0) return;
  history_.push_back(token);
  if (params_.repeat_last_n > 0 && history_.size() > static_cast<size_t>(params_.repeat_last_n)) {
    history_.pop_front();
  }
}

uint64_t Sampler::next_random() {  // xoshiro256**
  const uint64_t result = rotl(rng_[1] * 5, 7) * 9;
  const uint64_t t = rng_[1] << 17;
  rng_[2] ^= rng_[0];
  rng_[3] ^= rng_[1];
  rng_[1] ^= rng_[2];
  rng_[0] ^= rng_[3];
  rng_[2] ^= t;
  rng_[3] = rotl(rng_[3], 45);
  return result;
}

// Stage 1 for the tokens it changes: (id, penalized logit), ids ascending.
// Each distinct token in the window once: the repetition penalty scales its
// logit, then frequency (times its count) and presence penalties are
// subtracted. NaN counts as -inf before the penalty.
std::vector<Sampler::Candidate> Sampler::penalized(std::span<const float> logits) const {
  std::vector<Candidate> out;
  if (!has_penalties() || history_.empty()) return out;
  std::vector<int32_t> seen(history_.begin(), history_.end());
  std::sort(seen.begin(), seen.end());
  for (size_t i = 0; i < seen.size();) {
    size_t j = i;
    while (j < seen.size() && seen[j] == seen[i]) ++j;
    const int32_t id = seen[i];
    const auto count = static_cast<float>(j - i);
    i = j;
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
    const float v = logits[static_cast<size_t>(id)];
    float l = std::isnan(v) ? kNegInf : v;
    if (params_.repeat_penalty != 1.0f) {
      l = l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    }
    out.push_back({l - (count * params_.frequency_penalty + params_.presence_penalty), id});
  }
  return out;
}

namespace {

// The chain's total order: higher logit first, then lower id.
bool before(const Sampler::Candidate& a, const Sampler::Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// +inf tokens take all the probability, equally; -inf ones can never be
// drawn (removal keeps the order).
void settle_infinities(std::vector<Sampler::Candidate>& cand) {
  if (std::any_of(cand.begin(), cand.end(),
                  [](const Sampler::Candidate& c) { return c.logit == kPosInf; })) {
    for (auto& c : cand) c.logit = c.logit == kPosInf ? 0.0f : kNegInf;
  }
  cand.erase(std::remove_if(cand.begin(), cand.end(),
                            [](const Sampler::Candidate& c) { return c.logit == kNegInf; }),
             cand.end());
}

}  // namespace

// Stages 1 and 2 in one pass for k < V (top-k, or k = 1 for greedy): the k
// first tokens in the chain's order, found with a bounded heap instead of
// materializing V candidates. The set is the one the full path selects (the
// order is total; +inf tokens are the highest, ties go to lower ids in both),
// sorted in that order.
void Sampler::select_top(std::span<const float> logits, size_t k,
                         std::vector<Candidate>& cand) const {
  const std::vector<Candidate> pen = penalized(logits);
  cand.clear();
  size_t next_pen = 0;
  // A heap whose front is the last of the k kept so far.
  const auto keep_later_first = [](const Candidate& a, const Candidate& b) { return before(a, b); };
  for (size_t i = 0; i < logits.size(); ++i) {
    float v = logits[i];
    if (next_pen < pen.size() && static_cast<size_t>(pen[next_pen].id) == i) {
      v = pen[next_pen++].logit;
    } else if (std::isnan(v)) {
      continue;
    }
    if (v == kNegInf) continue;
    const Candidate c{v, static_cast<int32_t>(i)};
    if (cand.size() < k) {
      cand.push_back(c);
      std::push_heap(cand.begin(), cand.end(), keep_later_first);
    } else if (before(c, cand.front())) {
      std::pop_heap(cand.begin(), cand.end(), keep_later_first);
      cand.back() = c;
      std::push_heap(cand.begin(), cand.end(), keep_later_first);
    }
  }
  std::sort(cand.begin(), cand.end(), before);
  settle_infinities(cand);
}

std::span<const float> Sampler::biased(std::span<const float> logits,
                                       std::vector<float>& buf) const {
  if (params_.logit_bias.empty()) return logits;
  buf.assign(logits.begin(), logits.end());
  for (const LogitBias& b : params_.logit_bias) {
    if (static_cast<size_t>(b.id) < buf.size()) buf[static_cast<size_t>(b.id)] += b.bias;
  }
  return buf;
}

Status Sampler::filter(std::span<const float> logits, std::vector<Candidate>& cand) const {
  if (logits.empty()) return Status::internal("sampler: empty logits");
  if (logits.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    return Status::internal("sampler: " + std::to_string(logits.size()) +
                            " logits exceed the int32 token id range");
  const size_t n = logits.size();
  const bool greedy = params_.temperature <= 0.0f;
  const size_t k = greedy ? 1 : static_cast<size_t>(params_.top_k);
  bool sorted = false;  // cand is in `before` order (else in id order)
  if (k > 0 && k < n) {
    select_top(logits, k, cand);
    sorted = true;
  } else {
    // Candidates in id order (index == id until -inf tokens are dropped).
    cand.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const float v = logits[i];
      cand[i] = {std::isnan(v) ? kNegInf : v, static_cast<int32_t>(i)};
    }
    for (const Candidate& p : penalized(logits)) cand[static_cast<size_t>(p.id)].logit = p.logit;
    settle_infinities(cand);
  }
  if (cand.empty())
    return Status::internal("sampler: all " + std::to_string(n) + " logits are -inf or NaN");

  // Greedy: the first maximum in id order.
  if (greedy) {
    Candidate best = cand.front();
    for (const auto& c : cand)
      if (before(c, best)) best = c;
    cand.assign(1, best);
    return Status::ok();
  }

  // 2. Top-k (the full path reaches here only with k = 0 or k >= V: nothing to cut).
  auto max_logit = [&] {
    if (sorted) return cand.front().logit;
    float m = cand.front().logit;
    for (const auto& c : cand) m = std::max(m, c.logit);
    return m;
  };

  // 3. Top-p, on the probabilities at temperature 1.
  if (params_.top_p < 1.0f && cand.size() > 1) {
    const double mx = max_logit();
    double total = 0.0;
    for (const auto& c : cand) total += exp_nonpositive(c.logit - mx);
    const double target = static_cast<double>(params_.top_p) * total;
    // Sort a growing prefix until its running sum reaches the target: each
    // round selects the next ranks with nth_element and sorts just those. The
    // order is total, so the prefix and its sum do not depend on the library.
    double cum = 0.0;
    size_t done = 0, keep = cand.size();
    size_t chunk = sorted ? cand.size() : std::min<size_t>(cand.size(), 256);
    for (;;) {
      if (!sorted) {
        const auto first = cand.begin() + static_cast<ptrdiff_t>(done);
        const auto last = cand.begin() + static_cast<ptrdiff_t>(chunk);
        if (chunk < cand.size()) std::nth_element(first, last - 1, cand.end(), before);
        std::sort(first, last, before);
      }
      for (; done < chunk; ++done) {
        cum += exp_nonpositive(cand[done].logit - mx);
        if (cum >= target) {
          keep = done + 1;
          break;
        }
      }
      if (keep != cand.size() || chunk == cand.size()) break;
      chunk = std::min(cand.size(), chunk * 2);
    }
    // Either a sorted prefix survives or the last partial sort covered everything.
    cand.resize(keep);
    sorted = true;
  }

  // 4. Min-p: p_i / p_max = exp(logit_i - max) >= min_p. The maximum always stays.
  if (params_.min_p > 0.0f && cand.size() > 1) {
    const double mx = max_logit();
    const double mp = params_.min_p;
    // The exact test decides; log() only brackets it, with a margin far wider
    // than any libm's error, to skip the exponential for clear-cut tokens.
    const double cut = std::log(mp);
    auto drop = [&](const Candidate& c) {
      const double d = c.logit - mx;
      if (d < cut - 1e-6) return true;
      if (d > cut + 1e-6) return false;
      return exp_nonpositive(d) < mp;
    };
    if (sorted) {
      cand.erase(std::find_if(cand.begin(), cand.end(), drop), cand.end());
    } else {
      cand.erase(std::remove_if(cand.begin(), cand.end(), drop), cand.end());
    }
  }
  return Status::ok();
}

double Sampler::weigh(const std::vector<Candidate>& cand, std::vector<double>& weights) const {
  double mx = cand.front().logit;
  for (const auto& c : cand) mx = std::max(mx, static_cast<double>(c.logit));
  const double t = params_.temperature;
  weights.resize(cand.size());
  double total = 0.0;
  for (size_t i = 0; i < cand.size(); ++i) {
    weights[i] = exp_nonpositive((cand[i].logit - mx) / t);
    total += weights[i];
  }
  return total;
}

Result<int32_t> Sampler::sample(std::span<const float> logits) {
  MINFER_RETURN_IF_ERROR(filter(biased(logits, biased_), scratch_));
  if (scratch_.size() == 1) {
    // Greedy, or a single survivor: the draw is still consumed when sampling,
    // so the generator's position depends only on the number of calls.
    if (params_.temperature > 0.0f) next_random();
    return scratch_.front().id;
  }
  const double total = weigh(scratch_, weights_);
  // A uniform double in [0, 1) from the top 53 bits.
  const double u = static_cast<double>(next_random() >> 11) * 0x1.0p-53;
  const double target = u * total;
  double cum = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < scratch_.size(); ++i) {
    if (weights_[i] <= 0.0) continue;
    cum += weights_[i];
    last_positive = i;
    if (target < cum) return scratch_[i].id;
  }
  return scratch_[last_positive].id;  // rounding left the target at the very top
}

Result<std::vector<TokenProb>> Sampler::distribution(std::span<const float> logits) const {
  std::vector<Candidate> cand;
  std::vector<float> buf;
  MINFER_RETURN_IF_ERROR(filter(biased(logits, buf), cand));
  std::vector<double> weights;
  const double total = cand.size() == 1 ? 1.0 : weigh(cand, weights);
  if (cand.size() == 1) weights.assign(1, 1.0);
  std::vector<TokenProb> out;
  out.reserve(cand.size());
  for (size_t i = 0; i < cand.size(); ++i) {
    if (weights[i] > 0.0) out.push_back({cand[i].id, static_cast<float>(weights[i] / total)});
  }
  std::sort(out.begin(), out.end(), [](const TokenProb& a, const TokenProb& b) {
    return a.p > b.p || (a.p == b.p && a.id < b.id);
  });
  return out;
}

}  // namespace minfer::runtime
