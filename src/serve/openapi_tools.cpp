#include "serve/openapi_tools.h"

#include <string>

namespace minfer::serve {
namespace {

using nlohmann::ordered_json;

ordered_json string_enum(std::initializer_list<const char*> values) {
  ordered_json e = ordered_json::array();
  for (const char* v : values) e.push_back(v);
  return {{"type", "string"}, {"enum", e}};
}

ordered_json object(std::initializer_list<const char*> required, ordered_json properties) {
  ordered_json req = ordered_json::array();
  for (const char* r : required) req.push_back(r);
  ordered_json o = {{"type", "object"}, {"properties", std::move(properties)}};
  if (!req.empty()) o["required"] = req;
  return o;
}

const ordered_json& text() {
  static const ordered_json t = {{"type", "string"}};
  return t;
}

// serve/tool_request.h's rule for a tool's name.
ordered_json tool_name() {
  return {{"type", "string"}, {"pattern", "^[A-Za-z0-9_.-]{1,64}$"}};
}

// An arguments schema: an object schema, anything else in it free.
ordered_json object_schema() {
  return object({"type"},
                {{"type", string_enum({"object"})}, {"properties", {{"type", "object"}}}});
}

ordered_json openai_tool_call() {
  return object(
      {"type", "function"},
      {{"id", text()},
       {"type", string_enum({"function"})},
       {"function", object({"name", "arguments"},
                           {{"name", text()},
                            {"arguments",
                             {{"oneOf", ordered_json::array({text(), {{"type", "object"}}})}}}})}});
}

}  // namespace

void add_chat_tool_fields(ordered_json& chat, ordered_json& message, ordered_json& schemas) {
  const ordered_json tool = object(
      {"type", "function"}, {{"type", string_enum({"function"})},
                             {"function", object({"name"}, {{"name", tool_name()},
                                                            {"description", text()},
                                                            {"parameters", object_schema()}})}});
  chat["tools"] = {{"type", "array"}, {"items", tool}};
  chat["tool_choice"] = {
      {"oneOf",
       ordered_json::array({string_enum({"auto", "none", "required"}),
                            object({"type", "function"},
                                   {{"type", string_enum({"function"})},
                                    {"function", object({"name"}, {{"name", tool_name()}})}})})}};
  chat["parallel_tool_calls"] = {{"type", "boolean"}};
  chat["reasoning_format"] = string_enum({"none", "deepseek", "deepseek-legacy", "auto"});
  chat["reasoning_effort"] = text();
  chat["chat_template_kwargs"] = {{"type", "object"}};
  ordered_json& props = message["properties"];
  props["tool_calls"] = {{"type", "array"}, {"nullable", true}, {"items", openai_tool_call()}};
  props["tool_call_id"] = text();
  props["name"] = text();
  props["reasoning_content"] = {{"type", "string"}, {"nullable", true}};

  ordered_json reply_message =
      object({"role"}, {{"role", string_enum({"assistant"})},
                        {"content", {{"type", "string"}, {"nullable", true}}},
                        {"reasoning_content", text()},
                        {"tool_calls", {{"type", "array"}, {"items", openai_tool_call()}}}});
  const ordered_json choice = object(
      {"index", "finish_reason"}, {{"index", {{"type", "integer"}}},
                                   {"finish_reason", string_enum({"stop", "length", "tool_calls"})},
                                   {"message", std::move(reply_message)}});
  schemas["ChatCompletionResponse"] =
      object({"id", "object", "choices"}, {{"id", text()},
                                           {"object", string_enum({"chat.completion"})},
                                           {"model", text()},
                                           {"choices", {{"type", "array"}, {"items", choice}}},
                                           {"usage", {{"type", "object"}}}});
}

ordered_json anthropic_blocks() {
  const ordered_json text_block =
      object({"type", "text"}, {{"type", string_enum({"text"})}, {"text", text()}});
  const ordered_json result_content = {
      {"oneOf", ordered_json::array({text(), {{"type", "array"}, {"items", text_block}}})}};
  return {
      {"oneOf",
       ordered_json::array(
           {text_block,
            object({"type", "id", "name", "input"}, {{"type", string_enum({"tool_use"})},
                                                     {"id", text()},
                                                     {"name", text()},
                                                     {"input", {{"type", "object"}}}}),
            object({"type", "tool_use_id"}, {{"type", string_enum({"tool_result"})},
                                             {"tool_use_id", text()},
                                             {"content", result_content},
                                             {"is_error", {{"type", "boolean"}}}}),
            object(
                {"type", "thinking"},
                {{"type", string_enum({"thinking"})}, {"thinking", text()}, {"signature", text()}}),
            object({"type"}, {{"type", string_enum({"redacted_thinking"})}, {"data", text()}})})}};
}

void add_anthropic_tool_fields(ordered_json& fields) {
  const ordered_json tool =
      object({"name", "input_schema"},
             {{"name", tool_name()}, {"description", text()}, {"input_schema", object_schema()}});
  fields["tools"] = {{"type", "array"}, {"items", tool}};
  fields["tool_choice"] = object({"type"}, {{"type", string_enum({"auto", "any", "tool", "none"})},
                                            {"name", tool_name()},
                                            {"disable_parallel_tool_use", {{"type", "boolean"}}}});
  fields["thinking"] = {
      {"oneOf", ordered_json::array(
                    {object({"type", "budget_tokens"},
                            {{"type", string_enum({"enabled"})},
                             {"budget_tokens",
                              {{"type", "integer"}, {"minimum", 1024}, {"maximum", 1 << 24}}}}),
                     object({"type"}, {{"type", string_enum({"disabled", "adaptive"})}})})}};
}

}  // namespace minfer::serve
