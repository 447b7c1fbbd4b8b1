// Speculative decoding: a sequence proposes (drafts) the tokens it expects
// next, the target model checks them all in one forward pass, and the
// longest prefix the target agrees with is kept (docs/ENGINE.md
// "Speculative decoding"). This header holds the per-request settings and
// the Drafter seam; the engine does the verifying (runtime/engine.h).
//
// Contract:
//   - SpeculativeParams rides on a Request: n_max > 0 turns speculation on
//     for that sequence. A step drafts at most n_max tokens (fewer where the
//     step, the token budget or the context has no room); a draft shorter
//     than n_min is dropped (the step decodes one token).
//   - A Drafter proposes tokens from a sequence's own tokens (prompt and
//     output so far). It may keep state per sequence (a draft model's KV
//     cache); release() says the sequence ended. Drafts are proposals only:
//     whatever a drafter returns, the tokens a sequence emits are the
//     target's own draws, so a bad drafter costs speed, never correctness.
// Threading: the engine's thread calls a Drafter; one Drafter serves one
// engine.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace minfer::runtime {

using SequenceId = int64_t;

struct SpeculativeParams {
  static constexpr int kDefaultDraftMax = 16;
  int n_max = 0;  // draft tokens per step at most; 0: no speculation
  int n_min = 0;  // shorter drafts are dropped
  // A draft model stops drafting at a token whose probability under it is
  // below this (its confidence); prompt lookup ignores it.
  float p_min = 0.75f;
};

// n_max and n_min 0 or more (n_max at most kMostDrafted), p_min in [0, 1];
// errors name the field as llama-server spells it (speculative.n_max).
inline constexpr int kMostDrafted = 1024;
[[nodiscard]] Status check(const SpeculativeParams& params);

class Drafter {
 public:
  virtual ~Drafter() = default;
  // At most max_tokens (>= 1) tokens to follow `tokens`, the sequence's
  // prompt and output so far; empty when it has no guess. An error fails
  // the engine's step.
  [[nodiscard]] virtual Result<std::vector<int32_t>> draft(SequenceId id,
                                                           std::span<const int32_t> tokens,
                                                           const SpeculativeParams& params,
                                                           int64_t max_tokens) = 0;
  // Sequence `id` ended: what was kept for it can go.
  virtual void release(SequenceId id) { (void)id; }
};

}  // namespace minfer::runtime
