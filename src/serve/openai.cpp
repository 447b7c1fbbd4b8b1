#include "serve/openai.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>

#include "runtime/engine.h"
#include "serve/request_json.h"

namespace minfer::serve {
namespace {

using nlohmann::json;

Status wrong(const std::string& field, const std::string& want) {
  return Status::invalid_argument("'" + field + "' must be " + want);
}

Result<double> number(const json& body, const char* field, double lo, double hi, double dflt) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return dflt;
  if (!it->is_number()) return wrong(field, "a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    return wrong(field, "from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  return v;
}

Result<int64_t> integer(const json& body, const char* field, int64_t lo, int64_t hi, int64_t dflt) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return dflt;
  if (!it->is_number_integer()) return wrong(field, "an integer");
  const auto v =
      it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(hi) ? hi + 1 : it->get<int64_t>();
  if (v < lo || v > hi)
    return wrong(field, "from " + std::to_string(lo) + " to " + std::to_string(hi));
  return v;
}

Result<bool> boolean(const json& body, const char* field, bool dflt) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) return wrong(field, "true or false");
  return it->get<bool>();
}

Result<std::string> content_text(const json& c, size_t i) {
  const std::string field = "messages[" + std::to_string(i) + "].content";
  if (c.is_null()) return std::string();
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) return wrong(field, "a string or a list of text parts");
  std::string text;
  for (const json& part : c) {
    const bool text_part = part.is_object() && part.contains("type") && part["type"].is_string() &&
                           part["type"] == "text" && part.contains("text") &&
                           part["text"].is_string();
    if (!text_part) {
      return wrong(field, "text parts ({\"type\": \"text\", \"text\": \"...\"})");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// An assistant's tool_calls and reasoning_content, a tool result's
// tool_call_id and name.
Status read_message_tools(const json& m, size_t i, runtime::ChatMessage& out) {
  const std::string field = "messages[" + std::to_string(i) + "]";
  if (const auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
    if (!calls->is_array()) return wrong(field + ".tool_calls", "a list of function calls");
    for (size_t k = 0; k < calls->size(); ++k) {
      MINFER_ASSIGN_OR_RETURN(
          runtime::ChatToolCall call,
          read_tool_call((*calls)[k], field + ".tool_calls[" + std::to_string(k) + "]"));
      out.tool_calls.push_back(std::move(call));
    }
  }
  const auto text_field = [&](const char* key, std::string& to) -> Status {
    const auto it = m.find(key);
    if (it == m.end() || it->is_null()) return Status::ok();
    if (!it->is_string()) return wrong(field + "." + key, "a string");
    to = it->get<std::string>();
    return Status::ok();
  };
  MINFER_RETURN_IF_ERROR(text_field("tool_call_id", out.tool_call_id));
  MINFER_RETURN_IF_ERROR(text_field("name", out.name));
  return text_field("reasoning_content", out.reasoning_content);
}

Status read_messages(const json& body, CompletionParams& p) {
  const auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) {
    return wrong("messages", "a non-empty list");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return wrong("messages[" + std::to_string(i) + "]", "an object with a string 'role'");
    }
    // find, not value(): value() would copy the whole content subtree.
    const auto content = m.find("content");
    static const json kNull;
    MINFER_ASSIGN_OR_RETURN(std::string text,
                            content_text(content == m.end() ? kNull : *content, i));
    runtime::ChatMessage msg{m["role"].get<std::string>(), std::move(text)};
    msg.null_content = content == m.end() || content->is_null();
    MINFER_RETURN_IF_ERROR(read_message_tools(m, i, msg));
    p.messages.push_back(std::move(msg));
  }
  return Status::ok();
}

// What a chat request hands its template and reply reading besides the
// messages: tools, chat_template_kwargs, reasoning_effort, reasoning_format.
Status read_chat_extras(const json& body, CompletionParams& p) {
  MINFER_ASSIGN_OR_RETURN(p.tools, read_tools(body));
  if (p.tools.forced() && p.format != CompletionParams::Format::kText) {
    return Status::invalid_argument(
        "'tool_choice' that requires a call cannot be combined with a JSON 'response_format' or "
        "a 'grammar'");
  }
  if (const auto k = body.find("chat_template_kwargs"); k != body.end() && !k->is_null()) {
    if (!k->is_object()) return wrong("chat_template_kwargs", "an object");
    p.chat_template_kwargs = *k;
  }
  if (const auto e = body.find("reasoning_effort"); e != body.end() && !e->is_null()) {
    if (!e->is_string()) return wrong("reasoning_effort", "a string (low, medium, high)");
    p.reasoning_effort = e->get<std::string>();
  }
  if (const auto f = body.find("reasoning_format"); f != body.end() && !f->is_null()) {
    if (!f->is_string()) return wrong("reasoning_format", "none, deepseek or auto");
    MINFER_ASSIGN_OR_RETURN(p.reasoning_format,
                            parse_reasoning_format(f->get<std::string>(), "'reasoning_format'"));
  }
  return Status::ok();
}

Status read_prompt(const json& body, CompletionParams& p) {
  const auto it = body.find("prompt");
  if (it == body.end()) return wrong("prompt", "given");
  if (it->is_string()) {
    p.prompt = it->get<std::string>();
    return Status::ok();
  }
  if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
    for (const json& t : *it) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return wrong("prompt", "a string or a list of token ids");
      }
      p.prompt_tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return Status::ok();
  }
  if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    p.prompt = (*it)[0].get<std::string>();
    return Status::ok();
  }
  return wrong("prompt", "a string or a list of token ids");
}

Status read_stop(const json& body, CompletionParams& p) {
  const auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return Status::ok();
  if (it->is_string()) {
    if (!it->get<std::string>().empty()) p.stop.push_back(it->get<std::string>());
    return Status::ok();
  }
  if (!it->is_array() || it->size() > 4) return wrong("stop", "a string or a list of up to 4");
  for (const json& s : *it) {
    if (!s.is_string()) return wrong("stop", "a string or a list of up to 4 strings");
    if (!s.get<std::string>().empty()) p.stop.push_back(s.get<std::string>());
  }
  return Status::ok();
}

// Chat: "logprobs": bool and "top_logprobs": 0..20. Completions: "logprobs": 0..20.
Status read_logprobs(const json& body, CompletionParams& p) {
  constexpr int kMax = runtime::Request::kMaxTopLogprobs;
  if (!p.chat) {
    MINFER_ASSIGN_OR_RETURN(int64_t n, integer(body, "logprobs", 0, kMax, -1));
    p.top_logprobs = static_cast<int>(n);
    return Status::ok();
  }
  MINFER_ASSIGN_OR_RETURN(bool on, boolean(body, "logprobs", false));
  MINFER_ASSIGN_OR_RETURN(int64_t top, integer(body, "top_logprobs", 0, kMax, -1));
  if (top >= 0 && !on) return wrong("top_logprobs", "given only with \"logprobs\": true");
  p.top_logprobs = on ? static_cast<int>(std::max<int64_t>(top, 0)) : -1;
  return Status::ok();
}

// llama-server's GBNF "grammar" (a string; "" is none, as llama-server has
// it). It is compiled where the request's constraint is made, so a bad
// grammar is a 400 naming its line and column before anything is queued.
Status read_grammar(const json& body, CompletionParams& p) {
  const auto g = body.find("grammar");
  if (g == body.end() || g->is_null()) return Status::ok();
  if (!g->is_string()) return wrong("grammar", "a GBNF grammar (a string)");
  if (g->get_ref<const std::string&>().empty()) return Status::ok();
  if (p.format != CompletionParams::Format::kText) {
    return Status::invalid_argument(
        "'grammar' and 'json_schema'/'response_format' were both given: a request is "
        "constrained by one of them");
  }
  p.format = CompletionParams::Format::kGrammar;
  p.grammar = g->get<std::string>();
  return Status::ok();
}

// A schema where one may stand: an object (or true/false, JSON Schema's any/none).
bool is_schema(const json& s) {
  return s.is_object() || s.is_boolean();
}

// OpenAI's {"type": "json_schema", "json_schema": {"schema": {...}}} and
// llama-server's {"type": "json_schema" | "json_object", "schema": {...}};
// llama-server's top-level "json_schema" too (response_format wins over it).
Status read_json_format(const json& body, CompletionParams& p) {
  if (const auto top = body.find("json_schema"); top != body.end() && !top->is_null()) {
    if (!is_schema(*top)) return wrong("json_schema", "a JSON schema (an object)");
    p.format = CompletionParams::Format::kJsonSchema;
  }
  const auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return Status::ok();
  const std::string want =
      "{\"type\": \"text\" | \"json_object\" | \"json_schema\"} (json_schema with "
      "\"json_schema\": {\"schema\": {...}} or \"schema\": {...})";
  if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string()) {
    return wrong("response_format", want);
  }
  const std::string type = (*it)["type"].get<std::string>();
  if (type == "text") return Status::ok();
  const auto direct = it->find("schema");
  if (direct != it->end() && !is_schema(*direct)) {
    return wrong("response_format.schema", "a JSON schema (an object)");
  }
  if (type == "json_object") {
    p.format = direct != it->end() ? CompletionParams::Format::kJsonSchema
                                   : CompletionParams::Format::kJsonObject;
    return Status::ok();
  }
  if (type != "json_schema") return wrong("response_format", want);
  const auto js = it->find("json_schema");
  if (js == it->end() && direct != it->end()) {
    p.format = CompletionParams::Format::kJsonSchema;
    return Status::ok();
  }
  if (js == it->end() || !js->is_object()) return wrong("response_format", want);
  const auto schema = js->find("schema");
  if (schema == js->end() || !is_schema(*schema)) {
    return wrong("response_format.json_schema.schema", "a JSON schema (an object)");
  }
  p.format = CompletionParams::Format::kJsonSchema;
  return Status::ok();
}

Status read_format(const json& body, CompletionParams& p) {
  MINFER_RETURN_IF_ERROR(read_json_format(body, p));
  return read_grammar(body, p);
}

// A logit_bias token id: a JSON string holding a whole number (OpenAI's
// object keys) or a JSON integer (llama-server's pairs).
Result<int32_t> bias_id(const json& id, const std::string& entry) {
  const Status bad = wrong("logit_bias", "keyed by token ids (whole numbers from 0 to 2^31-1); " +
                                             entry + " is not one");
  int64_t v = -1;
  if (id.is_string()) {
    const std::string& s = id.get_ref<const std::string&>();
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return bad;
  } else if (id.is_number_integer()) {
    if (id.is_number_unsigned() && id.get<uint64_t>() > uint64_t{1} << 31) return bad;
    v = id.get<int64_t>();
  } else {
    return bad;
  }
  if (v < 0 || v > std::numeric_limits<int32_t>::max()) return bad;
  return static_cast<int32_t>(v);
}

// A bias: a number in [-100, 100], or false (llama-server's "never"). False
// and -100 are -inf: OpenAI documents -100 as a ban, and a finite -100 would
// leave the token a (tiny) chance when sampling.
Result<float> bias_value(const json& b, const std::string& entry) {
  constexpr float kNever = -std::numeric_limits<float>::infinity();
  if (b.is_boolean() && !b.get<bool>()) return kNever;
  if (b.is_number() && b.get<double>() == -100.0) return kNever;
  if (!b.is_number() || !(std::fabs(b.get<double>()) <= 100.0)) {
    return wrong("logit_bias", "biases from -100 to 100 (or false: never); " + entry + " is not");
  }
  return static_cast<float>(b.get<double>());
}

// OpenAI's {"<token id>": bias, ...} or llama-server's [[token id, bias], ...].
Status read_logit_bias(const json& body, CompletionParams& p) {
  const auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return Status::ok();
  auto& out = p.sampling.logit_bias;
  out.clear();
  if (it->is_object()) {
    for (const auto& [key, b] : it->items()) {
      const std::string entry = "\"" + key + "\": " + b.dump();
      MINFER_ASSIGN_OR_RETURN(int32_t id, bias_id(json(key), entry));
      MINFER_ASSIGN_OR_RETURN(float bias, bias_value(b, entry));
      out.push_back({id, bias});
    }
    return Status::ok();
  }
  if (!it->is_array()) {
    return wrong("logit_bias", "an object {\"<token id>\": bias} or a list of [token id, bias]");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& pair = (*it)[i];
    const std::string entry = "logit_bias[" + std::to_string(i) + "]";
    // llama-server also takes a token's text in place of its id: not read here.
    if (!pair.is_array() || pair.size() != 2 || pair[0].is_string()) {
      return wrong(entry, "a pair [token id, bias]");
    }
    MINFER_ASSIGN_OR_RETURN(int32_t id, bias_id(pair[0], entry + " = " + pair.dump()));
    MINFER_ASSIGN_OR_RETURN(float bias, bias_value(pair[1], entry + " = " + pair.dump()));
    out.push_back({id, bias});
  }
  return Status::ok();
}

}  // namespace

Status check_token_ids(const CompletionParams& p, int64_t n_vocab) {
  const auto outside = [&](int64_t id) { return id < 0 || id >= n_vocab; };
  const std::string range =
      " is not a token id of this model (from 0 to " + std::to_string(n_vocab - 1) + ")";
  for (size_t i = 0; i < p.prompt_tokens.size(); ++i) {
    if (outside(p.prompt_tokens[i])) {
      return Status::invalid_argument("'prompt'[" + std::to_string(i) +
                                      "] = " + std::to_string(p.prompt_tokens[i]) + range);
    }
  }
  for (const runtime::LogitBias& b : p.sampling.logit_bias) {
    if (outside(b.id)) {
      return Status::invalid_argument("'logit_bias' token " + std::to_string(b.id) + range);
    }
  }
  return Status::ok();
}

Result<CompletionParams> parse_completion(const json& body, bool chat,
                                          const runtime::SamplerParams& defaults) {
  if (!body.is_object()) return Status::invalid_argument("the body must be a JSON object");
  CompletionParams p;
  p.chat = chat;
  p.sampling = defaults;
  MINFER_RETURN_IF_ERROR(chat ? read_messages(body, p) : read_prompt(body, p));
  constexpr int64_t kMaxTokens = 1 << 24;
  MINFER_ASSIGN_OR_RETURN(int64_t max_tokens, integer(body, "max_tokens", 1, kMaxTokens, -1));
  MINFER_ASSIGN_OR_RETURN(p.max_tokens,
                          integer(body, "max_completion_tokens", 1, kMaxTokens, max_tokens));
  MINFER_ASSIGN_OR_RETURN(double t, number(body, "temperature", 0, 100, p.sampling.temperature));
  MINFER_ASSIGN_OR_RETURN(double top_p, number(body, "top_p", 0, 1, p.sampling.top_p));
  MINFER_ASSIGN_OR_RETURN(double min_p, number(body, "min_p", 0, 1, p.sampling.min_p));
  MINFER_ASSIGN_OR_RETURN(int64_t top_k, integer(body, "top_k", 0, 1 << 30, p.sampling.top_k));
  MINFER_ASSIGN_OR_RETURN(double rp,
                          number(body, "repeat_penalty", 1e-6, 1e6, p.sampling.repeat_penalty));
  MINFER_ASSIGN_OR_RETURN(rp, number(body, "repetition_penalty", 1e-6, 1e6, rp));
  MINFER_ASSIGN_OR_RETURN(int64_t seed, integer(body, "seed", std::numeric_limits<int64_t>::min(),
                                                std::numeric_limits<int64_t>::max(),
                                                static_cast<int64_t>(p.sampling.seed)));
  MINFER_ASSIGN_OR_RETURN(int64_t n, integer(body, "n", 1, CompletionParams::kMaxChoices, 1));
  p.n = static_cast<int>(n);
  MINFER_ASSIGN_OR_RETURN(double presence,
                          number(body, "presence_penalty", -2, 2, p.sampling.presence_penalty));
  MINFER_ASSIGN_OR_RETURN(double frequency,
                          number(body, "frequency_penalty", -2, 2, p.sampling.frequency_penalty));
  p.sampling.presence_penalty = static_cast<float>(presence);
  p.sampling.frequency_penalty = static_cast<float>(frequency);
  if (const auto u = body.find("user"); u != body.end() && !u->is_null() && !u->is_string()) {
    return wrong("user", "a string");
  }
  MINFER_RETURN_IF_ERROR(read_logprobs(body, p));
  MINFER_RETURN_IF_ERROR(read_format(body, p));
  if (chat) MINFER_RETURN_IF_ERROR(read_chat_extras(body, p));
  MINFER_RETURN_IF_ERROR(read_logit_bias(body, p));
  MINFER_ASSIGN_OR_RETURN(p.stream, boolean(body, "stream", false));
  if (const auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) return wrong("stream_options", "an object");
    MINFER_ASSIGN_OR_RETURN(p.include_usage, boolean(*so, "include_usage", false));
  }
  if (top_p == 0) top_p = 1e-9;  // 0 would leave nothing: the top token, as greedy
  p.sampling.temperature = static_cast<float>(t);
  p.sampling.top_p = static_cast<float>(top_p);
  p.sampling.min_p = static_cast<float>(min_p);
  p.sampling.top_k = static_cast<int>(top_k);
  p.sampling.repeat_penalty = static_cast<float>(rp);
  p.sampling.seed = static_cast<uint64_t>(seed);
  MINFER_RETURN_IF_ERROR(read_stop(body, p));
  return p;
}

nlohmann::ordered_json ordered_schema(std::string_view body) {
  // Through the same depth check as the first parse: the copy below recurses.
  auto doc = parse_request_ordered_json(body);
  if (!doc) return nullptr;
  // Where read_format() looks, in its order: response_format first.
  if (const auto rf = doc->find("response_format"); rf != doc->end() && rf->is_object()) {
    if (const auto js = rf->find("json_schema"); js != rf->end() && js->is_object()) {
      if (const auto schema = js->find("schema"); schema != js->end()) return std::move(*schema);
    }
    if (const auto schema = rf->find("schema"); schema != rf->end()) return std::move(*schema);
  }
  if (const auto top = doc->find("json_schema"); top != doc->end()) return std::move(*top);
  return nullptr;
}

int http_status(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kUnimplemented:
      return 501;
    default:
      return 500;
  }
}

json error_body(const Status& s) {
  const int code = http_status(s);
  const char* type = code == 400 || code == 404 ? "invalid_request_error"
                     : code == 401              ? "authentication_error"
                     : code == 429              ? "rate_limit_error"
                                                : "server_error";
  return {{"error", {{"message", s.message()}, {"type", type}, {"code", code}}}};
}

std::string StopText::push(const std::string& piece) {
  if (stopped_) return "";
  held_ += piece;
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) {
    if (const size_t at = held_.find(s); at < cut) {
      cut = at;
      stop_word_ = s;
    }
  }
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // Hold the longest tail that a stop string could still begin with.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, held_.size()); k > hold; --k) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopText::finish() {
  std::string out;
  out.swap(held_);
  return stopped_ ? "" : out;
}

}  // namespace minfer::serve
