// A rule on which tokens a sequence may generate next: constrained decoding
// (JSON, a JSON schema). The engine asks it before every draw of the
// sequence it belongs to and tells it what was drawn.
//
// Contract:
//   - mask(logits) sets the logit of every token that may not come next to
//     -infinity and leaves the others as they are. It fails (an internal or
//     invalid-argument Status) when no token at all may come next.
//   - accept(token) advances past a token mask() allowed; a token it did not
//     allow is an error.
// Threading: one constraint per sequence, driven by the engine's thread.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"

namespace minfer::runtime {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  [[nodiscard]] virtual Status mask(std::span<float> logits) const = 0;
  [[nodiscard]] virtual Status accept(int32_t token) = 0;
};

}  // namespace minfer::runtime
