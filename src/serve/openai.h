// The OpenAI API's request and response bodies (nlohmann::json), and the
// text a completion streams: stop strings matched across token boundaries
// and never sent in part.
//
// Contract:
//   - parse_completion() reads a /v1/chat/completions (chat) or
//     /v1/completions body. Unknown fields are ignored; a known field of the
//     wrong type or out of range is an invalid_argument Status naming it.
//     Read: messages (string content or text parts) / prompt (a string, or a
//     list of token ids), max_tokens / max_completion_tokens, temperature,
//     top_p, top_k, min_p, seed, repeat_penalty / repetition_penalty, stop
//     (a string or up to 4), presence_penalty / frequency_penalty (-2..2),
//     logprobs / top_logprobs (chat: a boolean and 0..20; completions: an
//     integer 0..20), n (1..kMaxChoices), response_format ({"type": "text"},
//     {"type": "json_object"}, {"type": "json_schema", "json_schema":
//     {"schema": {...}}}, and llama-server's {"type": "json_schema" |
//     "json_object", "schema": {...}}), llama-server's top-level json_schema
//     (response_format wins over it), grammar (a GBNF string, "" none; with
//     json_schema or a JSON response_format a 400 naming both), user (a string, unused), stream,
//     stream_options.include_usage, logit_bias (OpenAI's {"<token id>":
//     bias} or llama-server's [[token id, bias], ...]; bias in -100..100,
//     -100 and false meaning never (-inf); added to the logits before any
//     other sampling step, runtime/sampler.h); chat: tools, tool_choice,
//     parallel_tool_calls (serve/tool_request.h), an assistant's tool_calls
//     and reasoning_content and a tool's tool_call_id and name in messages,
//     chat_template_kwargs (an object), reasoning_effort (a string),
//     reasoning_format (none, deepseek, auto). It does not copy or recurse into the body's
//     subtrees, so a body that skipped parse_request_json() (which bounds
//     the depth, serve/request_json.h) cannot exhaust the stack here.
//   - check_token_ids() checks what parse_completion() cannot, not knowing
//     the model: the prompt's token ids and logit_bias's ids are in
//     [0, n_vocab); an error names the field and the id.
//   - error_body() is the OpenAI error object {"error": {message, type, code}}.
//   - StopText: push() each decoded piece; what is safe to send comes back
//     (text that could still begin a stop string is held); once a stop
//     string appears, the text before it is the last to come and stopped()
//     is true; finish() returns what was held when the sequence ends.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/chat_format.h"
#include "runtime/sampler.h"
#include "serve/reasoning.h"
#include "serve/tool_request.h"

namespace minfer::serve {

struct CompletionParams {
  bool chat = false;
  std::vector<runtime::ChatMessage> messages;  // chat
  std::string prompt;                          // completions: text ...
  std::vector<int32_t> prompt_tokens;          // ... or token ids
  int64_t max_tokens = -1;                     // -1: the server's default
  // /completion's speculative.n_max, .n_min, .p_min; -1: the server's.
  int spec_n_max = -1, spec_n_min = -1;
  float spec_p_min = -1;
  runtime::SamplerParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  int n = 1;                // choices
  int top_logprobs = -1;    // -1: no logprobs
  bool ignore_eos = false;  // end-of-generation tokens do not end a choice (llama-server's)
  enum class Format { kText, kJsonObject, kJsonSchema, kGrammar } format = Format::kText;
  std::string grammar;  // kGrammar: the GBNF text (grammar/gbnf.h), compiled per request
  // kJsonSchema: in the order the request wrote it (properties are generated
  // in that order); parse_completion() leaves it to the caller, which parses
  // the body again as ordered_json (ordered_schema()).
  nlohmann::ordered_json schema;
  // Chat: tool calling (serve/tool_request.h) and what else the request
  // hands the chat template (serve/chat_plan.h).
  ChatTools tools;
  nlohmann::json chat_template_kwargs;              // an object, or null
  std::string reasoning_effort;                     // "" : not given
  std::optional<ReasoningFormat> reasoning_format;  // the request's own, over the server's
  std::optional<bool> enable_thinking;  // the request turns thinking on or off (Anthropic's)
  // The last message is an assistant's prefill the reply continues (HF's
  // continue_final_message), not a closed turn.
  bool continue_final = false;
  // The chat prompt, rendered already (serve/chat_plan.h): `prompt` holds it.
  bool chat_prompt_rendered = false;
  static constexpr int kMaxChoices = 16;
};

[[nodiscard]] Result<CompletionParams> parse_completion(const nlohmann::json& body, bool chat,
                                                        const runtime::SamplerParams& defaults);

[[nodiscard]] Status check_token_ids(const CompletionParams& p, int64_t n_vocab);

// The schema of a raw body where parse_completion() finds it
// (response_format.json_schema.schema, response_format.schema, json_schema),
// keys in their order
// (parsed through parse_request_ordered_json()); null when the body has none
// or is refused.
nlohmann::ordered_json ordered_schema(std::string_view body);

// The HTTP status for a Status code (client errors 4xx, the rest 5xx).
int http_status(const Status& s);
nlohmann::json error_body(const Status& s);

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string push(const std::string& piece);
  std::string finish();
  bool stopped() const { return stopped_; }
  // The stop string that was found ("" before one is).
  const std::string& stop_word() const { return stop_word_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::string stop_word_;
  bool stopped_ = false;
};

}  // namespace minfer::serve
