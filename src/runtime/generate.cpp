#include "runtime/generate.h"

#include <chrono>
#include <optional>
#include <utility>
#include <vector>

namespace minfer::runtime {

Result<GenerationStats> generate(Session& session, Sampler& sampler,
                                 std::span<const int32_t> prompt, int64_t n_predict,
                                 const TokenSink& on_token) {
  if (prompt.empty()) return Status::invalid_argument("the prompt has no tokens");
  if (n_predict < 1)
    return Status::invalid_argument("number of tokens to predict must be positive");
  using Clock = std::chrono::steady_clock;
  GenerationStats st;
  st.prompt_tokens = static_cast<int64_t>(prompt.size());
  auto t0 = Clock::now();
  for (int32_t t : prompt) sampler.accept(t);
  MINFER_ASSIGN_OR_RETURN(std::span<const float> logits, session.eval(prompt, 1));
  auto t1 = Clock::now();
  st.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  const tokenizer::Tokenizer& tok = session.model().tokenizer();
  for (int64_t i = 0; i < n_predict; ++i) {
    MINFER_ASSIGN_OR_RETURN(int32_t next, sampler.sample(logits));
    sampler.accept(next);
    if (tok.is_eog(next)) {
      st.stopped_at_eog = true;
      break;
    }
    st.generated++;
    if (on_token && !on_token(next)) break;
    if (i + 1 == n_predict) break;  // no need to evaluate the last token
    const int32_t one[1] = {next};
    MINFER_ASSIGN_OR_RETURN(logits, session.eval(one, 1));
  }
  st.generation_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return st;
}

Result<GenerationStats> generate(Engine& engine, Request request, const TokenSink& on_token) {
  if (!engine.idle()) return Status::invalid_argument("the engine is running other requests");
  using Clock = std::chrono::steady_clock;
  GenerationStats st;
  st.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  const auto t0 = Clock::now();
  std::optional<Clock::time_point> first;  // when the first token was drawn
  MINFER_ASSIGN_OR_RETURN(SequenceId id, engine.add(std::move(request)));
  for (bool done = false; !done;) {
    MINFER_ASSIGN_OR_RETURN(std::vector<SequenceEvent> events, engine.step());
    for (const SequenceEvent& e : events) {
      // (A speculative step brings several tokens: none after a stop.)
      if (e.id != id || done) continue;
      st.reused_tokens = e.reused_tokens;
      st.drafted = e.drafted;
      st.draft_accepted = e.draft_accepted;
      st.decode_steps = e.decode_steps;
      if (!first && (e.has_token || e.finished != FinishReason::kNone)) first = Clock::now();
      if (e.has_token) {
        st.generated++;
        if (on_token && !on_token(e.token)) {
          engine.cancel(id);
          done = true;
        }
      }
      if (e.finished == FinishReason::kError) return Status::internal(e.error);
      st.stopped_at_eog = e.finished == FinishReason::kStop;
      done = done || e.finished != FinishReason::kNone;
    }
  }
  // A cancelled request's cells go back with the next step.
  if (!engine.idle()) MINFER_RETURN_IF_ERROR(engine.step().status());
  const auto t1 = first.value_or(Clock::now());
  st.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  st.generation_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return st;
}

}  // namespace minfer::runtime
