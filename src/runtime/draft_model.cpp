#include "runtime/draft_model.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace minfer::runtime {

Status same_vocabulary(const model::Model& target, const model::Model& draft) {
  const tokenizer::Tokenizer& a = target.tokenizer();
  const tokenizer::Tokenizer& b = draft.tokenizer();
  if (a.n_vocab() != b.n_vocab() || target.hparams().n_vocab != draft.hparams().n_vocab) {
    return Status::invalid_argument(
        "the draft model's vocabulary has " + std::to_string(b.n_vocab()) + " tokens (" +
        std::to_string(draft.hparams().n_vocab) + " logits), the target's " +
        std::to_string(a.n_vocab()) + " (" + std::to_string(target.hparams().n_vocab) + ")");
  }
  for (int32_t id = 0; id < a.n_vocab(); ++id) {
    if (a.token_text(id) != b.token_text(id)) {
      return Status::invalid_argument("the draft model's token " + std::to_string(id) + " is '" +
                                      b.token_text(id) + "', the target's '" + a.token_text(id) +
                                      "': the vocabularies differ");
    }
  }
  return Status::ok();
}

Result<std::unique_ptr<DraftModelDrafter>> DraftModelDrafter::create(
    const model::Model& target, std::unique_ptr<model::Model> draft, const SessionOptions& o) {
  MINFER_RETURN_IF_ERROR(same_vocabulary(target, *draft));
  return std::unique_ptr<DraftModelDrafter>(new DraftModelDrafter(std::move(draft), o));
}

Result<std::span<const float>> DraftModelDrafter::catch_up(State& st,
                                                           std::span<const int32_t> tokens) {
  auto common = static_cast<int64_t>(
      std::mismatch(st.cached.begin(), st.cached.end(), tokens.begin(), tokens.end()).first -
      st.cached.begin());
  // The logits after the last token are needed: it is computed again when
  // the cache already holds it.
  common = std::min(common, static_cast<int64_t>(tokens.size()) - 1);
  st.session->truncate(common);
  st.cached.resize(static_cast<size_t>(common));
  const auto rest = tokens.subspan(static_cast<size_t>(common));
  MINFER_ASSIGN_OR_RETURN(std::span<const float> logits, st.session->eval(rest, 1));
  st.cached.insert(st.cached.end(), rest.begin(), rest.end());
  return logits;
}

namespace {

// The most likely token and its probability.
std::pair<int32_t, float> top_token(std::span<const float> logits) {
  const auto best = std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - *best));
  return {static_cast<int32_t>(best - logits.begin()), static_cast<float>(1.0 / sum)};
}

}  // namespace

Result<std::vector<int32_t>> DraftModelDrafter::draft(SequenceId id,
                                                      std::span<const int32_t> tokens,
                                                      const SpeculativeParams& params,
                                                      int64_t max_tokens) {
  State& st = sessions_[id];
  if (!st.session) {
    MINFER_ASSIGN_OR_RETURN(st.session, Session::create(*model_, options_));
  }
  // Room in the draft's own context for the sequence and its draft.
  max_tokens = std::min(max_tokens, st.session->n_ctx() - static_cast<int64_t>(tokens.size()));
  std::vector<int32_t> out;
  if (max_tokens <= 0 || tokens.empty()) return out;
  MINFER_ASSIGN_OR_RETURN(std::span<const float> logits, catch_up(st, tokens));
  for (;;) {
    const auto [token, p] = top_token(logits);
    if (p < params.p_min) break;
    out.push_back(token);
    if (static_cast<int64_t>(out.size()) >= max_tokens) break;
    const int32_t one[1] = {token};
    MINFER_ASSIGN_OR_RETURN(logits, st.session->eval(one, 1));
    st.cached.push_back(token);
  }
  return out;
}

}  // namespace minfer::runtime
