#include "runtime/generate.h"

#include <chrono>

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

}  // namespace minfer::runtime
