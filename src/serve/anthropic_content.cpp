#include "serve/anthropic_content.h"

#include <random>

#include "serve/anthropic.h"
#include "serve/json_reply.h"
#include "serve/openai.h"
#include "serve/request_json.h"

namespace minfer::serve {
namespace {

using nlohmann::json;

json stop_json(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

json block_delta(int index, json delta) {
  return {{"type", "content_block_delta"}, {"index", index}, {"delta", std::move(delta)}};
}

}  // namespace

const char* stop_reason(std::string_view finish_reason, const std::string& stop_sequence,
                        bool called) {
  if (called) return "tool_use";
  if (!stop_sequence.empty()) return "stop_sequence";
  return finish_reason == "stop" ? "end_turn" : "max_tokens";
}

std::string new_tool_use_id() {
  static constexpr std::string_view kChars =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kChars.size() - 1);
  std::string id = "toolu_";
  for (int i = 0; i < 24; ++i) id += kChars[pick(rng)];
  return id;
}

json tool_use_json(const ToolCall& call) {
  // Through the request door's depth bound: the arguments are the model's.
  auto input = parse_request_json(call.arguments);
  return {{"type", "tool_use"},
          {"id", call.id},
          {"name", call.name},
          {"input", input ? std::move(*input) : json::object()}};
}

json message_json(const MessageReply& m) {
  json content = json::array();
  if (!m.thinking.empty()) {
    content.push_back({{"type", "thinking"}, {"thinking", m.thinking}, {"signature", ""}});
  }
  if (!m.text.empty() || (m.thinking.empty() && m.calls.empty())) {
    content.push_back({{"type", "text"}, {"text", m.text}});
  }
  for (const ToolCall& c : m.calls) content.push_back(tool_use_json(c));
  return {{"id", m.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", m.model},
          {"content", content},
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
         sse_event({{"type", "ping"}});
}

std::string stream_closing(const MessageReply& m) {
  return sse_event({{"type", "message_delta"},
                    {"delta",
                     {{"stop_reason", stop_json(m.stop_reason)},
                      {"stop_sequence", stop_json(m.stop_sequence)}}},
                    {"usage", {{"output_tokens", m.output_tokens}}}}) +
         sse_event({{"type", "message_stop"}});
}

std::string error_event(const Status& s) {
  return sse_event(anthropic_error_json(http_status(s), s.message()));
}

std::string ContentBlockEvents::close() {
  if (open_ == Kind::kNone) return "";
  std::string out;
  // Anthropic ends every thinking block with its signature; ours is empty
  // (nothing signs local thinking), sent so that clients find the event.
  if (open_ == Kind::kThinking) {
    out += sse_event(block_delta(index_, {{"type", "signature_delta"}, {"signature", ""}}));
  }
  open_ = Kind::kNone;
  return out + sse_event({{"type", "content_block_stop"}, {"index", index_}});
}

std::string ContentBlockEvents::open(Kind kind, json block) {
  std::string out = close();
  open_ = kind;
  ++index_;
  return out + sse_event({{"type", "content_block_start"},
                          {"index", index_},
                          {"content_block", std::move(block)}});
}

std::string ContentBlockEvents::switch_to(Kind kind) {
  if (open_ == kind) return "";
  return open(kind, kind == Kind::kThinking
                        ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                        : json{{"type", "text"}, {"text", ""}});
}

// A call's header opens its tool_use block (input {} as Anthropic starts
// one); its arguments' pieces are input_json_delta events of that block.
std::string ContentBlockEvents::push_call(const ToolCallDelta& c) {
  std::string out;
  if (!c.id.empty()) {
    ++calls_sent_;
    out += open(Kind::kToolUse, {{"type", "tool_use"},
                                 {"id", new_tool_use_id()},
                                 {"name", c.name},
                                 {"input", json::object()}});
  }
  if (!c.arguments.empty() && open_ == Kind::kToolUse) {
    out += sse_event(
        block_delta(index_, {{"type", "input_json_delta"}, {"partial_json", c.arguments}}));
  }
  return out;
}

std::string ContentBlockEvents::push(const ChatDelta& d) {
  std::string out;
  if (!d.reasoning.empty()) {
    out += switch_to(Kind::kThinking);
    out += sse_event(block_delta(index_, {{"type", "thinking_delta"}, {"thinking", d.reasoning}}));
  }
  if (!d.content.empty()) {
    out += switch_to(Kind::kText);
    out += sse_event(block_delta(index_, {{"type", "text_delta"}, {"text", d.content}}));
  }
  for (const ToolCallDelta& c : d.call_deltas) out += push_call(c);
  return out;
}

std::string ContentBlockEvents::finish(const std::vector<ToolCall>& calls) {
  // A reply with no block at all still has its (empty) text block, as the
  // whole reply does.
  std::string out = index_ < 0 && calls.empty() ? switch_to(Kind::kText) : "";
  out += close();
  // Calls that did not come through push(): whole, one block each.
  for (size_t k = calls_sent_; k < calls.size(); ++k) {
    json block = tool_use_json(calls[k]);
    block["input"] = json::object();
    out += open(Kind::kToolUse, std::move(block));
    out += sse_event(
        block_delta(index_, {{"type", "input_json_delta"}, {"partial_json", calls[k].arguments}}));
    out += close();
  }
  return out;
}

}  // namespace minfer::serve
