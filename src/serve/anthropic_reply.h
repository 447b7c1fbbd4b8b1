// The Anthropic Messages API's front door on the completion core
// (serve/completion.h): POST /v1/messages and /v1/messages/count_tokens,
// answered as Anthropic answers them (the request and reply shapes are in
// serve/anthropic.h).
//
// Contract:
//   - answer_messages(): not streamed, one "message" body (its content
//     blocks — thinking, text, tool_use: serve/anthropic_content.h — the
//     stop_reason, the matched stop_sequence, the usage). Streamed, SSE with
//     `event:` lines: message_start, ping, each block's
//     content_block_start, content_block_delta(s) and content_block_stop,
//     message_delta, message_stop. A request refused before streaming began
//     (a bad field, a prompt past the context, a schema the forced call's
//     constraint cannot compile, busy) is an HTTP error; one that fails
//     after ends with an `event: error`.
//   - The prompt is the conversation planned as a chat (serve/chat_plan.h:
//     tools, thinking, a forced call, a prefill continued) and tokenized
//     here, so that message_start carries the input tokens;
//     answer_count_tokens() counts the very same tokens ({"input_tokens":
//     N}; no max_tokens needed). The reply is read as the OpenAI door reads
//     it (serve/chat_output.h, the server's --reasoning-format).
//   - Every error is Anthropic's {"type": "error", "error": {...}}.
//     AnthropicErrorReply rewrites the errors that code shared with the
//     OpenAI door sends on these paths (the server's filter: a wrong key,
//     loading, draining) into that shape.
//   - A client that goes away (HttpReply::client_gone, a failed write)
//     cancels the request's sequence.
// Threading: an HTTP worker thread (AnthropicErrorReply: the thread of the
// reply it wraps).
#pragma once

#include <string>
#include <string_view>

#include "runtime/sampler.h"
#include "serve/completion.h"
#include "serve/http.h"

namespace minfer::serve {

// /v1/messages and the paths under it.
bool is_anthropic_path(std::string_view path);

// `id` names the message ("msg_..."); `defaults` are the server's sampling
// settings, which a request's fields override.
void answer_messages(const CompletionContext& ctx, const runtime::SamplerParams& defaults,
                     const HttpRequest& req, const std::string& id, HttpReply& reply);
void answer_count_tokens(const CompletionContext& ctx, const HttpRequest& req, HttpReply& reply);

// The Status's HTTP status (serve/openai.h's http_status) and Anthropic's
// error object; a 503 adds Retry-After.
void send_anthropic_error(HttpReply& reply, const Status& s);

// Passes everything through to `inner`, except that an error it sends (4xx
// or 5xx with an OpenAI error object) goes out as Anthropic's error object
// with the same status and message.
class AnthropicErrorReply final : public HttpReply {
 public:
  explicit AnthropicErrorReply(HttpReply& inner) : inner_(inner) {}
  void add_header(std::string name, std::string value) override;
  void send(int status, std::string_view content_type, std::string body) override;
  bool begin_stream(std::string_view content_type) override;
  bool write(std::string_view chunk) override;
  void end() override;
  bool client_gone() const override;
  bool answered() const override;

 private:
  HttpReply& inner_;
};

}  // namespace minfer::serve
