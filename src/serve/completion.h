// The completion core every API front door shares: one request's prompt,
// checked and queued on the engine as its n choices, then each choice's new
// text and log-probabilities as they come. A front door (OpenAI's
// chat/completions and completions: serve/openai_reply.h; later others)
// only translates a request into CompletionParams and these deltas into its
// own bodies and stream events.
//
// Contract:
//   - start() refuses, before anything is queued, what can be refused:
//     token ids outside the vocabulary, a prompt that leaves no room in the
//     context (400 naming both numbers; a text that cannot fit is refused
//     without being tokenized), a response_format that does not compile. A
//     request the scheduler refuses at once (busy: 503, stopping) has a
//     failed status() right after start().
//   - n choices run as n sequences (choice i's seed is seed + i); a stop
//     string ends only its choice, and no part of one is ever in a delta.
//     Log-probabilities are of the model's distribution
//     (runtime/logprobs.h), per token, with the top alternatives asked for.
//   - poll() waits up to its timeout and returns each choice's new text; a
//     choice's last delta has `ended` set. A request past the deadline
//     (--timeout) is cancelled and its status() names the timeout.
//   - cancel() frees every sequence (a client that went away).
// Threading: one thread uses a CompletionRun (an HTTP worker); the engine is
// reached only through the Scheduler.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "model/model.h"
#include "runtime/chat_formatter.h"
#include "runtime/token_constraint.h"
#include "serve/chat_plan.h"
#include "serve/metrics.h"
#include "serve/openai.h"
#include "serve/scheduler.h"

namespace minfer::serve {

// A fresh constraint for one choice of a request with a JSON response_format.
using ConstraintFactory =
    std::function<Result<std::shared_ptr<runtime::TokenConstraint>>(const CompletionParams&)>;

struct CompletionContext {
  const model::Model* model = nullptr;
  Scheduler* scheduler = nullptr;
  Metrics* metrics = nullptr;
  const runtime::ChatFormatter* formatter = nullptr;
  ConstraintFactory constraints;  // empty: JSON formats are refused
  std::string model_id;
  int64_t n_ctx = 0;
  int64_t n_predict = -1;  // the server's default max tokens (-1: up to the context)
  int timeout_s = 600;
  ChatOptions chat;  // --reasoning-format, --reasoning-budget
  // The server's speculative decoding (n_max 0: off; then requests' own
  // speculative.* fields are ignored: the server has no drafter).
  runtime::SpeculativeParams speculative;
};

// One generated token's log-probability and the top alternatives.
struct TokenLogprob {
  std::string piece;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
  int32_t id = -1;               // the token's id
  std::vector<int32_t> top_ids;  // top[k]'s id
};

// Why start() refused a prompt that leaves no room in the context: its token
// count (a text refused before tokenizing: at least that many, `at_least`)
// and the per-sequence context. llama-server reports both numbers.
struct ContextOverflow {
  int64_t n_prompt_tokens = 0;
  int64_t n_ctx = 0;
  bool at_least = false;
};

// The first choice's timings as llama-server reports them: the prompt phase
// from the request's arrival to its first token (queueing included), the
// generation phase from the first token to the last.
struct CompletionTimings {
  int64_t prompt_n = 0;  // the prompt's tokens (reused cached pages included)
  double prompt_ms = 0;
  int64_t predicted_n = 0;
  double predicted_ms = 0;
  // Speculative decoding (llama-server's names): tokens drafted and kept.
  bool speculative = false;
  int64_t draft_n = 0, draft_n_accepted = 0;
};

// What one poll brought for one choice.
struct ChoiceDelta {
  std::string text;
  std::vector<TokenLogprob> logprobs;  // when asked for: one per token of `text`
  bool ended = false;                  // the choice's last delta
};

class CompletionRun {
 public:
  // `overflow`, when given, receives the numbers of a prompt refused for
  // leaving no room in the context (an out_of_range error).
  [[nodiscard]] static Result<std::unique_ptr<CompletionRun>> start(
      const CompletionContext& ctx, const CompletionParams& p, ContextOverflow* overflow = nullptr);
  ~CompletionRun();
  CompletionRun(const CompletionRun&) = delete;
  CompletionRun& operator=(const CompletionRun&) = delete;

  std::vector<ChoiceDelta> poll(int timeout_ms);
  bool finished() const;
  Status status() const;  // why the request failed (ok otherwise)
  void cancel();
  // Once, at the end: the request's counts and latencies into the metrics.
  void record();

  size_t n() const;
  // "stop" (an end-of-generation token or a stop string) or "length".
  const char* finish_reason(size_t i) const;
  int64_t prompt_tokens() const;
  int64_t completion_tokens() const;  // all choices
  // The stop string that ended choice i ("" when none did).
  const std::string& stop_word(size_t i) const;
  CompletionTimings timings() const;

 private:
  struct State;
  explicit CompletionRun(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace minfer::serve
