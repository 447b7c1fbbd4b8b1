#include "serve/harmony.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

#include "base/json.h"
#include "serve/request_json.h"

namespace minfer::serve {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kFunctions = "functions.";
// A header is a role, a channel, a recipient and a content type: one much
// longer than this is not a header but text that lost its format.
constexpr size_t kMaxHeader = 256;

// What ends a message's text: its end marker, or (for a model that left the
// end out) the next message's start.
constexpr std::array<std::string_view, 4> kTerminators = {kEnd, kReturn, kCall, kStart};

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// The length of the longest tail of `s` that one of `markers` begins with.
template <size_t N>
size_t partial_tail(std::string_view s, const std::array<std::string_view, N>& markers) {
  size_t hold = 0;
  for (std::string_view m : markers) {
    for (size_t k = std::min(m.size() - 1, s.size()); k > hold; --k) {
      if (s.substr(s.size() - k) == m.substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    const size_t start = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

}  // namespace

bool is_harmony_template(std::string_view source) {
  return source.find(kStart) != std::string_view::npos &&
         source.find(kChannel) != std::string_view::npos;
}

std::string forced_call_header(std::string_view function_name) {
  if (function_name.empty())
    return std::string(kChannel) + "commentary <|constrain|>json<|message|>";
  return std::string(kChannel) + "commentary to=" + std::string(kFunctions) +
         std::string(function_name) + " " + std::string(kConstrain) + "json" +
         std::string(kMessage);
}

void HarmonyStream::send(HarmonyText& out, std::string_view text) {
  switch (sink_) {
    case Sink::kReasoning:
      out.reasoning += text;
      break;
    case Sink::kContent:
      out.content += text;
      break;
    case Sink::kCall:
      call_text_ += text;
      break;
  }
  raw_message_ += text;
}

// The header "[ROLE][ to=R]<|channel|>CHANNEL[ to=R][ <|constrain|>json]"
// decides where the message's text goes.
void HarmonyStream::open_message(std::string_view header) {
  const size_t channel_at = header.find(kChannel);
  std::string text(header.substr(0, channel_at));
  text += ' ';
  const std::string_view after = header.substr(channel_at + kChannel.size());
  const std::vector<std::string_view> channel_words = words(after);
  text += after;
  for (size_t at = text.find(kConstrain); at != std::string::npos; at = text.find(kConstrain)) {
    text.replace(at, kConstrain.size(), " ");
  }
  recipient_.clear();
  json_type_ = false;
  for (std::string_view w : words(text)) {
    if (w.starts_with("to=")) {
      recipient_ = std::string(w.substr(3));
      if (recipient_.starts_with(kFunctions)) recipient_.erase(0, kFunctions.size());
    } else if (w == "json") {
      json_type_ = true;
    }
  }
  if (recipient_ == "assistant" || recipient_ == "user") recipient_.clear();
  const std::string_view channel = channel_words.empty() ? "" : channel_words[0];
  call_text_.clear();
  if (!recipient_.empty() || (channel == "commentary" && json_type_)) {
    sink_ = Sink::kCall;
  } else if (channel == "analysis" && extract_reasoning_) {
    sink_ = Sink::kReasoning;
  } else {
    sink_ = Sink::kContent;  // final, a preamble (commentary), or analysis kept as content
  }
}

// A call message ends: a call when its text is one, else the message as it
// was generated, as content.
void HarmonyStream::close_message(HarmonyText& out) {
  if (sink_ == Sink::kCall) {
    std::vector<ToolCall> found;
    if (!recipient_.empty()) {
      const auto args = parse_ordered_json(call_text_, {kMaxJsonDepth, true});
      if (args.is_ok() && args->is_object()) found.push_back({"", recipient_, args->dump()});
    } else {
      ToolCallText parsed = parse_tool_calls(ToolFormat::kGeneric, call_text_);
      if (parsed.content.empty()) found = std::move(parsed.calls);
    }
    if (found.empty()) {
      out.content += raw_message_;
    } else {
      for (ToolCall& c : found) calls_.push_back(std::move(c));
    }
  }
  raw_message_.clear();
  call_text_.clear();
  sink_ = Sink::kContent;
}

bool HarmonyStream::read_header(HarmonyText& out) {
  const size_t message = pending_.find(kMessage);
  const size_t bad = std::min(pending_.find(kEnd), pending_.find(kStart));
  if (message == std::string::npos || bad < message) {
    if (bad == std::string::npos && pending_.size() <= kMaxHeader) return false;  // undecided
    out.content += raw_message_ + pending_;  // not a header: the format is lost
    raw_message_.clear();
    pending_.clear();
    state_ = State::kRaw;
    return true;
  }
  const std::string_view header = std::string_view(pending_).substr(0, message);
  if (header.find(kChannel) == std::string_view::npos) {
    state_ = State::kRaw;
    out.content += raw_message_;
    raw_message_.clear();
    return true;
  }
  open_message(header);
  raw_message_ += pending_.substr(0, message + kMessage.size());
  pending_.erase(0, message + kMessage.size());
  state_ = State::kBody;
  return true;
}

bool HarmonyStream::read_body(HarmonyText& out) {
  size_t end = std::string::npos;
  std::string_view terminator;
  for (std::string_view t : kTerminators) {
    const size_t at = pending_.find(t);
    if (at < end) {
      end = at;
      terminator = t;
    }
  }
  if (end == std::string::npos) {
    const size_t keep = partial_tail(pending_, kTerminators);
    send(out, std::string_view(pending_).substr(0, pending_.size() - keep));
    pending_.erase(0, pending_.size() - keep);
    return false;
  }
  send(out, std::string_view(pending_).substr(0, end));
  // The next message's start is left for kBetween to read.
  pending_.erase(0, terminator == kStart ? end : end + terminator.size());
  raw_message_ += terminator == kStart ? "" : terminator;
  close_message(out);
  state_ = State::kBetween;
  return true;
}

// Between messages: white space, then "<|start|>" and the next header.
bool HarmonyStream::read_between() {
  size_t i = 0;
  while (i < pending_.size() && is_space(pending_[i])) ++i;
  const std::string_view rest = std::string_view(pending_).substr(i);
  if (rest.starts_with(kStart)) {
    raw_message_ = std::string(kStart);
    pending_.erase(0, i + kStart.size());
    state_ = State::kHeader;
    return true;
  }
  if (kStart.starts_with(rest)) return false;  // undecided (empty included)
  state_ = State::kRaw;                        // the format is lost: the text as it came
  return true;
}

void HarmonyStream::step(HarmonyText& out) {
  for (bool progress = true; progress;) {
    switch (state_) {
      case State::kFirstHeader: {
        // The prompt wrote "<|start|>assistant": the reply opens with the
        // rest of a header (or, from some models, a whole new start).
        const std::string_view p = pending_;
        if (p.starts_with(kStart)) {
          raw_message_ = std::string(kStart);
          pending_.erase(0, kStart.size());
          state_ = State::kHeader;
        } else if (p.starts_with(kChannel) || p.starts_with(" to=")) {
          state_ = State::kHeader;
        } else if (kStart.starts_with(p) || kChannel.starts_with(p) ||
                   std::string_view(" to=").starts_with(p)) {
          return;  // undecided (empty included)
        } else {
          state_ = State::kRaw;
        }
        break;
      }
      case State::kHeader:
        progress = read_header(out);
        break;
      case State::kBody:
        progress = read_body(out);
        break;
      case State::kBetween:
        progress = read_between();
        break;
      case State::kRaw:
        out.content += pending_;
        pending_.clear();
        return;
    }
  }
}

HarmonyText HarmonyStream::push(std::string_view piece) {
  HarmonyText out;
  pending_ += piece;
  step(out);
  return out;
}

HarmonyText HarmonyStream::finish() {
  HarmonyText out;
  step(out);
  switch (state_) {
    case State::kBody:  // ended at <|return|> or <|call|>, which the text leaves out
      send(out, pending_);
      close_message(out);
      break;
    case State::kHeader:  // a header that never ended
      out.content += raw_message_ + pending_;
      break;
    case State::kFirstHeader:
    case State::kBetween:
    case State::kRaw:
      out.content += pending_;
      break;
  }
  pending_.clear();
  raw_message_.clear();
  state_ = State::kRaw;
  out.calls = std::move(calls_);
  calls_.clear();
  if (!parallel_ && out.calls.size() > 1) out.calls.resize(1);
  for (ToolCall& c : out.calls) {
    if (c.id.empty()) c.id = new_tool_call_id(ToolFormat::kHarmony);
  }
  return out;
}

HarmonyText parse_harmony(std::string_view text, bool extract_reasoning, bool parallel) {
  HarmonyStream stream(extract_reasoning, parallel);
  HarmonyText out = stream.push(text);
  HarmonyText rest = stream.finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  out.calls = std::move(rest.calls);
  return out;
}

}  // namespace minfer::serve
