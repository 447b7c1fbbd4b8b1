// Drafting with a second, smaller model of the same vocabulary: the draft
// model decodes greedily ahead of the target, one Session per sequence (its
// own KV cache), and proposes what it decoded.
//
// Contract:
//   - create() refuses a draft model whose vocabulary differs from the
//     target's (its size, or the first differing token's text, named in the
//     error): the engine feeds draft tokens to the target as they are.
//   - draft() keeps each sequence's Session in step with the sequence's
//     tokens: what the cache holds past the common prefix (rejected drafts)
//     is truncated, what is new is computed, then up to max_tokens tokens
//     are decoded greedily; drafting stops early at a token whose
//     probability under the draft model is below SpeculativeParams::p_min.
//   - release() frees the sequence's Session. Each live sequence holds one
//     Session of options.n_ctx positions.
// Threading: the engine's thread only.
#pragma once

#include <map>
#include <memory>

#include "model/model.h"
#include "runtime/session.h"
#include "runtime/speculative.h"

namespace minfer::runtime {

class DraftModelDrafter final : public Drafter {
 public:
  // `draft` is owned from here on; `target` is only compared.
  [[nodiscard]] static Result<std::unique_ptr<DraftModelDrafter>> create(
      const model::Model& target, std::unique_ptr<model::Model> draft,
      const SessionOptions& options);

  Result<std::vector<int32_t>> draft(SequenceId id, std::span<const int32_t> tokens,
                                     const SpeculativeParams& params, int64_t max_tokens) override;
  void release(SequenceId id) override { sessions_.erase(id); }
  const model::Model& model() const { return *model_; }

 private:
  struct State {
    std::unique_ptr<Session> session;
    std::vector<int32_t> cached;  // the tokens whose keys and values the session holds
  };
  DraftModelDrafter(std::unique_ptr<model::Model> m, const SessionOptions& o)
      : model_(std::move(m)), options_(o) {}
  // Brings the session's cache to `tokens` and returns the logits after them.
  Result<std::span<const float>> catch_up(State& st, std::span<const int32_t> tokens);

  std::unique_ptr<model::Model> model_;
  SessionOptions options_;
  std::map<SequenceId, State> sessions_;
};

// Whether two tokenizers have the same vocabulary: ok, or an
// invalid-argument error naming the first difference.
[[nodiscard]] Status same_vocabulary(const model::Model& target, const model::Model& draft);

}  // namespace minfer::runtime
