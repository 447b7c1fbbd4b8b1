// Token sampler: picks the next token id from a row of logits.
//
// Contract: llama.cpp's parameter names and the order of its default sampler
// chain, restricted to these stages:
//   0. logit bias: each (id, bias) of logit_bias is added to that token's
//      logit, in the order given (an id twice gets both); a bias of -inf bans
//      the token; ids outside the row are ignored. Every later stage, greedy
//      included, sees the biased logits.
//   1. penalties: every distinct token among the last repeat_last_n accepted
//      tokens (0 = off, -1 = the whole history since the last reset()) has
//      its logit divided by repeat_penalty if the logit is > 0 and multiplied
//      by it otherwise (1 = off), then lowered by frequency_penalty times its
//      count in the window plus presence_penalty (0 = off; OpenAI's
//      presence/frequency penalties, applied as llama.cpp does);
//   2. top-k: keep the k highest logits (0 = off; ties go to the lower id);
//   3. top-p (nucleus): keep the smallest prefix of the tokens, highest
//      probability first, whose probability sum reaches top_p; the token that
//      crosses the threshold is kept, and so at least one is (1 = off);
//   4. min-p: keep the tokens whose probability is >= min_p times the largest
//      probability (0 = off);
//   5. temperature: divide the logits by `temperature`;
//   6. a seeded draw from the softmax of what is left.
// Top-p and min-p see the probabilities before temperature, as in llama.cpp.
// temperature <= 0 means greedy: the penalties still apply, then the highest
// logit wins (ties go to the lowest id) and the random generator is not used;
// otherwise every sample() call consumes exactly one random number.
//
// Logits: NaN counts as -inf; a -inf token can never be drawn. If any logit is
// +inf (after the penalty), the +inf tokens share the probability equally and
// every other token gets none. An empty row, or one where every logit is -inf
// or NaN, is an error; so is a row of more than INT32_MAX entries. History
// token ids outside the row are ignored.
//
// Reproducibility: the same seed and the same sequence of sample()/accept()
// calls give the same tokens on every machine and compiler. The generator is
// xoshiro256** seeded through splitmix64; exponentials are computed with
// basic IEEE arithmetic only (no libm transcendental functions), and every sum
// runs in an order fixed by the inputs (by id, or by logit then id), never by
// the standard library's partial-sort internals.
//
// Cost: with top-k (or greedy) one pass over the V logits keeping the k best
// in a bounded heap (O(V) when few tokens beat the k-th, O(V log k) at
// worst), then the k survivors; without top-k O(V) candidates, and top-p
// sorts only as long a prefix as it needs.
//
// Errors: create() rejects out-of-range parameters with a message naming the
// parameter and its value; sample() and distribution() return errors as values.
//
// Threading: one Sampler per sequence; a Sampler is not thread-safe (sample()
// advances its generator and reuses scratch memory). Distinct Samplers are
// independent.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "base/status.h"

namespace minfer::runtime {

// One entry of SamplerParams::logit_bias: a token id and what is added to its
// logit (-inf: never drawn).
struct LogitBias {
  int32_t id;
  float bias;
};

struct SamplerParams {
  float temperature = 0.8f;        // <= 0: greedy
  int top_k = 40;                  // >= 0; 0 = off
  float top_p = 0.95f;             // (0, 1]; 1 = off
  float min_p = 0.05f;             // [0, 1]; 0 = off
  float repeat_penalty = 1.0f;     // > 0; 1 = off
  float presence_penalty = 0.0f;   // finite; 0 = off
  float frequency_penalty = 0.0f;  // finite; 0 = off
  int repeat_last_n = 64;          // >= -1; 0 = off, -1 = whole history since reset()
  uint64_t seed = 0;               // every value is a fixed, reproducible seed
  // Stage 0: added to the logits before anything else (OpenAI's logit_bias).
  std::vector<LogitBias> logit_bias;
};

// One surviving token of the chain and its final probability.
struct TokenProb {
  int32_t id;
  float p;
};

class Sampler {
 public:
  // One token of the chain: its (penalized) logit and id.
  struct Candidate {
    float logit;
    int32_t id;
  };

  // Validates the parameters: temperature not NaN or infinite, top_k >= 0,
  // top_p in (0, 1], min_p in [0, 1], repeat_penalty finite and > 0,
  // repeat_last_n >= -1, every logit_bias id >= 0 and bias not NaN or +inf.
  static Result<Sampler> create(SamplerParams params);

  // Runs the chain over `logits` (one entry per token id) and draws a token.
  // Does not record it: call accept() with the token actually emitted.
  Result<int32_t> sample(std::span<const float> logits);

  // The distribution sample() would draw from now: the surviving tokens with
  // their probabilities (summing to 1), highest first, ties by lower id. With
  // temperature <= 0 it is the single greedy token with p = 1. Draws nothing.
  Result<std::vector<TokenProb>> distribution(std::span<const float> logits) const;

  // Appends a token to the history the repetition penalty looks at.
  void accept(int32_t token);

  // Clears the history and restarts the generator from the seed, so that the
  // same calls afterwards give the same tokens as after create().
  void reset();

  const SamplerParams& params() const { return params_; }

  // True when sample() is the argmax of the logits, the first largest one
  // (greedy with no repetition penalty and no logit bias): a caller may
  // compute that where the logits are (graph::Op::kArgMax) and skip sample().
  bool is_argmax() const {
    return params_.temperature <= 0.0f && !has_penalties() && params_.logit_bias.empty();
  }

  // True when stage 1 changes any logit.
  bool has_penalties() const {
    return params_.repeat_last_n != 0 &&
           (params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
            params_.frequency_penalty != 0.0f);
  }

 private:
  explicit Sampler(SamplerParams params);

  // Runs stages 1-4 into `cand`; with temperature <= 0, leaves only the
  // greedy token. On success `cand` is non-empty.
  Status filter(std::span<const float> logits, std::vector<Candidate>& cand) const;
  // Stage 0: `logits` itself when there is no bias, else a biased copy in `buf`.
  std::span<const float> biased(std::span<const float> logits, std::vector<float>& buf) const;
  std::vector<Candidate> penalized(std::span<const float> logits) const;
  void select_top(std::span<const float> logits, size_t k, std::vector<Candidate>& cand) const;
  // Stage 5: unnormalized weights exp((logit - max) / temperature) into
  // `weights`, in the order of `cand`; returns their sum (>= 1).
  double weigh(const std::vector<Candidate>& cand, std::vector<double>& weights) const;

  uint64_t next_random();

  SamplerParams params_;
  uint64_t rng_[4];
  std::deque<int32_t> history_;
  std::vector<Candidate> scratch_;
  std::vector<double> weights_;
  std::vector<float> biased_;  // stage 0's copy of the row
};

}  // namespace minfer::runtime
