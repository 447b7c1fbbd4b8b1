// One chat choice's generated text read as OpenAI's assistant message:
// reasoning (serve/reasoning.h), then content and tool calls
// (serve/tool_calls.h), whole or as stream deltas.
//
// Contract:
//   - ReplyReading says how to read a request's replies; serve/chat_plan.h
//     decides it with the prompt (the tool family, whether thinking is
//     extracted and was opened by the prompt, and the text the prompt
//     already wrote of a forced call, which the reply continues).
//   - ChatOutput: push() each piece of a choice's text; the reasoning and
//     content deltas safe to send come back, text that may begin a tag or
//     a tool call's marker held back; finish() gives the rest and the calls.
//     The calls also come as stream deltas (call_deltas): a Hermes call's
//     header and arguments as it is generated (serve/tool_calls.h), the
//     rest at finish(); after finish() every call of `calls` has had its
//     header and its whole arguments among the deltas of push() and
//     finish().
//     Reasoning is taken first, so a tool call inside <think> is thinking,
//     not a call. Text that is not a well-formed call is content.
//   - `harmony` (a gpt-oss template): the text is read by
//     serve/harmony.h's stream alone (channels, not <think> or markers).
// Threading: one ChatOutput per choice, used by one thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/harmony.h"
#include "serve/reasoning.h"
#include "serve/tool_calls.h"

namespace minfer::serve {

struct ReplyReading {
  bool extract_reasoning = false;
  bool thinking_open = false;       // the prompt ended inside <think>
  std::optional<ToolFormat> tools;  // read calls in this family
  bool parallel = true;             // more than one call may come
  std::string tool_prefix;          // a forced call's opening, written by the prompt
  bool harmony = false;             // read as harmony messages (serve/harmony.h)
};

struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;               // from finish() only: the reply's calls
  std::vector<ToolCallDelta> call_deltas{};  // the calls' pieces, as a stream sends them
};

class ChatOutput {
 public:
  explicit ChatOutput(const ReplyReading& reading);
  ChatDelta push(std::string_view piece);
  ChatDelta finish();

 private:
  ReasoningStream reasoning_;
  std::optional<ToolCallStream> tools_;
  std::optional<HarmonyStream> harmony_;
};

}  // namespace minfer::serve
