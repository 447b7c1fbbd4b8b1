#include "serve/anthropic.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "serve/request_json.h"
#include "serve/tool_request.h"

namespace minfer::serve {
namespace {

using nlohmann::json;

Status wrong(const std::string& field, const std::string& want) {
  return Status::invalid_argument("'" + field + "' must be " + want);
}

Status not_supported(const std::string& field, const std::string& what) {
  return Status::invalid_argument("'" + field + "': " + what + " not supported yet");
}

// The field, or nullptr when it is absent or null (both mean "not given").
const json* given(const json& body, const char* field) {
  const auto it = body.find(field);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

Result<double> number(const json& body, const char* field, double lo, double hi, double dflt) {
  const json* v = given(body, field);
  if (v == nullptr) return dflt;
  if (!v->is_number() || !(v->get<double>() >= lo && v->get<double>() <= hi)) {
    return wrong(field, "a number from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  return v->get<double>();
}

Result<int64_t> integer(const json& body, const char* field, int64_t lo, int64_t hi) {
  const json* v = given(body, field);
  const std::string want = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  if (v == nullptr)
    return Status::invalid_argument("'" + std::string(field) + "' is required: " + want);
  if (!v->is_number_integer()) return wrong(field, want);
  // An unsigned value past int64_t's range is out of range, not wrapped.
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return wrong(field, want);
  }
  const auto n = v->get<int64_t>();
  if (n < lo || n > hi) return wrong(field, want);
  return n;
}

// The type of block `b` at `at`, checked to be an object with a string type.
Result<std::string> block_type(const json& b, const std::string& at) {
  if (!b.is_object()) return wrong(at, "a content block (an object with a \"type\")");
  const json* type = given(b, "type");
  if (type == nullptr || !type->is_string()) return wrong(at + ".type", "a string");
  return type->get<std::string>();
}

Result<std::string> string_field(const json& b, const char* name, const std::string& at) {
  const json* v = given(b, name);
  if (v == nullptr || !v->is_string()) return wrong(at + "." + name, "a string");
  return v->get<std::string>();
}

void join(std::string& text, const std::string& more) {
  if (!text.empty() && !more.empty()) text += "\n\n";
  text += more;
}

// A list of text blocks as text, joined by a blank line; any other block
// refused by its type.
Result<std::string> blocks_text(const json& blocks, const std::string& field) {
  std::string text;
  for (size_t j = 0; j < blocks.size(); ++j) {
    const std::string at = field + "[" + std::to_string(j) + "]";
    MINFER_ASSIGN_OR_RETURN(std::string t, block_type(blocks[j], at));
    if (t != "text") return not_supported(at, "\"" + t + "\" content blocks are");
    MINFER_ASSIGN_OR_RETURN(std::string block_text, string_field(blocks[j], "text", at));
    if (j > 0) text += "\n\n";
    text += block_text;
  }
  return text;
}

Result<std::string> content_text(const json* c, const std::string& field) {
  if (c != nullptr && c->is_string()) return c->get<std::string>();
  if (c == nullptr || !c->is_array()) return wrong(field, "a string or a list of content blocks");
  return blocks_text(*c, field);
}

// The ids of earlier tool_use blocks and their tools' names.
using CallNames = std::map<std::string, std::string>;

Result<runtime::ChatMessage> tool_result(const json& b, const std::string& at,
                                         const CallNames& names) {
  runtime::ChatMessage m("tool", "");
  MINFER_ASSIGN_OR_RETURN(m.tool_call_id, string_field(b, "tool_use_id", at));
  if (const json* c = given(b, "content")) {
    MINFER_ASSIGN_OR_RETURN(m.content, content_text(c, at + ".content"));
  }
  if (const json* e = given(b, "is_error")) {
    if (!e->is_boolean()) return wrong(at + ".is_error", "true or false");
    // The template has no field for it: the model reads it in the text.
    if (e->get<bool>()) m.content = "Error: " + m.content;
  }
  if (const auto it = names.find(m.tool_call_id); it != names.end()) m.name = it->second;
  return m;
}

Result<runtime::ChatToolCall> tool_use(const json& b, const std::string& at, CallNames& names) {
  runtime::ChatToolCall call;
  MINFER_ASSIGN_OR_RETURN(call.id, string_field(b, "id", at));
  MINFER_ASSIGN_OR_RETURN(call.name, string_field(b, "name", at));
  const json* input = given(b, "input");
  if (input == nullptr || !input->is_object()) return wrong(at + ".input", "an object");
  call.arguments = input->dump();
  call.arguments_value = template_value(nlohmann::ordered_json(*input));
  names[call.id] = call.name;
  return call;
}

// A user turn's blocks: its text one user message, each tool_result a
// "tool" message, in the order written.
Status user_blocks(const json& blocks, const std::string& field, const CallNames& names,
                   std::vector<runtime::ChatMessage>& out) {
  runtime::ChatMessage text("user", "");
  bool has_text = false;
  for (size_t j = 0; j < blocks.size(); ++j) {
    const std::string at = field + "[" + std::to_string(j) + "]";
    MINFER_ASSIGN_OR_RETURN(std::string t, block_type(blocks[j], at));
    if (t == "text") {
      MINFER_ASSIGN_OR_RETURN(std::string more, string_field(blocks[j], "text", at));
      if (has_text) text.content += "\n\n";
      text.content += more;
      has_text = true;
    } else if (t == "tool_result") {
      if (has_text) out.push_back(std::exchange(text, runtime::ChatMessage("user", "")));
      has_text = false;
      MINFER_ASSIGN_OR_RETURN(runtime::ChatMessage result, tool_result(blocks[j], at, names));
      out.push_back(std::move(result));
    } else if (t == "tool_use" || t == "thinking" || t == "redacted_thinking") {
      return wrong(at, "a block of a user turn (\"" + t + "\" blocks are the assistant's)");
    } else {
      return not_supported(at, "\"" + t + "\" content blocks are");
    }
  }
  if (has_text || out.empty()) out.push_back(std::move(text));
  return Status::ok();
}

// An assistant turn's blocks as one message: text, tool_use calls, thinking
// as reasoning_content (redacted thinking dropped: nothing can read it).
Status assistant_blocks(const json& blocks, const std::string& field, CallNames& names,
                        runtime::ChatMessage& out) {
  for (size_t j = 0; j < blocks.size(); ++j) {
    const std::string at = field + "[" + std::to_string(j) + "]";
    MINFER_ASSIGN_OR_RETURN(std::string t, block_type(blocks[j], at));
    if (t == "text") {
      MINFER_ASSIGN_OR_RETURN(std::string more, string_field(blocks[j], "text", at));
      join(out.content, more);
    } else if (t == "tool_use") {
      MINFER_ASSIGN_OR_RETURN(runtime::ChatToolCall call, tool_use(blocks[j], at, names));
      out.tool_calls.push_back(std::move(call));
    } else if (t == "thinking") {
      MINFER_ASSIGN_OR_RETURN(std::string thought, string_field(blocks[j], "thinking", at));
      join(out.reasoning_content, thought);
    } else if (t == "tool_result") {
      return wrong(at, "a block of an assistant turn (\"tool_result\" blocks are the user's)");
    } else if (t != "redacted_thinking") {
      return not_supported(at, "\"" + t + "\" content blocks are");
    }
  }
  out.null_content = out.content.empty() && !out.tool_calls.empty();
  return Status::ok();
}

// One turn's messages (a user turn may give several: tool results first).
Status read_turn(const json& m, const std::string& at, CallNames& names,
                 std::vector<runtime::ChatMessage>& turn) {
  if (!m.is_object()) return wrong(at, "an object with \"role\" and \"content\"");
  const json* role = given(m, "role");
  if (role == nullptr || !role->is_string() || (*role != "user" && *role != "assistant")) {
    return wrong(at + ".role", "\"user\" or \"assistant\"");
  }
  const json* content = given(m, "content");
  const std::string field = at + ".content";
  if (content != nullptr && content->is_string()) {
    turn.emplace_back(role->get<std::string>(), content->get<std::string>());
    return Status::ok();
  }
  if (content == nullptr || !content->is_array()) {
    return wrong(field, "a string or a list of content blocks");
  }
  if (*role == "user") return user_blocks(*content, field, names, turn);
  turn.emplace_back("assistant", "");
  return assistant_blocks(*content, field, names, turn.back());
}

// A message into the conversation, joined to the one before when both are
// of one role (Anthropic combines consecutive turns); tool results stand
// alone.
void append(std::vector<runtime::ChatMessage>& out, size_t first, runtime::ChatMessage m) {
  if (out.size() <= first || m.role == "tool" || out.back().role != m.role) {
    out.push_back(std::move(m));
    return;
  }
  runtime::ChatMessage& last = out.back();
  // Text joins as Anthropic joins it; a turn of calls alone adds no break.
  if (last.tool_calls.empty() && m.tool_calls.empty()) {
    last.content += "\n\n" + m.content;
  } else {
    join(last.content, m.content);
  }
  join(last.reasoning_content, m.reasoning_content);
  for (runtime::ChatToolCall& c : m.tool_calls) last.tool_calls.push_back(std::move(c));
  last.null_content = last.content.empty() && !last.tool_calls.empty();
}

// A last assistant turn is a prefill the reply continues.
Status read_prefill(std::vector<runtime::ChatMessage>& out, CompletionParams& p) {
  runtime::ChatMessage& last = out.back();
  if (last.role != "assistant") return Status::ok();
  if (!last.tool_calls.empty()) {
    return Status::invalid_argument(
        "the final assistant message (a prefill the reply continues) must not hold tool_use "
        "blocks: answer them with tool_result blocks in a user turn");
  }
  if (last.content.empty() && last.reasoning_content.empty()) {
    out.pop_back();  // an empty prefill is no prefill
    return Status::ok();
  }
  if (!last.content.empty() && std::isspace(static_cast<unsigned char>(last.content.back()))) {
    return Status::invalid_argument(
        "the final assistant message (a prefill the reply continues) must not end in whitespace");
  }
  p.continue_final = true;
  return Status::ok();
}

// The turns, consecutive ones of one role joined.
Status read_turns(const json& body, CompletionParams& p) {
  const json* turns = given(body, "messages");
  if (turns == nullptr || !turns->is_array() || turns->empty()) {
    return wrong("messages", "a non-empty list");
  }
  std::vector<runtime::ChatMessage>& out = p.messages;
  const size_t first = out.size();
  CallNames names;
  for (size_t i = 0; i < turns->size(); ++i) {
    std::vector<runtime::ChatMessage> turn;
    MINFER_RETURN_IF_ERROR(
        read_turn((*turns)[i], "messages[" + std::to_string(i) + "]", names, turn));
    for (runtime::ChatMessage& m : turn) append(out, first, std::move(m));
  }
  return read_prefill(out, p);
}

Status read_system(const json& body, std::vector<runtime::ChatMessage>& out) {
  const json* system = given(body, "system");
  if (system == nullptr) return Status::ok();
  if (!system->is_string() && !system->is_array()) {
    return wrong("system", "a string or a list of text blocks");
  }
  MINFER_ASSIGN_OR_RETURN(std::string text, content_text(system, "system"));
  if (!text.empty()) out.push_back({"system", std::move(text)});
  return Status::ok();
}

// One of `tools` in OpenAI's shape for the template; its input_schema
// checked as the OpenAI door checks parameters.
Result<ToolDefinition> read_tool(const json& t, const std::string& at,
                                 nlohmann::ordered_json& defs) {
  if (!t.is_object()) return wrong(at, "an object {\"name\", \"description\", \"input_schema\"}");
  if (const json* type = given(t, "type"); type != nullptr && *type != "custom") {
    return not_supported(at + ".type", (type->is_string() ? "\"" + type->get<std::string>() + "\""
                                                          : std::string("this type of")) +
                                           " tools (Anthropic's server tools) are");
  }
  ToolDefinition def;
  const json* name = given(t, "name");
  if (name == nullptr || !name->is_string() || !valid_tool_name(name->get<std::string>())) {
    return wrong(at + ".name", "1 to 64 letters, digits, '_', '-' or '.'");
  }
  def.name = name->get<std::string>();
  nlohmann::ordered_json fn{{"name", def.name}};
  if (const json* d = given(t, "description")) {
    if (!d->is_string()) return wrong(at + ".description", "a string");
    def.description = d->get<std::string>();
    fn["description"] = def.description;
  }
  const json* schema = given(t, "input_schema");
  if (schema == nullptr) return wrong(at + ".input_schema", "a JSON schema object");
  MINFER_RETURN_IF_ERROR(check_tool_parameters(*schema, at + ".input_schema"));
  def.parameters = nlohmann::ordered_json(*schema);
  fn["parameters"] = def.parameters;
  defs.push_back({{"type", "function"}, {"function", std::move(fn)}});
  return def;
}

// tool_choice onto OpenAI's choices: any is "required", tool a named one.
Status read_tool_choice(const json& body, ChatTools& out) {
  out.choice = out.tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  const json* c = given(body, "tool_choice");
  if (c == nullptr) return Status::ok();
  const std::string want = "an object {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}";
  if (!c->is_object()) return wrong("tool_choice", want);
  const json* type = given(*c, "type");
  if (type == nullptr || !type->is_string()) return wrong("tool_choice.type", want);
  const std::string& t = type->get_ref<const std::string&>();
  if (t == "none") {
    out.choice = ToolChoice::kNone;
  } else if (t == "any") {
    out.choice = ToolChoice::kRequired;
  } else if (t == "tool") {
    const json* name = given(*c, "name");
    if (name == nullptr || !name->is_string()) return wrong("tool_choice.name", "a string");
    out.choice = ToolChoice::kNamed;
    out.named = name->get<std::string>();
    const auto same = [&](const ToolDefinition& d) { return d.name == out.named; };
    if (!out.tools.empty() && std::none_of(out.tools.begin(), out.tools.end(), same)) {
      return wrong("tool_choice.name",
                   "the name of one of 'tools' ('" + out.named + "' is none of them)");
    }
  } else if (t != "auto") {
    return wrong("tool_choice.type", "\"auto\", \"any\", \"tool\" or \"none\"");
  }
  if (out.forced() && out.tools.empty()) {
    return Status::invalid_argument("'tool_choice' {\"type\": \"" + t + "\"} needs 'tools'");
  }
  if (const json* d = given(*c, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) return wrong("tool_choice.disable_parallel_tool_use", "true or false");
    out.parallel = !d->get<bool>();
  }
  return Status::ok();
}

Result<ChatTools> read_message_tools(const json& body) {
  ChatTools out;
  out.definitions = nlohmann::ordered_json::array();
  if (const json* tools = given(body, "tools")) {
    if (!tools->is_array()) return wrong("tools", "a list of tools");
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string at = "tools[" + std::to_string(i) + "]";
      MINFER_ASSIGN_OR_RETURN(ToolDefinition def, read_tool((*tools)[i], at, out.definitions));
      if (!names.insert(def.name).second) {
        return wrong(at + ".name", "unique ('" + def.name + "' is given twice)");
      }
      out.tools.push_back(std::move(def));
    }
  }
  MINFER_RETURN_IF_ERROR(read_tool_choice(body, out));
  return out;
}

// thinking: on or off for the template; absent, its default.
Status read_thinking(const json& body, CompletionParams& p) {
  const json* t = given(body, "thinking");
  if (t == nullptr) return Status::ok();
  const std::string want =
      "{\"type\": \"enabled\", \"budget_tokens\"}, {\"type\": \"adaptive\"} or "
      "{\"type\": \"disabled\"}";
  if (!t->is_object()) return wrong("thinking", want);
  const json* type = given(*t, "type");
  if (type == nullptr || !type->is_string()) return wrong("thinking.type", want);
  if (*type == "disabled") {
    p.enable_thinking = false;
  } else if (*type == "enabled") {
    // Anthropic's own floor; the budget itself is not enforced (docs/SERVER_API.md).
    const json* b = given(*t, "budget_tokens");
    const bool ok =
        b != nullptr && b->is_number_integer() &&
        (b->is_number_unsigned() ? b->get<uint64_t>() >= 1024 : b->get<int64_t>() >= 1024);
    if (!ok) return wrong("thinking.budget_tokens", "an integer >= 1024");
    p.enable_thinking = true;
  } else if (*type == "adaptive") {
    p.enable_thinking = true;
  } else {
    return wrong("thinking.type", "\"enabled\", \"adaptive\" or \"disabled\"");
  }
  return Status::ok();
}

Status read_stop_sequences(const json& body, std::vector<std::string>& out) {
  constexpr size_t kMaxStops = 64;
  const json* stops = given(body, "stop_sequences");
  if (stops == nullptr) return Status::ok();
  if (!stops->is_array() || stops->size() > kMaxStops) {
    return wrong("stop_sequences", "a list of up to 64 strings");
  }
  for (const json& s : *stops) {
    if (!s.is_string()) return wrong("stop_sequences", "a list of up to 64 strings");
    if (!s.get_ref<const std::string&>().empty()) out.push_back(s.get<std::string>());
  }
  return Status::ok();
}

Status read_sampling(const json& body, runtime::SamplerParams& s) {
  MINFER_ASSIGN_OR_RETURN(double t, number(body, "temperature", 0, 1, s.temperature));
  MINFER_ASSIGN_OR_RETURN(double top_p, number(body, "top_p", 0, 1, s.top_p));
  int64_t top_k = s.top_k;
  if (given(body, "top_k") != nullptr) {
    MINFER_ASSIGN_OR_RETURN(top_k, integer(body, "top_k", 0, 1 << 30));
  }
  s.temperature = static_cast<float>(t);
  s.top_p = static_cast<float>(top_p == 0 ? 1e-9 : top_p);  // 0 keeps the top token only
  s.top_k = static_cast<int>(top_k);
  return Status::ok();
}

}  // namespace

Result<MessagesRequest> parse_messages(const json& body, const runtime::SamplerParams& defaults,
                                       bool count_only) {
  if (!body.is_object()) return Status::invalid_argument("the body must be a JSON object");
  MessagesRequest r;
  CompletionParams& p = r.params;
  p.chat = true;
  p.sampling = defaults;
  if (const json* model = given(body, "model")) {
    if (!model->is_string()) return wrong("model", "a string");
    r.model = model->get<std::string>();
  }
  MINFER_ASSIGN_OR_RETURN(p.tools, read_message_tools(body));
  MINFER_RETURN_IF_ERROR(read_thinking(body, p));
  MINFER_RETURN_IF_ERROR(read_system(body, p.messages));
  MINFER_RETURN_IF_ERROR(read_turns(body, p));
  if (count_only) return r;
  constexpr int64_t kMaxTokens = 1 << 24;
  MINFER_ASSIGN_OR_RETURN(p.max_tokens, integer(body, "max_tokens", 1, kMaxTokens));
  MINFER_RETURN_IF_ERROR(read_sampling(body, p.sampling));
  MINFER_RETURN_IF_ERROR(read_stop_sequences(body, p.stop));
  if (const json* m = given(body, "metadata"); m != nullptr && !m->is_object()) {
    return wrong("metadata", "an object");
  }
  if (const json* s = given(body, "stream")) {
    if (!s->is_boolean()) return wrong("stream", "true or false");
    p.stream = s->get<bool>();
  }
  return r;
}

void order_message_tools(ChatTools& tools, std::string_view body) {
  if (tools.tools.empty()) return;
  auto doc = parse_request_ordered_json(body);
  if (!doc) return;
  const auto it = doc->find("tools");
  if (it == doc->end() || !it->is_array() || it->size() != tools.tools.size()) return;
  for (size_t i = 0; i < it->size(); ++i) {
    const auto schema = (*it)[i].find("input_schema");
    if (schema == (*it)[i].end() || !schema->is_object()) continue;
    tools.tools[i].parameters = *schema;
    tools.definitions[i]["function"]["parameters"] = *schema;
  }
}

const char* anthropic_error_type(int http_status) {
  switch (http_status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return "api_error";
  }
}

json anthropic_error_json(int http_status, const std::string& message) {
  return {{"type", "error"},
          {"error", {{"type", anthropic_error_type(http_status)}, {"message", message}}}};
}

}  // namespace minfer::serve
