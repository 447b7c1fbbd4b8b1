#include "serve/tool_calls.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

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
constexpr std::string_view kMistralCallId = "[CALL_ID]";
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

// The text of member `key` of the JSON object written at the start of
// `object`, as written; nullopt when it has none.
std::optional<std::string_view> member_text(std::string_view object, std::string_view key) {
  size_t i = skip_space(object, 0);
  if (i >= object.size() || object[i] != '{') return std::nullopt;
  i = skip_space(object, i + 1);
  while (i < object.size() && object[i] == '"') {
    const size_t key_end = json_value_end(object, i);
    if (key_end == std::string_view::npos) return std::nullopt;
    const std::string_view written = object.substr(i + 1, key_end - i - 2);
    i = skip_space(object, key_end);
    if (i >= object.size() || object[i] != ':') return std::nullopt;
    i = skip_space(object, i + 1);
    const size_t value_end = json_value_end(object, i);
    if (value_end == std::string_view::npos) return std::nullopt;
    if (written == key) return object.substr(i, value_end - i);
    i = skip_space(object, value_end);
    if (i < object.size() && object[i] == ',') i = skip_space(object, i + 1);
  }
  return std::nullopt;
}

// A call's arguments object as the model wrote it (what a stream sends),
// where call_from() found one.
void keep_written_arguments(std::string_view object, ToolCall& call) {
  auto args = member_text(object, "arguments");
  if (!args) args = member_text(object, "parameters");
  if (args && args->starts_with('{')) call.arguments = std::string(*args);
}

// <tool_call>{json}</tool_call>, one or many; the last may be unclosed.
std::optional<ToolCallText> parse_hermes(std::string_view s) {
  ToolCallText out;
  size_t i = 0;
  while (s.substr(i).starts_with(kHermesOpen)) {
    size_t end = 0;
    const size_t start = skip_space(s, i + kHermesOpen.size());
    auto v = json_at(s, start, end);
    if (!v) return std::nullopt;
    auto call = call_from(*v);
    if (!call) return std::nullopt;
    keep_written_arguments(s.substr(start, end - start), *call);
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

bool is_name(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_name_char);
}

// name[ARGS]{...} or name[CALL_ID]id[ARGS]{...} at i (Mistral Small 3.2's
// template writes the id); end receives where the arguments end.
std::optional<ToolCall> mistral_named_call(std::string_view s, size_t i, size_t& end) {
  const size_t args = s.find(kMistralArgs, i);
  if (args == std::string_view::npos) return std::nullopt;
  std::string_view name = s.substr(i, args - i);
  std::string_view id;
  if (const size_t at = name.find(kMistralCallId); at != std::string_view::npos) {
    id = name.substr(at + kMistralCallId.size());
    name = name.substr(0, at);
    if (!is_name(id)) return std::nullopt;
  }
  const size_t from = skip_space(s, args + kMistralArgs.size());
  auto v = json_at(s, from, end);
  if (!is_name(name) || !v || !v->is_object()) return std::nullopt;
  // The arguments as the model wrote them (a stream sends that text).
  return ToolCall{std::string(id), std::string(name), std::string(s.substr(from, end - from))};
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
      auto call = mistral_named_call(s, i, end);
      if (!call) return std::nullopt;
      out.calls.push_back(std::move(*call));
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
  std::string content = held_all_ ? "" : take_safe_content();
  if (held_all_ && format_ == ToolFormat::kHermes) stream_calls();
  return content;
}

std::vector<ToolCallDelta> ToolCallStream::take_deltas() {
  return std::exchange(deltas_, {});
}

namespace {

enum class Match { kYes, kMore, kNo };

// Whether `s` has `want` at i (after white space); kMore while `s` ends
// inside it. On kYes, i moves past it.
Match match_at(std::string_view s, size_t& i, std::string_view want) {
  const size_t at = skip_space(s, i);
  const std::string_view have = s.substr(at, want.size());
  if (!want.starts_with(have)) return Match::kNo;
  if (have.size() < want.size()) return Match::kMore;
  i = at + want.size();
  return Match::kYes;
}

// The end of the text safe to send out of s[from, to): never the first
// bytes of a UTF-8 character whose last ones have not come.
size_t whole_characters_end(std::string_view s, size_t from, size_t to) {
  for (size_t k = to; k > from && to - k < 4; --k) {
    const auto lead = static_cast<unsigned char>(s[k - 1]);
    if ((lead & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return k - 1 + need > to ? k - 1 : to;
  }
  return to;
}

}  // namespace

// The calls that have come so far, streamed: each pass reads as far as the
// text decides and returns, to go on with the next piece.
void ToolCallStream::stream_calls() {
  bool advanced = true;
  while (advanced) {
    switch (phase_) {
      case Phase::kHeader:
        advanced = read_header();
        break;
      case Phase::kArguments:
        advanced = read_arguments();
        break;
      case Phase::kAfter:
        advanced = read_after();
        break;
      case Phase::kStopped:
        advanced = false;
        break;
    }
  }
}

// <tool_call>{"name": "NAME", "arguments": { : the call's header goes out.
// Any other shape (the keys in another order, arguments as a string, the
// name a number) stops streaming: those calls go out whole after finish().
bool ToolCallStream::read_header() {
  const std::string_view s = pending_;
  size_t i = call_at_ + kHermesOpen.size();
  Match m = Match::kYes;
  for (std::string_view want : {"{", "\"name\"", ":"}) {
    if ((m = match_at(s, i, want)) != Match::kYes) break;
  }
  size_t name_at = skip_space(s, i), name_end = std::string_view::npos;
  if (m == Match::kYes && name_at < s.size()) {
    if (s[name_at] != '"') m = Match::kNo;
    name_end = json_value_end(s, name_at);
    i = name_end;
  }
  if (m == Match::kYes && name_end != std::string_view::npos) {
    for (std::string_view want : {",", "\"arguments\"", ":", "{"}) {
      if ((m = match_at(s, i, want)) != Match::kYes) break;
    }
  }
  if (m == Match::kNo) phase_ = Phase::kStopped;
  if (m != Match::kYes || name_end == std::string_view::npos) return m == Match::kNo;
  Result<nlohmann::ordered_json> name = parse_ordered_json(s.substr(name_at, name_end - name_at));
  if (!name.is_ok() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    phase_ = Phase::kStopped;
    return false;
  }
  Announced call{new_tool_call_id(format_), name->get<std::string>(), ""};
  deltas_.push_back({announced_.size(), call.id, call.name, ""});
  announced_.push_back(std::move(call));
  object_at_ = skip_space(s, call_at_ + kHermesOpen.size());
  sent_at_ = scan_at_ = i - 1;  // the arguments' '{'
  depth_ = 0;
  in_string_ = escaped_ = false;
  phase_ = Phase::kArguments;
  return true;
}

// The arguments' text up to where it has come, then up to their close.
bool ToolCallStream::read_arguments() {
  bool closed = false;
  size_t k = scan_at_;
  for (; k < pending_.size() && !closed; ++k) {
    const char c = pending_[k];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      if (++depth_ > kMaxJsonDepth) {  // never a call (json_value_end agrees)
        phase_ = Phase::kStopped;
        return false;
      }
    } else if (c == '}' || c == ']') {
      closed = --depth_ == 0;
    }
  }
  scan_at_ = k;
  const size_t end = closed ? k : whole_characters_end(pending_, sent_at_, k);
  if (end > sent_at_) {
    std::string piece = pending_.substr(sent_at_, end - sent_at_);
    announced_.back().arguments += piece;
    deltas_.push_back({announced_.size() - 1, "", "", std::move(piece)});
    sent_at_ = end;
  }
  if (closed) phase_ = Phase::kAfter;
  return closed;
}

// The rest of the call's object, its closing tag, and the next call's
// marker: streaming goes on with that call; any other text stops it (the
// parse at finish() decides what it is).
bool ToolCallStream::read_after() {
  const size_t end = json_value_end(pending_, object_at_);
  if (end == std::string_view::npos) return false;  // more of the object to come
  size_t i = end;
  Match m = match_at(pending_, i, kHermesClose);
  if (m == Match::kYes) m = match_at(pending_, i, kHermesOpen);
  if (m == Match::kMore || skip_space(pending_, i) == pending_.size()) return false;
  if (m == Match::kNo || !parallel_) {
    phase_ = Phase::kStopped;
    return false;
  }
  call_at_ = i - kHermesOpen.size();
  phase_ = Phase::kHeader;
  return true;
}

// The parsed calls against what the stream sent: the streamed ones keep
// their ids and get the rest of their arguments, the others go out whole.
// A parse that does not extend what was sent is no call at all.
void ToolCallStream::settle_calls(std::vector<ToolCall>& calls) {
  for (size_t k = 0; k < announced_.size(); ++k) {
    if (k >= calls.size() || calls[k].name != announced_[k].name ||
        !calls[k].arguments.starts_with(announced_[k].arguments)) {
      calls.clear();
      return;
    }
  }
  for (size_t k = 0; k < calls.size(); ++k) {
    ToolCall& c = calls[k];
    if (k < announced_.size()) {
      c.id = announced_[k].id;
      std::string rest = c.arguments.substr(announced_[k].arguments.size());
      if (!rest.empty()) deltas_.push_back({k, "", "", std::move(rest)});
      continue;
    }
    if (c.id.empty()) c.id = new_tool_call_id(format_);
    deltas_.push_back({k, c.id, c.name, ""});
    deltas_.push_back({k, "", "", c.arguments});
  }
}

ToolCallText ToolCallStream::finish() {
  ToolCallText out;
  std::optional<ToolCallText> parsed;
  if (held_all_) parsed = parse_held(format_, pending_);
  if (parsed) out = std::move(*parsed);
  if (!parallel_ && out.calls.size() > 1) out.calls.resize(1);
  if (parsed) settle_calls(out.calls);
  if (!parsed || (out.calls.empty() && !announced_.empty())) {
    out.content = pending_;  // not calls after all: the text, whole
    out.calls.clear();
  }
  pending_.clear();
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
