// One POST /v1/chat/completions or /v1/completions request, from its parsed
// body to the JSON reply or the SSE stream.
//
// Contract:
//   - The prompt (the chat template's text, a prompt string, or token ids)
//     is checked against the context: a prompt that leaves no room is 400
//     naming both numbers.
//   - n choices run as n sequences (choice i's seed is seed + i); a stop
//     string ends only its choice. Log-probabilities come per token, of the
//     model's distribution (runtime/logprobs.h); response_format json_object
//     / json_schema masks every draw through the ConstraintFactory.
//   - A request that runs past the deadline (--timeout) is cancelled: a
//     reply not yet sent becomes a 503 naming the timeout; a stream ends with
//     an error chunk and [DONE]. A client that hangs up (HttpReply's
//     client_gone, or a stream write that fails) cancels its sequences.
//   - Everything that can be refused is refused before the request is
//     queued, as an HTTP error: token ids outside the vocabulary, a prompt
//     past the context, a response_format that does not compile.
// Threading: runs on an HTTP worker thread; the engine is reached only
// through the Scheduler.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "model/model.h"
#include "runtime/chat_formatter.h"
#include "runtime/token_constraint.h"
#include "serve/http.h"
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
};

// Answers through `reply` (a JSON body or a chunked SSE stream); `id` is
// the response's id.
void complete(const CompletionContext& ctx, CompletionParams params, const std::string& id,
              HttpReply& reply);

}  // namespace minfer::serve
