#include "serve/chat_plan.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "serve/request_json.h"

namespace minfer::serve {
namespace {

using ojson = nlohmann::ordered_json;

// The JSON of one call as the family writes it, for one function.
ojson call_schema(ToolFormat f, const ToolDefinition& t) {
  const char* args = f == ToolFormat::kLlama3 ? "parameters" : "arguments";
  ojson props = ojson::object();
  props["name"] = ojson{{"const", t.name}};
  props[args] = t.parameters;
  return ojson{
      {"type", "object"}, {"properties", props}, {"required", ojson::array({"name", args})}};
}

// The call body a forced choice must generate, after forced_prefix().
ojson forced_call_schema(ToolFormat f, const ChatTools& tools) {
  ojson alternatives = ojson::array();
  for (const ToolDefinition& t : tools.tools) {
    if (tools.choice == ToolChoice::kNamed && t.name != tools.named) continue;
    alternatives.push_back(call_schema(f, t));
  }
  ojson one = alternatives.size() == 1 ? alternatives[0] : ojson{{"anyOf", alternatives}};
  switch (f) {
    case ToolFormat::kMistral: {
      ojson list{{"type", "array"}, {"items", one}, {"minItems", 1}};
      if (!tools.parallel) list["maxItems"] = 1;
      return list;
    }
    case ToolFormat::kGeneric:
      return ojson{{"type", "object"},
                   {"properties", ojson{{"tool_call", one}}},
                   {"required", ojson::array({"tool_call"})}};
    case ToolFormat::kHarmony:
      // One function: the header names it, the body is its arguments.
      if (alternatives.size() == 1) return alternatives[0]["properties"]["arguments"];
      break;
    case ToolFormat::kHermes:
    case ToolFormat::kLlama3:
      break;
  }
  return one;
}

std::string forced_prefix(ToolFormat f, const ChatTools& tools) {
  if (f == ToolFormat::kHermes) return "<tool_call>\n";
  if (f == ToolFormat::kMistral) return "[TOOL_CALLS]";
  if (f == ToolFormat::kHarmony) {
    // A header can name one function only; a choice among several is a
    // json message without a recipient whose body names the function.
    if (tools.choice == ToolChoice::kNamed) return forced_call_header(tools.named);
    return forced_call_header(tools.tools.size() == 1 ? tools.tools[0].name : "");
  }
  return "";
}

std::string hermes_call_text(const runtime::ChatToolCall& c) {
  ojson call{{"name", c.name}};
  // Through the request door's depth bound: dump() below recurses.
  auto args = parse_request_ordered_json(c.arguments);
  call["arguments"] = args ? std::move(*args) : ojson(c.arguments);
  return "<tool_call>\n" + call.dump() + "\n</tool_call>";
}

// Earlier calls and tool results as Hermes text, for a template (or a
// built-in format) that knows neither; consecutive results join one turn.
std::vector<runtime::ChatMessage> hermes_messages(const std::vector<runtime::ChatMessage>& in) {
  std::vector<runtime::ChatMessage> out;
  for (const runtime::ChatMessage& m : in) {
    if (m.role == "tool") {
      const std::string text = "<tool_response>\n" + m.content + "\n</tool_response>";
      if (!out.empty() && out.back().role == "user" &&
          out.back().content.starts_with("<tool_resp")) {
        out.back().content += "\n" + text;
      } else {
        out.emplace_back("user", text);
      }
      continue;
    }
    runtime::ChatMessage copy(m.role, m.content);
    copy.reasoning_content = m.reasoning_content;
    for (const runtime::ChatToolCall& c : m.tool_calls) {
      if (!copy.content.empty()) copy.content += "\n";
      copy.content += hermes_call_text(c);
    }
    out.push_back(std::move(copy));
  }
  return out;
}

bool has_tool_turns(const std::vector<runtime::ChatMessage>& messages) {
  for (const runtime::ChatMessage& m : messages) {
    if (m.role == "tool" || !m.tool_calls.empty()) return true;
  }
  return false;
}

void add_system_text(std::vector<runtime::ChatMessage>& messages, const std::string& text) {
  if (!messages.empty() && messages.front().role == "system") {
    messages.front().content =
        messages.front().content.empty() ? text : messages.front().content + "\n\n" + text;
    return;
  }
  messages.insert(messages.begin(), runtime::ChatMessage("system", text));
}

tmpl::Dict template_variables(const CompletionParams& p, bool pass_tools, bool thinking) {
  tmpl::Dict vars;
  if (pass_tools) vars.emplace_back("tools", template_value(p.tools.definitions));
  vars.emplace_back("enable_thinking", tmpl::Value(thinking));
  if (!p.reasoning_effort.empty()) {
    vars.emplace_back("reasoning_effort", tmpl::Value(p.reasoning_effort));
  }
  if (p.chat_template_kwargs.is_object()) {
    for (const auto& item : p.chat_template_kwargs.items()) {
      const std::string& key = item.key();
      const auto same = [&](const auto& kv) { return kv.first == key; };
      tmpl::Value v = template_value(ojson(item.value()));
      if (auto it = std::find_if(vars.begin(), vars.end(), same); it != vars.end()) {
        it->second = std::move(v);
      } else {
        vars.emplace_back(key, std::move(v));
      }
    }
  }
  return vars;
}

// The prompt that continues the last message, an assistant's prefill:
// sound only where the template writes the prefill verbatim right where a
// reply would begin (a template that trims or rewrites it would make the
// reply continue a text the model never sees that way).
Result<std::string> continued_prompt(const runtime::ChatFormatter& formatter,
                                     const std::vector<runtime::ChatMessage>& messages,
                                     const tmpl::Dict& vars) {
  const std::string& prefill = messages.back().content;
  const std::vector<runtime::ChatMessage> before(messages.begin(), messages.end() - 1);
  MINFER_ASSIGN_OR_RETURN(std::string opening, formatter.render(before, true, vars));
  MINFER_ASSIGN_OR_RETURN(std::string closed, formatter.render(messages, false, vars));
  if (closed.compare(0, opening.size(), opening) != 0 ||
      closed.compare(opening.size(), prefill.size(), prefill) != 0) {
    return Status::invalid_argument(
        "the final assistant message (a prefill) cannot be continued: this model's chat "
        "template does not write it verbatim at the start of the assistant's turn");
  }
  return opening + prefill;
}

Result<std::string> render_prompt(const runtime::ChatFormatter& formatter,
                                  const std::vector<runtime::ChatMessage>& messages, bool prefill,
                                  const tmpl::Dict& vars) {
  return prefill ? continued_prompt(formatter, messages, vars)
                 : formatter.render(messages, true, vars);
}

// The prompt of `messages`. A turn of calls only comes with a null content
// (OpenAI's clients send it so), which some templates cannot take (Qwen3's
// tests `'</think>' in message.content`, QwQ's splits it): a template that
// fails with one is rendered again with "" there. Templates that tell none
// apart (DeepSeek-R1's renders calls only for a none content) keep it.
Result<std::string> render_conversation(const runtime::ChatFormatter& formatter,
                                        std::vector<runtime::ChatMessage>& messages, bool prefill,
                                        const tmpl::Dict& vars) {
  Result<std::string> prompt = render_prompt(formatter, messages, prefill, vars);
  const auto null = [](const runtime::ChatMessage& m) { return m.null_content; };
  if (prompt || std::none_of(messages.begin(), messages.end(), null)) return prompt;
  for (runtime::ChatMessage& m : messages) m.null_content = false;
  return render_prompt(formatter, messages, prefill, vars);
}

// Mistral's templates refuse a call id that is not 9 letters and digits,
// so a client's own ids (OpenAI's call_..., Anthropic's toolu_...) become
// 9 letters and digits:
// the same for a call and the result that answers it, and the same in
// every request, so that a conversation's history renders alike turn after
// turn (its cached prefix is reused). The id's FNV-1a hash in base 62; two
// ids of one request that would meet get the next salt.
std::string mistral_call_id(std::string_view id, uint64_t salt) {
  static constexpr std::string_view kChars =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  uint64_t h = 14695981039346656037ull ^ salt;
  for (const char c : id) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  std::string out(9, '0');
  for (char& c : out) {
    c = kChars[h % kChars.size()];
    h /= kChars.size();
  }
  return out;
}

void mistral_call_ids(std::vector<runtime::ChatMessage>& messages) {
  const auto is_mistral_id = [](const std::string& id) {
    return id.size() == 9 && std::all_of(id.begin(), id.end(), [](char c) {
             return std::isalnum(static_cast<unsigned char>(c)) != 0;
           });
  };
  std::map<std::string, std::string> mapped;  // the client's id -> ours
  std::set<std::string> taken;
  for (const runtime::ChatMessage& m : messages) {
    for (const runtime::ChatToolCall& c : m.tool_calls) {
      if (is_mistral_id(c.id)) taken.insert(c.id);
    }
  }
  const auto map_id = [&](std::string& id) {
    if (id.empty() || is_mistral_id(id)) return;
    auto [it, fresh] = mapped.try_emplace(id);
    for (uint64_t salt = 0; fresh && it->second.empty(); ++salt) {
      std::string candidate = mistral_call_id(id, salt);
      if (taken.insert(candidate).second) it->second = std::move(candidate);
    }
    id = it->second;
  };
  for (runtime::ChatMessage& m : messages) {
    for (runtime::ChatToolCall& c : m.tool_calls) map_id(c.id);
    map_id(m.tool_call_id);
  }
}

// Whether the request turns thinking off: --reasoning-budget 0, a forced
// call (it must come at once), or enable_thinking false (Anthropic's
// thinking field, or chat_template_kwargs as llama-server reads it).
bool thinking_on(const ChatOptions& options, const CompletionParams& p) {
  if (options.reasoning_budget == 0 || (p.tools.active() && p.tools.forced())) return false;
  if (!p.enable_thinking.value_or(true)) return false;
  if (p.chat_template_kwargs.is_object()) {
    const auto it = p.chat_template_kwargs.find("enable_thinking");
    if (it != p.chat_template_kwargs.end() && it->is_boolean() && !it->get<bool>()) return false;
  }
  return true;
}

}  // namespace

std::string hermes_tools_prompt(const ChatTools& tools) {
  std::string list;
  for (const ojson& t : tools.definitions) list += t.dump() + "\n";
  return "# Tools\n\nYou may call one or more functions to help with the request. The "
         "functions, as JSON schemas, are inside <tools></tools>:\n<tools>\n" +
         list +
         "</tools>\n\nTo call one, answer with its name and arguments as a JSON object "
         "inside <tool_call></tool_call> tags, one pair of tags per call:\n<tool_call>\n"
         "{\"name\": \"<function name>\", \"arguments\": {<arguments as JSON>}}\n</tool_call>";
}

Result<ReplyReading> plan_chat(const runtime::ChatFormatter& formatter, const ChatOptions& options,
                               CompletionParams& p) {
  const std::string& source = formatter.template_source();
  const bool template_tools = !source.empty() && template_reads_tools(source);
  const ToolFormat family = is_harmony_template(source) ? ToolFormat::kHarmony
                            : template_tools            ? detect_tool_format(source)
                                                        : ToolFormat::kHermes;
  std::vector<runtime::ChatMessage> messages = p.messages;
  if (family == ToolFormat::kHarmony) {
    // gpt-oss's template tests `"..." in message.content`, which a null
    // content fails: a turn of calls only has an empty content there.
    for (runtime::ChatMessage& m : messages) m.null_content = false;
  }
  if (family == ToolFormat::kMistral) mistral_call_ids(messages);
  if (!template_tools && has_tool_turns(messages)) messages = hermes_messages(messages);
  if (!template_tools && p.tools.active()) {
    add_system_text(messages, hermes_tools_prompt(p.tools));
  }
  const bool forced = p.tools.active() && p.tools.forced();
  const bool thinking = thinking_on(options, p);
  const tmpl::Dict vars = template_variables(p, template_tools && p.tools.active(), thinking);
  const bool prefill = p.continue_final && !messages.empty() && messages.back().role == "assistant";
  if (prefill && forced) {
    return Status::invalid_argument(
        "a forced tool call cannot continue a prefill (the final assistant message)");
  }
  MINFER_ASSIGN_OR_RETURN(std::string prompt,
                          render_conversation(formatter, messages, prefill, vars));

  ReplyReading reading;
  const ReasoningFormat rf = p.reasoning_format.value_or(options.reasoning_format);
  reading.extract_reasoning = rf != ReasoningFormat::kNone;
  reading.thinking_open = prompt_opens_thinking(prompt);
  // Thinking is off, or a call must come at once: a block the template
  // opened anyway is closed.
  if ((!thinking || forced) && reading.thinking_open) {
    prompt += "</think>\n\n";
    reading.thinking_open = false;
  }
  reading.thinking_open = reading.thinking_open && reading.extract_reasoning;
  if (p.tools.active()) {
    reading.tools = family;
    reading.parallel = p.tools.parallel;
  }
  // Harmony replies are read by channel; with --reasoning-format none and
  // no tools the raw text is the content, as llama-server gives it.
  reading.harmony =
      family == ToolFormat::kHarmony && (reading.extract_reasoning || forced || p.tools.active());
  if (forced) {
    reading.tool_prefix = forced_prefix(family, p.tools);
    prompt += reading.tool_prefix;
    p.format = CompletionParams::Format::kJsonSchema;
    p.schema = forced_call_schema(family, p.tools);
  }
  p.prompt = std::move(prompt);
  p.chat_prompt_rendered = true;
  return reading;
}

}  // namespace minfer::serve
