#include "serve/openapi.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>

#include "runtime/engine.h"
#include "serve/openai.h"
#include "serve/openapi_tools.h"

namespace minfer::serve {
namespace {

using nlohmann::ordered_json;

ordered_json ref(const char* name) {
  return {{"$ref", std::string("#/components/schemas/") + name}};
}

ordered_json integer(int64_t lo, int64_t hi) {
  return {{"type", "integer"}, {"minimum", lo}, {"maximum", hi}};
}

ordered_json number(double lo, double hi) {
  return {{"type", "number"}, {"minimum", lo}, {"maximum", hi}};
}

// OpenAI's {"<token id>": bias} or llama-server's [[token id, bias], ...]
// (bias false: never). Ids past the model's vocabulary are a 400 at the server.
ordered_json logit_bias() {
  const ordered_json bias = {
      {"oneOf",
       ordered_json::array({number(-100, 100), {{"type", "boolean"}, {"enum", {false}}}})}};
  // Keys are token ids as decimal strings (OpenAPI 3.0 has no propertyNames).
  const ordered_json as_object = {{"type", "object"}, {"additionalProperties", bias}};
  const ordered_json pair = {
      {"type", "array"},
      {"minItems", 2},
      {"maxItems", 2},
      {"items",
       {{"anyOf", ordered_json::array({integer(0, std::numeric_limits<int32_t>::max()), bias})}}}};
  return {{"nullable", true},
          {"oneOf", ordered_json::array({as_object, {{"type", "array"}, {"items", pair}}})}};
}

// The sampling and output fields both completion endpoints read (openai.h).
ordered_json common_fields() {
  constexpr int64_t kMaxTokens = 1 << 24;
  return {
      {"model", {{"type", "string"}}},
      {"max_tokens", integer(1, kMaxTokens)},
      {"max_completion_tokens", integer(1, kMaxTokens)},
      {"temperature", number(0, 100)},
      {"top_p", number(0, 1)},
      {"top_k", integer(0, 1 << 30)},
      {"min_p", number(0, 1)},
      {"seed", {{"type", "integer"}}},
      {"repeat_penalty", number(1e-6, 1e6)},
      {"repetition_penalty", number(1e-6, 1e6)},
      {"presence_penalty", number(-2, 2)},
      {"frequency_penalty", number(-2, 2)},
      {"stop",
       {{"oneOf", ordered_json::array(
                      {{{"type", "string"}},
                       {{"type", "array"}, {"maxItems", 4}, {"items", {{"type", "string"}}}}})}}},
      {"n", integer(1, CompletionParams::kMaxChoices)},
      {"stream", {{"type", "boolean"}}},
      {"stream_options",
       {{"type", "object"}, {"properties", {{"include_usage", {{"type", "boolean"}}}}}}},
      {"response_format", ref("ResponseFormat")},
      {"user", {{"type", "string"}}},
      {"logit_bias", logit_bias()},
  };
}

ordered_json schemas() {
  ordered_json s;
  s["Error"] = {{"type", "object"},
                {"required", {"error"}},
                {"properties",
                 {{"error",
                   {{"type", "object"},
                    {"required", {"message", "type", "code"}},
                    {"properties",
                     {{"message", {{"type", "string"}}},
                      {"type", {{"type", "string"}}},
                      {"code", {{"type", "integer"}}}}}}}}}};
  const ordered_json text_part = {
      {"type", "object"},
      {"required", {"type", "text"}},
      {"properties",
       {{"type", {{"type", "string"}, {"enum", {"text"}}}}, {"text", {{"type", "string"}}}}}};
  s["Message"] = {
      {"type", "object"},
      {"required", {"role"}},
      {"properties",
       {{"role", {{"type", "string"}}},
        {"content",
         {{"nullable", true},
          {"oneOf", ordered_json::array(
                        {{{"type", "string"}}, {{"type", "array"}, {"items", text_part}}})}}}}}};
  s["ResponseFormat"] = {
      {"type", "object"},
      {"required", {"type"}},
      {"properties",
       {{"type", {{"type", "string"}, {"enum", {"text", "json_object", "json_schema"}}}},
        {"json_schema",
         {{"type", "object"},
          {"required", {"schema"}},
          {"properties", {{"name", {{"type", "string"}}}, {"schema", {{"type", "object"}}}}}}},
        // llama-server's shape: the schema directly under response_format.
        {"schema", {{"type", "object"}}}}}};
  ordered_json chat = common_fields();
  chat["messages"] = {{"type", "array"}, {"minItems", 1}, {"items", ref("Message")}};
  chat["logprobs"] = {{"type", "boolean"}};
  chat["top_logprobs"] = integer(0, runtime::Request::kMaxTopLogprobs);
  add_chat_tool_fields(chat, s["Message"], s);
  s["ChatCompletionRequest"] = {
      {"type", "object"}, {"required", {"messages"}}, {"properties", chat}};
  ordered_json text = common_fields();
  text["prompt"] = {
      {"oneOf", ordered_json::array(
                    {{{"type", "string"}},
                     {{"type", "array"},
                      {"minItems", 1},
                      {"items", {{"type", "integer"}, {"minimum", 0}, {"maximum", INT32_MAX}}}},
                     {{"type", "array"},
                      {"minItems", 1},
                      {"maxItems", 1},
                      {"items", {{"type", "string"}}}}})}};
  text["logprobs"] = integer(0, runtime::Request::kMaxTopLogprobs);
  s["CompletionRequest"] = {{"type", "object"}, {"required", {"prompt"}}, {"properties", text}};
  s["TokenizeRequest"] = {{"type", "object"},
                          {"required", {"content"}},
                          {"properties",
                           {{"content", {{"type", "string"}}},
                            {"add_special", {{"type", "boolean"}}},
                            {"with_pieces", {{"type", "boolean"}}}}}};
  s["DetokenizeRequest"] = {
      {"type", "object"},
      {"required", {"tokens"}},
      {"properties",
       {{"tokens", {{"type", "array"}, {"items", {{"type", "integer"}, {"minimum", 0}}}}}}}};
  return s;
}

ordered_json error_replies(std::initializer_list<const char*> codes) {
  ordered_json r;
  for (const char* c : codes) {
    r[c] = {{"description", "an OpenAI error object"},
            {"content", {{"application/json", {{"schema", ref("Error")}}}}}};
  }
  return r;
}

ordered_json post(const char* summary, const char* request, const char* reply_type) {
  ordered_json replies = error_replies({"400", "401", "404", "413", "429", "500", "503"});
  replies["200"] = {{"description", "the reply"},
                    {"content",
                     {{"application/json", {{"schema", {{"type", "object"}}}}},
                      {reply_type, {{"schema", {{"type", "string"}}}}}}}};
  return {{"post",
           {{"summary", summary},
            {"requestBody",
             {{"required", true}, {"content", {{"application/json", {{"schema", ref(request)}}}}}}},
            {"responses", replies}}}};
}

ordered_json get(const char* summary, const char* type) {
  ordered_json replies = error_replies({"401", "503"});
  replies["200"] = {{"description", summary}, {"content", {{type, {{"schema", {}}}}}}};
  return {{"get", {{"summary", summary}, {"responses", replies}}}};
}

// Anthropic's Messages API (serve/anthropic.h): its blocks, tools and
// thinking (serve/openapi_tools.h), and its own error object.
void add_anthropic(ordered_json& paths, ordered_json& schemas) {
  const ordered_json text_block = {
      {"type", "object"},
      {"required", {"type", "text"}},
      {"properties",
       {{"type", {{"type", "string"}, {"enum", {"text"}}}}, {"text", {{"type", "string"}}}}}};
  const ordered_json system = {
      {"oneOf",
       ordered_json::array({{{"type", "string"}}, {{"type", "array"}, {"items", text_block}}})}};
  const ordered_json content = {
      {"oneOf", ordered_json::array(
                    {{{"type", "string"}}, {{"type", "array"}, {"items", anthropic_blocks()}}})}};
  const ordered_json message = {
      {"type", "object"},
      {"required", {"role", "content"}},
      {"properties",
       {{"role", {{"type", "string"}, {"enum", {"user", "assistant"}}}}, {"content", content}}}};
  ordered_json fields = {
      {"model", {{"type", "string"}}},
      {"messages", {{"type", "array"}, {"minItems", 1}, {"items", message}}},
      {"system", system},
  };
  add_anthropic_tool_fields(fields);
  schemas["AnthropicCountTokensRequest"] = {
      {"type", "object"}, {"required", {"model", "messages"}}, {"properties", fields}};
  fields["max_tokens"] = integer(1, 1 << 24);
  fields["temperature"] = number(0, 1);
  fields["top_p"] = number(0, 1);
  fields["top_k"] = integer(0, 1 << 30);
  fields["stop_sequences"] = {{"type", "array"}, {"maxItems", 64}, {"items", {{"type", "string"}}}};
  fields["metadata"] = {{"type", "object"}};
  fields["stream"] = {{"type", "boolean"}};
  schemas["AnthropicMessagesRequest"] = {{"type", "object"},
                                         {"required", {"model", "max_tokens", "messages"}},
                                         {"properties", fields}};
  schemas["AnthropicError"] = {
      {"type", "object"},
      {"required", {"type", "error"}},
      {"properties",
       {{"type", {{"type", "string"}}},
        {"error",
         {{"type", "object"},
          {"required", {"type", "message"}},
          {"properties", {{"type", {{"type", "string"}}}, {"message", {{"type", "string"}}}}}}}}}};
  const auto endpoint = [](const char* summary, const char* request) {
    ordered_json op = post(summary, request, "text/event-stream");
    for (auto& [code, reply] : op["post"]["responses"].items()) {
      if (code != "200") {
        reply = {{"description", "an Anthropic error object"},
                 {"content", {{"application/json", {{"schema", ref("AnthropicError")}}}}}};
      }
    }
    return op;
  };
  paths["/v1/messages"] = endpoint("an Anthropic message", "AnthropicMessagesRequest");
  paths["/v1/messages/count_tokens"] =
      endpoint("a Messages request's prompt tokens", "AnthropicCountTokensRequest");
}

// llama-server's native endpoints (serve/llama_api.h). GET /slots is left
// out: it answers 501 (no per-slot state), which the description's fuzzing
// would count as a server error.
void add_llama(ordered_json& paths, ordered_json& schemas) {
  ordered_json fields = {
      {"prompt",
       {{"oneOf",
         ordered_json::array({{{"type", "string"}},
                              {{"type", "array"},
                               {"minItems", 1},
                               {"items",
                                {{"oneOf", ordered_json::array({integer(0, INT32_MAX),
                                                                {{"type", "string"}}})}}}}})}}},
      {"n_predict", integer(-1, 1 << 24)},
      {"n_probs", integer(0, runtime::Request::kMaxTopLogprobs)},
      {"temperature", number(-100, 100)},
      {"top_k", integer(0, 1 << 30)},
      {"top_p", number(0, 1)},
      {"min_p", number(0, 1)},
      {"repeat_penalty", number(1e-6, 1e6)},
      {"repeat_last_n", integer(-1, 1 << 24)},
      {"presence_penalty", number(-2, 2)},
      {"frequency_penalty", number(-2, 2)},
      {"seed", {{"type", "integer"}}},
      {"stop", {{"type", "array"}, {"items", {{"type", "string"}}}}},
      {"stream", {{"type", "boolean"}}},
      {"ignore_eos", {{"type", "boolean"}}},
      {"cache_prompt", {{"type", "boolean"}}},
      {"logit_bias", logit_bias()},
      {"json_schema", {{"type", "object"}}},
      {"response_format", ref("ResponseFormat")},
  };
  schemas["LlamaCompletionRequest"] = {
      {"type", "object"}, {"required", {"prompt"}}, {"properties", fields}};
  schemas["ApplyTemplateRequest"] = {
      {"type", "object"},
      {"required", {"messages"}},
      {"properties",
       {{"messages", {{"type", "array"}, {"minItems", 1}, {"items", ref("Message")}}}}}};
  paths["/completion"] =
      post("llama-server's completion", "LlamaCompletionRequest", "text/event-stream");
  paths["/apply-template"] =
      post("the chat template's text", "ApplyTemplateRequest", "application/json");
  paths["/props"] = get("the server's properties", "application/json");
}

// The embeddings endpoints (serve/embeddings.h), described only when the
// server answers them (--embedding): otherwise they are 501.
void add_embeddings(ordered_json& paths, ordered_json& schemas) {
  const ordered_json ids = {{"type", "array"}, {"minItems", 1}, {"items", integer(0, INT32_MAX)}};
  const ordered_json one = {
      {"oneOf", ordered_json::array({{{"type", "string"}, {"minLength", 1}}, ids})}};
  const ordered_json input = {
      {"oneOf", ordered_json::array(
                    {one["oneOf"][0],
                     ids,
                     {{"type", "array"}, {"minItems", 1}, {"maxItems", 2048}, {"items", one}}})}};
  const ordered_json options = {
      {"encoding_format", {{"type", "string"}, {"enum", {"float", "base64"}}}},
      {"embd_normalize", integer(-1, 64)},
      {"model", {{"type", "string"}}}};
  ordered_json oai = {{"input", input}}, native = {{"content", input}};
  oai.update(options);
  native.update(options);
  schemas["EmbeddingRequest"] = {{"type", "object"}, {"required", {"input"}}, {"properties", oai}};
  schemas["NativeEmbeddingRequest"] = {
      {"type", "object"}, {"required", {"content"}}, {"properties", native}};
  paths["/v1/embeddings"] = post("OpenAI embeddings", "EmbeddingRequest", "application/json");
  paths["/embedding"] =
      post("llama-server's embeddings", "NativeEmbeddingRequest", "application/json");
  paths["/embeddings"] = paths["/embedding"];
}

}  // namespace

std::string openapi_document(bool api_key, bool embeddings) {
  ordered_json doc = {
      {"openapi", "3.0.3"},
      {"info",
       {{"title", "minfer serve"},
        {"version", "1"},
        {"description", "An OpenAI-compatible API over one model (docs/SERVER.md)."}}},
      {"paths",
       {{"/health", get("ready (200) or loading (503)", "application/json")},
        {"/metrics", get("Prometheus text", "text/plain")},
        {"/v1/models", get("the model list", "application/json")},
        {"/v1/chat/completions",
         post("a chat completion", "ChatCompletionRequest", "text/event-stream")},
        {"/v1/completions", post("a text completion", "CompletionRequest", "text/event-stream")},
        {"/tokenize", post("text to token ids", "TokenizeRequest", "application/json")},
        {"/detokenize", post("token ids to text", "DetokenizeRequest", "application/json")}}},
      {"components", {{"schemas", schemas()}}},
  };
  doc["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]["application/json"]
     ["schema"] = ref("ChatCompletionResponse");
  add_anthropic(doc["paths"], doc["components"]["schemas"]);
  add_llama(doc["paths"], doc["components"]["schemas"]);
  if (embeddings) add_embeddings(doc["paths"], doc["components"]["schemas"]);
  if (api_key) {
    doc["components"]["securitySchemes"] = {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}};
    doc["security"] = ordered_json::array({{{"bearer", ordered_json::array()}}});
    doc["paths"]["/health"]["get"]["security"] = ordered_json::array();
  }
  return doc.dump(2);
}

}  // namespace minfer::serve
