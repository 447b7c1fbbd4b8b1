// A Messages reply's content as Anthropic's blocks, whole or as the
// server-sent events of a stream: thinking, then text, then tool_use blocks,
// from a reply read through serve/chat_output.h.
//
// Contract:
//   - message_json(): the whole "message" object. Its content: a thinking
//     block {thinking, signature: ""} when reasoning was read out of the
//     reply, a text block when there is text, a tool_use block {id
//     ("toolu_" and 24 letters and digits), name, input (the arguments as an
//     object)} per call; an empty text block when there is none of them.
//     stop_reason "" is null (the reply still runs), stop_sequence "" null.
//   - stop_reason(): "tool_use" when calls were made, "stop_sequence" when a
//     stop string ended the reply, "end_turn" for an end-of-generation token
//     ("stop"), "max_tokens" otherwise ("length").
//   - The stream: stream_opening() (message_start with no content and the
//     input tokens, then ping); ContentBlockEvents turns each ChatDelta into
//     content_block_start / content_block_delta (thinking_delta, text_delta)
//     / content_block_stop, indices from 0 in order, a block closed when the
//     next kind begins; a call's header opens a tool_use block (a fresh
//     toolu_ id, input {}) and each piece of its arguments is an
//     input_json_delta, as the call is generated (serve/chat_output.h:
//     the calls of finish()'s delta come through push() too). finish()
//     closes the open block (a thinking block with a signature_delta
//     first) and sends each of `calls` that push() did not as a tool_use
//     block (its own id) with one input_json_delta of its whole arguments;
//     stream_closing() is message_delta (stop_reason, stop_sequence,
//     output tokens) and message_stop.
// Threading: pure functions; a ContentBlockEvents is used by one thread.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "serve/chat_output.h"

namespace minfer::serve {

// A reply as it stands.
struct MessageReply {
  std::string id, model;
  std::string thinking, text;
  std::vector<ToolCall> calls;
  std::string stop_reason, stop_sequence;
  int64_t input_tokens = 0, output_tokens = 0;
};

const char* stop_reason(std::string_view finish_reason, const std::string& stop_sequence,
                        bool called);

// A fresh tool_use id: "toolu_" and 24 letters and digits.
std::string new_tool_use_id();
// A call as a tool_use block; arguments that are not a JSON object (never
// from the parsers) give input {}.
nlohmann::json tool_use_json(const ToolCall& call);

nlohmann::json message_json(const MessageReply& m);

// One server-sent event: "event: <data.type>\ndata: <data>\n\n".
std::string sse_event(const nlohmann::json& data);
std::string stream_opening(const MessageReply& m);
std::string stream_closing(const MessageReply& m);
// An error event, for a request that fails once streaming has begun.
std::string error_event(const Status& s);

class ContentBlockEvents {
 public:
  std::string push(const ChatDelta& delta);
  // `calls`: the reply's calls; those push() sent as call deltas are not
  // sent again.
  std::string finish(const std::vector<ToolCall>& calls);

 private:
  enum class Kind { kNone, kThinking, kText, kToolUse };
  std::string open(Kind kind, nlohmann::json block);
  std::string switch_to(Kind kind);
  std::string push_call(const ToolCallDelta& call);
  std::string close();

  Kind open_ = Kind::kNone;
  int index_ = -1;         // the open (or last) block's
  size_t calls_sent_ = 0;  // tool_use blocks opened by push()
};

}  // namespace minfer::serve
