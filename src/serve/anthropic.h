// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens)
// as data: a request body into CompletionParams, the prompt a conversation
// renders to, and the reply bodies, stream events and error objects. The
// front door that runs them is serve/anthropic_reply.h.
//
// Contract:
//   - parse_messages() reads a Messages body. Unknown fields are ignored; a
//     known field of the wrong type or out of range is an invalid_argument
//     Status naming it. Read: model (a string, echoed), max_tokens (an
//     integer >= 1; required unless `count_only`), system (a string or a
//     list of text blocks), messages (roles "user" and "assistant"; content a
//     string or a list of text blocks; consecutive turns of one role are
//     joined into one turn, as Anthropic combines them), stop_sequences,
//     temperature (0..1), top_p (0..1), top_k, metadata (an object, unused),
//     stream. Refused, naming them as not supported yet: image, document,
//     tool_use, tool_result, thinking and redacted_thinking blocks (and any
//     other non-text block), a non-empty `tools`, and `tool_choice`.
//     Text blocks within one message, and joined turns, are separated by a
//     blank line ("\n\n").
//   - A last assistant turn is a prefill: the reply continues it (an empty
//     one is dropped). messages_prompt() renders it as the template's
//     opening of an assistant turn followed by the prefill, and refuses
//     (invalid_argument) a prefill the template would not render that way
//     (e.g. one it trims), or one that ends in whitespace (Anthropic refuses
//     those too), rather than answer a different prompt.
//   - Errors are {"type": "error", "error": {"type", "message"}}: 400
//     invalid_request_error, 401 authentication_error, 403
//     permission_error, 404 not_found_error, 413 request_too_large, 429
//     rate_limit_error, 503 overloaded_error, anything else api_error.
// Threading: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/chat_formatter.h"
#include "runtime/sampler.h"
#include "serve/openai.h"

namespace minfer::serve {

struct MessagesRequest {
  // chat = true; messages: the system prompt first (role "system") when
  // given, then the turns, roles alternating once joined.
  CompletionParams params;
  std::string model;  // as the request wrote it
};

[[nodiscard]] Result<MessagesRequest> parse_messages(const nlohmann::json& body,
                                                     const runtime::SamplerParams& defaults,
                                                     bool count_only);

// The prompt text of a conversation through the model's chat format, with a
// final assistant turn continued rather than closed.
[[nodiscard]] Result<std::string> messages_prompt(
    const runtime::ChatFormatter& formatter, const std::vector<runtime::ChatMessage>& messages);

// Anthropic's stop_reason for a finished choice: "stop_sequence" when a stop
// string ended it, "end_turn" for an end-of-generation token ("stop"),
// "max_tokens" otherwise ("length").
const char* stop_reason(std::string_view finish_reason, const std::string& stop_sequence);

// A reply as it stands; stop_reason "" while it runs (null in JSON), and
// stop_sequence "" when none ended it (null).
struct MessageReply {
  std::string id, model, text;
  std::string stop_reason, stop_sequence;
  int64_t input_tokens = 0, output_tokens = 0;
};

// The whole "message" object (the body of a reply that is not streamed).
nlohmann::json message_json(const MessageReply& m);
// One server-sent event: "event: <data.type>\ndata: <data>\n\n".
std::string sse_event(const nlohmann::json& data);
// The stream's first events: message_start (no content, the input tokens),
// content_block_start (index 0, empty text) and ping.
std::string stream_opening(const MessageReply& m);
// A content_block_delta with a text_delta.
std::string text_delta_event(std::string_view text);
// The stream's last events: content_block_stop, message_delta (stop_reason,
// stop_sequence, output tokens) and message_stop.
std::string stream_closing(const MessageReply& m);

const char* anthropic_error_type(int http_status);
nlohmann::json anthropic_error_json(int http_status, const std::string& message);
// An error event, for a request that fails once streaming has begun.
std::string error_event(const Status& s);

}  // namespace minfer::serve
