#include "serve/anthropic.h"

#include <cctype>

#include "serve/json_reply.h"

namespace minfer::serve {
namespace {

using nlohmann::json;

Status wrong(const std::string& field, const std::string& want) {
  return Status::invalid_argument("'" + field + "' must be " + want);
}

Status not_supported(const std::string& field, const std::string& what) {
  return Status::invalid_argument("'" + field + "': " + what +
                                  " not supported yet (text conversations only)");
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

// A list of content blocks as text: text blocks joined by a blank line, any
// other block refused by its type.
Result<std::string> blocks_text(const json& blocks, const std::string& field) {
  std::string text;
  for (size_t j = 0; j < blocks.size(); ++j) {
    const json& b = blocks[j];
    const std::string at = field + "[" + std::to_string(j) + "]";
    if (!b.is_object()) return wrong(at, "a content block (an object with a \"type\")");
    const json* type = given(b, "type");
    if (type == nullptr || !type->is_string()) return wrong(at + ".type", "a string");
    const auto& t = type->get_ref<const std::string&>();
    if (t != "text") return not_supported(at, "\"" + t + "\" content blocks are");
    const json* block_text = given(b, "text");
    if (block_text == nullptr || !block_text->is_string()) return wrong(at + ".text", "a string");
    if (j > 0) text += "\n\n";
    text += block_text->get_ref<const std::string&>();
  }
  return text;
}

Result<std::string> content_text(const json* c, const std::string& field) {
  if (c != nullptr && c->is_string()) return c->get<std::string>();
  if (c == nullptr || !c->is_array()) return wrong(field, "a string or a list of content blocks");
  return blocks_text(*c, field);
}

// The turns, consecutive ones of one role joined (Anthropic combines them);
// a trailing empty assistant turn is no prefill and is dropped.
Status read_turns(const json& body, std::vector<runtime::ChatMessage>& out) {
  const json* turns = given(body, "messages");
  if (turns == nullptr || !turns->is_array() || turns->empty()) {
    return wrong("messages", "a non-empty list");
  }
  const size_t first = out.size();
  for (size_t i = 0; i < turns->size(); ++i) {
    const json& m = (*turns)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return wrong(at, "an object with \"role\" and \"content\"");
    const json* role = given(m, "role");
    if (role == nullptr || !role->is_string() || (*role != "user" && *role != "assistant")) {
      return wrong(at + ".role", "\"user\" or \"assistant\"");
    }
    MINFER_ASSIGN_OR_RETURN(std::string text, content_text(given(m, "content"), at + ".content"));
    if (out.size() > first && out.back().role == role->get_ref<const std::string&>()) {
      out.back().content += "\n\n" + text;
    } else {
      out.push_back({role->get<std::string>(), std::move(text)});
    }
  }
  if (out.back().role == "assistant" && out.back().content.empty()) out.pop_back();
  return Status::ok();
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

// Tool calling is being built separately: until then a request that offers
// tools is refused rather than answered as if it had none.
Status refuse_tools(const json& body) {
  if (const json* tools = given(body, "tools")) {
    if (!tools->is_array()) return wrong("tools", "a list");
    if (!tools->empty()) return not_supported("tools", "tool calling is");
  }
  if (given(body, "tool_choice") != nullptr) return not_supported("tool_choice", "tool calling is");
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

json stop_json(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
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
  MINFER_RETURN_IF_ERROR(refuse_tools(body));
  MINFER_RETURN_IF_ERROR(read_system(body, p.messages));
  MINFER_RETURN_IF_ERROR(read_turns(body, p.messages));
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

Result<std::string> messages_prompt(const runtime::ChatFormatter& formatter,
                                    const std::vector<runtime::ChatMessage>& messages) {
  if (messages.empty() || messages.back().role != "assistant") return formatter.render(messages);
  const std::string& prefill = messages.back().content;
  if (!prefill.empty() && std::isspace(static_cast<unsigned char>(prefill.back()))) {
    return Status::invalid_argument(
        "the final assistant message (a prefill the reply continues) must not end in whitespace");
  }
  const std::vector<runtime::ChatMessage> before(messages.begin(), messages.end() - 1);
  MINFER_ASSIGN_OR_RETURN(std::string opening, formatter.render(before, true));
  MINFER_ASSIGN_OR_RETURN(std::string closed, formatter.render(messages, false));
  // Continuing is sound only where the template writes the prefill verbatim
  // right where a reply would begin; a template that trims or rewrites it
  // would make the reply continue a text the model never sees that way.
  if (closed.compare(0, opening.size(), opening) != 0 ||
      closed.compare(opening.size(), prefill.size(), prefill) != 0) {
    return Status::invalid_argument(
        "the final assistant message (a prefill) cannot be continued: this model's chat "
        "template does not write it verbatim at the start of the assistant's turn");
  }
  return opening + prefill;
}

const char* stop_reason(std::string_view finish_reason, const std::string& stop_sequence) {
  if (!stop_sequence.empty()) return "stop_sequence";
  return finish_reason == "stop" ? "end_turn" : "max_tokens";
}

json message_json(const MessageReply& m) {
  return {{"id", m.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", m.model},
          {"content", json::array({{{"type", "text"}, {"text", m.text}}})},
          {"stop_reason", stop_json(m.stop_reason)},
          {"stop_sequence", stop_json(m.stop_sequence)},
          {"usage", {{"input_tokens", m.input_tokens}, {"output_tokens", m.output_tokens}}}};
}

std::string sse_event(const json& data) {
  return "event: " + data.value("type", std::string("message")) + "\ndata: " + dump_json(data) +
         "\n\n";
}

std::string stream_opening(const MessageReply& m) {
  json message = message_json(m);
  message["content"] = json::array();
  return sse_event({{"type", "message_start"}, {"message", message}}) +
         sse_event({{"type", "content_block_start"},
                    {"index", 0},
                    {"content_block", {{"type", "text"}, {"text", ""}}}}) +
         sse_event({{"type", "ping"}});
}

std::string text_delta_event(std::string_view text) {
  return sse_event({{"type", "content_block_delta"},
                    {"index", 0},
                    {"delta", {{"type", "text_delta"}, {"text", text}}}});
}

std::string stream_closing(const MessageReply& m) {
  return sse_event({{"type", "content_block_stop"}, {"index", 0}}) +
         sse_event({{"type", "message_delta"},
                    {"delta",
                     {{"stop_reason", stop_json(m.stop_reason)},
                      {"stop_sequence", stop_json(m.stop_sequence)}}},
                    {"usage", {{"output_tokens", m.output_tokens}}}}) +
         sse_event({{"type", "message_stop"}});
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

std::string error_event(const Status& s) {
  return sse_event(anthropic_error_json(http_status(s), s.message()));
}

}  // namespace minfer::serve
