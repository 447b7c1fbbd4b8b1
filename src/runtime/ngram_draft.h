// Prompt-lookup drafting: guesses a sequence's next tokens from its own
// text, without a second model. Where the last n tokens occurred before
// (n from ngram_max down to ngram_min, the most recent occurrence first), the
// tokens that followed them there are the draft. Repetitive text (code,
// lists, quoting, summaries of the prompt) drafts well; new text not at all,
// at the cost of one search per step.
//
// Contract: ngram_draft() returns at most max_tokens tokens, empty when no
// suffix of length ngram_min..ngram_max recurs with a token after it.
// Cost: O(ngram_max * tokens.size()) per call.
// Threading: NgramDrafter keeps no state; any thread may call it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/speculative.h"

namespace minfer::runtime {

struct NgramSizes {
  static constexpr int kLongest = 64;  // the most ngram_max may be
  int ngram_min = 2;
  int ngram_max = 4;
};

[[nodiscard]] std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, NgramSizes sizes,
                                               int64_t max_tokens);

class NgramDrafter final : public Drafter {
 public:
  // Sizes must satisfy 1 <= ngram_min <= ngram_max <= kLongest (check()).
  explicit NgramDrafter(NgramSizes sizes = {}) : sizes_(sizes) {}
  [[nodiscard]] static Status check(NgramSizes sizes);

  Result<std::vector<int32_t>> draft(SequenceId id, std::span<const int32_t> tokens,
                                     const SpeculativeParams& params, int64_t max_tokens) override;

 private:
  NgramSizes sizes_;
};

}  // namespace minfer::runtime
