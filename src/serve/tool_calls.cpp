#include "serve/tool_calls.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <random>

#include "base/json.h"
#include "serve/harmony.h"
#include "serve/request_json.h"

namespace minfer::serve {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralOpen = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

bool only_space(std::string_view s) {
  return skip_space(s, 0) == s.size();
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// Contains `word` as a whole identifier (not part of custom_tools, tools_x).
bool has_identifier(std::string_view s, std::string_view word) {
  const auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = s.find(word); at != std::string_view::npos; at = s.find(word, at + 1)) {
    const bool left = at == 0 || !ident(s[at - 1]);
    const bool right = at + word.size() >= s.size() || !ident(s[at + word.size()]);
    if (left && right) return true;
  }
  return false;
}

std::vector<std::string_view> markers_of(ToolFormat f) {
  switch (f) {
    case ToolFormat::kHermes:
      return {kHermesOpen};
    case ToolFormat::kMistral:
      return {kMistralOpen};
    case ToolFormat::kLlama3:
      return {kPythonTag};
    case ToolFormat::kGeneric:
    case ToolFormat::kHarmony:
      return {};
  }
  return {};
}

// The JSON value at i, parsed (never throws); end receives where it ended.
std::optional<ojson> json_at(std::string_view s, size_t i, size_t& end) {
  end = json_value_end(s, i);
  if (end == std::string_view::npos) return std::nullopt;
  // The request bodies' limits: model output is no more trusted than a client.
  Result<ojson> v = parse_ordered_json(s.substr(i, end - i), {kMaxJsonDepth, true});
  if (!v.is_ok()) return std::nullopt;
  return std::move(v).value();
}

// A call object: {"name", "arguments" | "parameters", "id"?}, or OpenAI's
// {"type": "function", "function": {...}} around it.
std::optional<ToolCall> call_from(const ojson& v) {
  if (!v.is_object()) return std::nullopt;
  if (const auto fn = v.find("function"); fn != v.end() && fn->is_object()) {
    auto call = call_from(*fn);
    if (call && call->id.empty()) {
      if (const auto id = v.find("id"); id != v.end() && id->is_string()) call->id = *id;
    }
    return call;
  }
  const auto name = v.find("name");
  if (name == v.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  ToolCall call;
  call.name = *name;
  auto args = v.find("arguments");
  if (args == v.end()) args = v.find("parameters");
  if (args == v.end() || args->is_null()) {
    call.arguments = "{}";
  } else if (args->is_object()) {
    call.arguments = args->dump();
  } else if (args->is_string()) {
    call.arguments = *args;  // some models write the arguments' JSON as a string
  } else {
    return std::nullopt;
  }
  if (const auto id = v.find("id"); id != v.end() && id->is_string()) call.id = *id;
  return call;
}

bool add_calls_of(const ojson& v, std::vector<ToolCall>& calls) {
  if (v.is_array()) {
    for (const ojson& item : v) {
      if (!add_calls_of(item, calls) || item.is_array()) return false;
    }
    return !v.empty();
  }
  auto call = call_from(v);
  if (!call) return false;
  calls.push_back(std::move(*call));
  return true;
}

// <tool_call>{json}</tool_call>, one or many; the last may be unclosed.
std::optional<ToolCallText> parse_hermes(std::string_view s) {
  ToolCallText out;
  size_t i = 0;
  while (s.substr(i).starts_with(kHermesOpen)) {
    size_t end = 0;
    auto v = json_at(s, skip_space(s, i + kHermesOpen.size()), end);
    if (!v) return std::nullopt;
    auto call = call_from(*v);
    if (!call) return std::nullopt;
    out.calls.push_back(std::move(*call));
    i = skip_space(s, end);
    if (s.substr(i).starts_with(kHermesClose)) {
      i = skip_space(s, i + kHermesClose.size());
    } else if (i != s.size()) {
      return std::nullopt;
    }
  }
  out.content = std::string(s.substr(i));
  return out;
}

// brave_search.call(query="...", count=3): Llama 3.1's built-in tools.
std::optional<ToolCall> parse_builtin_call(std::string_view s) {
  const size_t dot = s.find(".call(");
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  ToolCall call;
  call.name = std::string(s.substr(0, dot));
  if (!std::all_of(call.name.begin(), call.name.end(), is_name_char)) return std::nullopt;
  ojson args = ojson::object();
  size_t i = skip_space(s, dot + 6);
  while (i < s.size() && s[i] != ')') {
    const size_t eq = s.find('=', i);
    if (eq == std::string_view::npos) return std::nullopt;
    std::string key(s.substr(i, eq - i));
    key.erase(std::remove_if(key.begin(), key.end(), is_space), key.end());
    size_t end = 0;
    auto value = json_at(s, skip_space(s, eq + 1), end);
    if (key.empty() || !value) return std::nullopt;
    args[key] = std::move(*value);
    i = skip_space(s, end);
    if (i < s.size() && s[i] == ',') i = skip_space(s, i + 1);
  }
  if (i >= s.size() || !only_space(s.substr(i + 1))) return std::nullopt;
  call.arguments = args.dump();
  return call;
}

// JSON calls one after another, separated by white space or ';'.
std::optional<std::vector<ToolCall>> parse_json_calls(std::string_view s, size_t i) {
  std::vector<ToolCall> calls;
  i = skip_space(s, i);
  while (i < s.size()) {
    size_t end = 0;
    auto v = json_at(s, i, end);
    if (!v || v->is_array() || !add_calls_of(*v, calls)) return std::nullopt;
    i = skip_space(s, end);
    if (i < s.size() && s[i] == ';') i = skip_space(s, i + 1);
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// {"name", "parameters"} at the start, or <|python_tag|> then JSON, a
// built-in call, or code for the python tool.
std::optional<ToolCallText> parse_llama3(std::string_view s) {
  ToolCallText out;
  size_t i = skip_space(s, 0);
  if (!s.substr(i).starts_with(kPythonTag)) {
    auto calls = parse_json_calls(s, i);
    if (!calls) return std::nullopt;
    out.calls = std::move(*calls);
    return out;
  }
  i = skip_space(s, i + kPythonTag.size());
  if (auto calls = parse_json_calls(s, i)) {
    out.calls = std::move(*calls);
  } else if (auto call = parse_builtin_call(s.substr(i))) {
    out.calls.push_back(std::move(*call));
  } else if (i < s.size()) {
    out.calls.push_back({"", "python", ojson{{"code", std::string(s.substr(i))}}.dump()});
  } else {
    return std::nullopt;
  }
  return out;
}

// [TOOL_CALLS][{...}, ...], or the newer [TOOL_CALLS]name[ARGS]{...}.
std::optional<ToolCallText> parse_mistral(std::string_view s) {
  ToolCallText out;
  size_t i = 0;
  while (s.substr(i).starts_with(kMistralOpen)) {
    i = skip_space(s, i + kMistralOpen.size());
    size_t end = 0;
    if (i < s.size() && s[i] == '[') {
      auto v = json_at(s, i, end);
      if (!v || !add_calls_of(*v, out.calls)) return std::nullopt;
    } else {
      const size_t args = s.find(kMistralArgs, i);
      if (args == std::string_view::npos) return std::nullopt;
      std::string name(s.substr(i, args - i));
      auto v = json_at(s, skip_space(s, args + kMistralArgs.size()), end);
      if (name.empty() || !std::all_of(name.begin(), name.end(), is_name_char) || !v ||
          !v->is_object()) {
        return std::nullopt;
      }
      out.calls.push_back({"", std::move(name), v->dump()});
    }
    i = skip_space(s, end);
  }
  out.content = std::string(s.substr(i));
  return out;
}

// One JSON value: {"tool_calls": [...]}, {"tool_call": {...}}, a call, a
// list of calls, or {"response": "..."} (an answer, not a call).
std::optional<ToolCallText> parse_generic(std::string_view s) {
  size_t end = 0;
  auto v = json_at(s, skip_space(s, 0), end);
  if (!v || !only_space(s.substr(end))) return std::nullopt;
  ToolCallText out;
  if (v->is_object()) {
    if (const auto r = v->find("response"); r != v->end() && r->is_string() && v->size() == 1) {
      out.content = *r;
      return out;
    }
    if (const auto many = v->find("tool_calls"); many != v->end() && many->is_array()) {
      if (!add_calls_of(*many, out.calls)) return std::nullopt;
      return out;
    }
    if (const auto one = v->find("tool_call"); one != v->end() && one->is_object()) {
      if (!add_calls_of(*one, out.calls)) return std::nullopt;
      return out;
    }
  }
  if (!add_calls_of(*v, out.calls)) return std::nullopt;
  return out;
}

std::optional<ToolCallText> parse_held(ToolFormat f, std::string_view s) {
  switch (f) {
    case ToolFormat::kHermes:
      return parse_hermes(s);
    case ToolFormat::kLlama3:
      return parse_llama3(s);
    case ToolFormat::kMistral:
      return parse_mistral(s);
    case ToolFormat::kGeneric:
      return parse_generic(s);
    case ToolFormat::kHarmony:
      break;  // serve/harmony.h reads these
  }
  return std::nullopt;
}

}  // namespace

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::kHermes:
      return "hermes";
    case ToolFormat::kLlama3:
      return "llama3";
    case ToolFormat::kMistral:
      return "mistral";
    case ToolFormat::kGeneric:
      return "generic";
    case ToolFormat::kHarmony:
      return "harmony";
  }
  return "?";
}

bool template_reads_tools(std::string_view source) {
  return has_identifier(source, "tools");
}

ToolFormat detect_tool_format(std::string_view source) {
  if (is_harmony_template(source)) return ToolFormat::kHarmony;
  if (source.find(kHermesOpen) != std::string_view::npos) return ToolFormat::kHermes;
  if (source.find(kMistralOpen) != std::string_view::npos) return ToolFormat::kMistral;
  if (source.find(kPythonTag) != std::string_view::npos ||
      (source.find("<|start_header_id|>") != std::string_view::npos &&
       source.find("ipython") != std::string_view::npos)) {
    return ToolFormat::kLlama3;
  }
  return template_reads_tools(source) ? ToolFormat::kGeneric : ToolFormat::kHermes;
}

std::string new_tool_call_id(ToolFormat f) {
  static constexpr std::string_view kChars =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kChars.size() - 1);
  const bool mistral = f == ToolFormat::kMistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kChars[pick(rng)];
  return id;
}

size_t json_value_end(std::string_view s, size_t i) {
  constexpr size_t npos = std::string_view::npos;
  if (i >= s.size()) return npos;
  if (s[i] != '{' && s[i] != '[') {  // a scalar: up to a delimiter, strings whole
    if (s[i] == '"') {
      for (size_t k = i + 1; k < s.size(); ++k) {
        if (s[k] == '\\')
          ++k;
        else if (s[k] == '"')
          return k + 1;
      }
      return npos;
    }
    size_t k = i;
    while (k < s.size() && !is_space(s[k]) && s[k] != ',' && s[k] != ')' && s[k] != ']' &&
           s[k] != '}' && s[k] != ';') {
      ++k;
    }
    return k > i ? k : npos;
  }
  int depth = 0;
  bool in_string = false;
  for (size_t k = i; k < s.size(); ++k) {
    const char c = s[k];
    if (in_string) {
      if (c == '\\')
        ++k;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      // Deeper than a request may nest: not a call (and nothing recursive
      // downstream ever sees it).
      if (++depth > kMaxJsonDepth) return npos;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return k + 1;
    }
  }
  return npos;
}

std::string ToolCallStream::take_safe_content() {
  const bool json_opens = format_ == ToolFormat::kLlama3 || format_ == ToolFormat::kGeneric;
  if (json_opens && !sent_content_) {
    const size_t i = skip_space(pending_, 0);
    if (i == pending_.size()) return "";  // only white space yet: undecided
    if (pending_[i] == '{' || (format_ == ToolFormat::kGeneric && pending_[i] == '[')) {
      held_all_ = true;
      return "";
    }
  }
  size_t first = std::string::npos;
  for (std::string_view m : markers_of(format_)) first = std::min(first, pending_.find(m));
  size_t cut = first;
  if (first != std::string::npos) {
    held_all_ = true;
  } else {
    // Hold the longest tail that a marker could still begin with.
    size_t hold = 0;
    for (std::string_view m : markers_of(format_)) {
      for (size_t k = std::min(m.size() - 1, pending_.size()); k > hold; --k) {
        if (pending_.compare(pending_.size() - k, k, m, 0, k) == 0) {
          hold = k;
          break;
        }
      }
    }
    cut = pending_.size() - hold;
  }
  std::string out = pending_.substr(0, cut);
  pending_.erase(0, cut);
  if (!only_space(out)) sent_content_ = true;
  return out;
}

std::string ToolCallStream::push(std::string_view piece) {
  pending_ += piece;
  if (held_all_) return "";
  return take_safe_content();
}

ToolCallText ToolCallStream::finish() {
  ToolCallText out;
  if (held_all_) {
    if (auto parsed = parse_held(format_, pending_))
      out = std::move(*parsed);
    else
      out.content = pending_;
  } else {
    out.content = pending_;
  }
  pending_.clear();
  if (!parallel_ && out.calls.size() > 1) out.calls.resize(1);
  for (ToolCall& c : out.calls) {
    if (c.id.empty()) c.id = new_tool_call_id(format_);
  }
  return out;
}

ToolCallText parse_tool_calls(ToolFormat format, std::string_view text, bool parallel) {
  ToolCallStream stream(format, parallel);
  std::string content = stream.push(text);
  ToolCallText rest = stream.finish();
  rest.content = content + rest.content;
  return rest;
}

}  // namespace minfer::serve
