#include "runtime/ngram_draft.h"

#include <algorithm>
#include <string>

namespace minfer::runtime {

std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, NgramSizes sizes,
                                 int64_t max_tokens) {
  const auto size = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0) return {};
  for (int64_t n = std::min<int64_t>(sizes.ngram_max, size - 1); n >= sizes.ngram_min; --n) {
    const auto suffix = tokens.last(static_cast<size_t>(n));
    // The most recent earlier occurrence that has at least one token after
    // it: recent text predicts the next tokens best.
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min(max_tokens, size - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

Status NgramDrafter::check(NgramSizes s) {
  if (s.ngram_min < 1 || s.ngram_min > s.ngram_max || s.ngram_max > NgramSizes::kLongest) {
    return Status::invalid_argument(
        "n-gram sizes " + std::to_string(s.ngram_min) + " to " + std::to_string(s.ngram_max) +
        " must satisfy 1 <= min <= max <= " + std::to_string(NgramSizes::kLongest));
  }
  return Status::ok();
}

Result<std::vector<int32_t>> NgramDrafter::draft(SequenceId, std::span<const int32_t> tokens,
                                                 const SpeculativeParams&, int64_t max_tokens) {
  return ngram_draft(tokens, sizes_, max_tokens);
}

}  // namespace minfer::runtime
