// Which tokens a Session's KV cache holds, so that each new prompt of a
// conversation (the whole conversation rendered again) evaluates only what
// differs from the last one: the prefix bookkeeping of `minfer chat`.
//
// Contract:
//   - prepare(session, prompt) finds the longest prefix the prompt shares
//     with the cached tokens, keeping at least one prompt token to evaluate
//     (a forward pass needs one), truncates the session to it and returns
//     the rest: the tokens to evaluate now.
//   - commit(session, evaluated) records tokens the session has evaluated
//     since prepare (the prompt's rest, then every generated token but a last
//     one sampled and never evaluated) and truncates the session to match,
//     so that the cache and the record agree.
//   - clear() forgets everything (the session is reset by its owner).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/session.h"

namespace minfer::runtime {

class PromptCache {
 public:
  std::span<const int32_t> prepare(Session& session, std::span<const int32_t> prompt);
  void commit(Session& session, std::span<const int32_t> evaluated);
  void clear() { tokens_.clear(); }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  std::vector<int32_t> tokens_;
};

}  // namespace minfer::runtime
