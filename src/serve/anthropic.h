// Anthropic's Messages API request (POST /v1/messages, /v1/messages/count_tokens)
// as data: a body into CompletionParams for the chat plan (serve/chat_plan.h),
// and Anthropic's error objects. The reply's content blocks and stream
// events are serve/anthropic_content.h; the front door that runs them is
// serve/anthropic_reply.h.
//
// Contract:
//   - parse_messages() reads a Messages body. Unknown fields are ignored; a
//     known field of the wrong type or out of range is an invalid_argument
//     Status naming it. Read: model (a string, echoed), max_tokens (an
//     integer >= 1; required unless `count_only`), system (a string or a
//     list of text blocks), messages (roles "user" and "assistant"; content a
//     string or a list of blocks; consecutive turns of one role are joined
//     into one turn, as Anthropic combines them), stop_sequences,
//     temperature (0..1), top_p (0..1), top_k, metadata (an object, unused),
//     stream, tools, tool_choice and thinking (below).
//   - Blocks: text; in a user turn tool_result {tool_use_id, content (a
//     string or text blocks), is_error} — a "tool" message answering the
//     call (its name looked up among the earlier tool_use blocks; is_error
//     writes "Error: " before the content); in an assistant turn tool_use
//     {id, name, input (an object)} — one of the turn's tool_calls — and
//     thinking {thinking, signature} — its reasoning_content (the signature
//     unused) — while redacted_thinking is dropped. Refused, naming the
//     block as not supported yet: image, document and any other type; and a
//     block in the wrong role's turn. Text blocks within one message, and
//     joined turns, are separated by a blank line ("\n\n").
//   - tools: [{name, description?, input_schema}] (type absent or "custom";
//     Anthropic's server tools are refused), checked as the OpenAI door
//     checks its tools (serve/tool_request.h) and handed to the template in
//     OpenAI's shape. tool_choice {type: auto | any | tool | none, name,
//     disable_parallel_tool_use}: any is OpenAI's "required", tool a named
//     function; any or tool without tools, or a name none of them has, is
//     refused.
//   - thinking: {type: "enabled", budget_tokens (an integer >= 1024, as
//     Anthropic requires; not enforced)} or {type: "adaptive"} turns the
//     template's thinking on, {type: "disabled"} off; absent, the template's
//     default.
//   - A last assistant turn is a prefill: the reply continues it
//     (continue_final; an empty one is dropped). Refused: a prefill that
//     ends in whitespace (Anthropic refuses those too) or holds tool_use.
//   - Errors are {"type": "error", "error": {"type", "message"}}: 400
//     invalid_request_error, 401 authentication_error, 403
//     permission_error, 404 not_found_error, 413 request_too_large, 429
//     rate_limit_error, 503 overloaded_error, anything else api_error.
// Threading: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "base/status.h"
#include "runtime/sampler.h"
#include "serve/openai.h"

namespace minfer::serve {

struct MessagesRequest {
  // chat = true; messages: the system prompt first (role "system") when
  // given, then the turns (tool results as role "tool"); tools,
  // enable_thinking and continue_final as read.
  CompletionParams params;
  std::string model;  // as the request wrote it
};

[[nodiscard]] Result<MessagesRequest> parse_messages(const nlohmann::json& body,
                                                     const runtime::SamplerParams& defaults,
                                                     bool count_only);

// The tools' input schemas again from the raw body, keys in the order
// written (what the template prints and the order a forced call's input is
// generated in); leaves them as they are when the body cannot be read again.
void order_message_tools(ChatTools& tools, std::string_view body);

const char* anthropic_error_type(int http_status);
nlohmann::json anthropic_error_json(int http_status, const std::string& message);

}  // namespace minfer::serve
