// The OpenAPI 3.0 schemas of tool calling and reasoning (serve/openapi.h's
// document): the fields serve/tool_request.h and serve/openai.h read on
// /v1/chat/completions, the chat reply's tool_calls and reasoning_content,
// and the blocks and fields serve/anthropic.h reads on /v1/messages.
//
// Contract: each function adds its properties to the objects it is given
// (and named schemas to `schemas`), with the types, enums and ranges the
// parsers accept, so that a fuzzer generates them; what only the server can
// judge (a tool_choice naming a tool, a schema the constraint cannot
// compile) is left to its 400s.
// Threading: pure functions.
#pragma once

#include <nlohmann/json.hpp>

namespace minfer::serve {

// /v1/chat/completions: `chat` the request's properties, `message` the
// Message schema (tool_calls, tool_call_id, name, reasoning_content), and
// ChatCompletionResponse added to `schemas`.
void add_chat_tool_fields(nlohmann::ordered_json& chat, nlohmann::ordered_json& message,
                          nlohmann::ordered_json& schemas);

// /v1/messages: the content blocks a message's content may hold (text,
// tool_use, tool_result, thinking, redacted_thinking) ...
nlohmann::ordered_json anthropic_blocks();
// ... and tools, tool_choice and thinking added to the request's properties.
void add_anthropic_tool_fields(nlohmann::ordered_json& fields);

}  // namespace minfer::serve
