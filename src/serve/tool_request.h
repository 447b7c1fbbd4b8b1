// The tool-calling fields of an OpenAI chat request, read and checked:
// `tools`, `tool_choice`, `parallel_tool_calls`, and the tool fields of
// `messages` (an assistant's `tool_calls`, a tool result's `tool_call_id`).
//
// Contract:
//   - read_tools(body) reads tools ([{"type": "function", "function":
//     {"name", "description"?, "parameters"?}}]), tool_choice ("auto",
//     "none", "required" or {"type": "function", "function": {"name"}}) and
//     parallel_tool_calls (a boolean). Refused, an invalid-argument Status
//     naming the field (HTTP 400): a tool that is not a function, a missing
//     or malformed name (1..64 of letters, digits, '_', '-', '.'), a name
//     given twice, a description that is not a string, parameters that are
//     not an object schema ({"type": "object", ...}), a tool_choice that
//     names no tool among `tools`, "required" or a named choice without
//     tools. Without tools the choice is "none"; with them "auto".
//   - read_tool_call(call, field) reads one of an assistant's tool_calls
//     ({"id"?, "type": "function", "function": {"name", "arguments"}}; the
//     arguments a JSON string or an object): the template sees the
//     arguments as an object when they parse as one (HF templates apply
//     tojson or items() to them), else as the string.
//   - template_value(json) converts a request's JSON (bounded in depth by
//     serve/request_json.h) to a template value, keys in their order.
// Threading: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/chat_format.h"
#include "template/value.h"

namespace minfer::serve {

struct ToolDefinition {
  std::string name;
  std::string description;
  // The arguments' JSON schema ({"type": "object"} when the tool gave none);
  // keys in the request's order once order_tools() has run.
  nlohmann::ordered_json parameters;
};

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ChatTools {
  std::vector<ToolDefinition> tools;
  nlohmann::ordered_json definitions;  // `tools` as the request wrote it (for the template)
  ToolChoice choice = ToolChoice::kNone;
  std::string named;  // kNamed: the function
  bool parallel = true;

  // A call must come (required or a named function).
  bool forced() const { return choice == ToolChoice::kRequired || choice == ToolChoice::kNamed; }
  // The reply is read for calls.
  bool active() const { return !tools.empty() && choice != ToolChoice::kNone; }
};

[[nodiscard]] Result<ChatTools> read_tools(const nlohmann::json& body);

// The checks read_tools() applies to one tool, for other APIs' tool shapes
// (serve/anthropic.h): a name of 1 to 64 letters, digits, '_', '-' or '.';
// parameters an object schema ({"type": "object", "properties"?: {...}}),
// else an invalid-argument Status naming `field`.
bool valid_tool_name(const std::string& name);
[[nodiscard]] Status check_tool_parameters(const nlohmann::json& params, const std::string& field);

// The same tools again from the raw body, keys in the order written (what
// a template's tojson prints and the order a forced call's arguments are
// generated in). Leaves `tools` as it is when the body cannot be read again.
void order_tools(ChatTools& tools, std::string_view body);

[[nodiscard]] Result<runtime::ChatToolCall> read_tool_call(const nlohmann::json& call,
                                                           const std::string& field);

tmpl::Value template_value(const nlohmann::ordered_json& j);

}  // namespace minfer::serve
