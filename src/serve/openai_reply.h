// The OpenAI front door of the completion core (serve/completion.h):
// /v1/chat/completions and /v1/completions answered as OpenAI answers them.
//
// Contract:
//   - Not streamed: one chat.completion / text_completion body with every
//     choice, its finish_reason, logprobs when asked (chat:
//     logprobs.content[] with bytes and top_logprobs; completions: tokens,
//     token_logprobs, top_logprobs, text_offset; a probability of 0 is
//     -9999, as OpenAI writes it), the usage, and as llama-server adds them
//     system_fingerprint and timings (serve/llama_api.h). A failed request
//     is its error object (a timeout: 503 naming it; a prompt past the
//     context: llama-server's exceed_context_size_error).
//   - Streamed: SSE chunks "data: {...}": chat first sends each choice's
//     role, then content deltas, then a chunk with its finish_reason; with
//     stream_options.include_usage a last chunk with the usage; then
//     "data: [DONE]". A request that fails once streaming has begun ends
//     with an error chunk and [DONE]; one refused before (busy, a bad
//     prompt) is an HTTP error.
//   - A client that goes away (HttpReply::client_gone, a failed write)
//     cancels the request's sequences.
// Threading: an HTTP worker thread.
#pragma once

#include <string>

#include "serve/completion.h"
#include "serve/http.h"

namespace minfer::serve {

void complete_openai(const CompletionContext& ctx, const CompletionParams& params,
                     const std::string& id, HttpReply& reply);

}  // namespace minfer::serve
