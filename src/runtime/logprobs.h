// Log-probabilities of the model's next-token distribution (the OpenAI
// API's logprobs / top_logprobs).
//
// Contract: log_softmax over one row of logits as the model gave them
// (before penalties, constraints and the sampler's filters, as OpenAI
// reports them): logprob(t) = logit(t) - max - ln(sum_i exp(logit_i - max)),
// the sum in double in id order (the same on every machine). NaN logits
// count as -inf. top() is the n most likely tokens, highest first, ties by
// lower id. A row whose every logit is -inf or NaN is an error.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace minfer::runtime {

struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0;
};

class LogSoftmax {
 public:
  static Result<LogSoftmax> of(std::span<const float> logits);
  float logprob(int32_t id) const;  // -inf for ids outside the row
  std::vector<TokenLogprob> top(int n) const;

 private:
  std::span<const float> logits_;
  double shift_ = 0;  // max + ln(sum)
};

}  // namespace minfer::runtime
