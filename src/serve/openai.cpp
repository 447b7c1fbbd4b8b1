#include "serve/openai.h"

#include <algorithm>
#include <limits>

#include "runtime/engine.h"

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
    MINFER_ASSIGN_OR_RETURN(std::string text, content_text(m.value("content", json()), i));
    p.messages.push_back({m["role"].get<std::string>(), std::move(text)});
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

Status read_format(const json& body, CompletionParams& p) {
  const auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return Status::ok();
  const std::string want =
      "{\"type\": \"text\" | \"json_object\" | \"json_schema\"} (json_schema with "
      "\"json_schema\": {\"schema\": {...}})";
  if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string()) {
    return wrong("response_format", want);
  }
  const std::string type = (*it)["type"].get<std::string>();
  if (type == "text") return Status::ok();
  if (type == "json_object") {
    p.format = CompletionParams::Format::kJsonObject;
    return Status::ok();
  }
  const auto js = it->find("json_schema");
  if (type != "json_schema" || js == it->end() || !js->is_object()) {
    return wrong("response_format", want);
  }
  const auto schema = js->find("schema");
  if (schema == js->end() || !(schema->is_object() || schema->is_boolean())) {
    return wrong("response_format.json_schema.schema", "a JSON schema (an object)");
  }
  p.format = CompletionParams::Format::kJsonSchema;
  return Status::ok();
}

}  // namespace

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

nlohmann::ordered_json ordered_schema(const std::string& body) {
  const auto doc = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  const nlohmann::ordered_json::json_pointer at("/response_format/json_schema/schema");
  if (doc.is_discarded() || !doc.contains(at)) return nullptr;
  return doc[at];
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
  for (const std::string& s : stops_) cut = std::min(cut, held_.find(s));
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
