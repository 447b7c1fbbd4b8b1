// OpenAI's harmony format (gpt-oss): the generated text read as an
// assistant's reasoning, answer and tool calls.
//
// A harmony reply is a sequence of messages
//   <|start|>assistant<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>json]<|message|>TEXT<|end|>
// (the recipient may also follow the role: "assistant to=functions.f"), the
// first one's "<|start|>assistant" already written by the prompt, the last
// ending at <|return|> or <|call|> (end-of-generation tokens, so usually
// absent from the text). Channels: analysis is the chain of thought,
// commentary carries tool calls (recipient functions.NAME, the arguments'
// JSON as TEXT) and preambles for the user, final is the answer.
//
// Contract:
//   - is_harmony_template(source): the template writes harmony messages
//     (it contains both "<|start|>" and "<|channel|>"); read from the
//     template's text, never a file name.
//   - HarmonyStream: push() each piece of generated text; it returns the
//     reasoning (analysis; into content instead when `extract_reasoning` is
//     false) and the content (final, and commentary without a recipient)
//     safe to send, holding back a tail that may begin a marker. finish()
//     gives the rest and the calls: each commentary message to
//     functions.NAME is a call to NAME whose arguments are its text (one
//     that is not a JSON object is content, never an error); a json-typed
//     commentary message without a recipient whose text is {"name",
//     "arguments"} is a call too (what a forced choice among several
//     functions generates, serve/chat_plan.h).
//   - Text that does not follow the format (no header where a message must
//     begin, a header that never ends) is content from there on, raw.
//   - With parallel false only the first call is kept.
//   - forced_call_header(name) is the rest of an assistant message's header
//     that opens a call to `name` ("" name: a json commentary message with
//     no recipient), written after the prompt's "<|start|>assistant".
// Threading: a stream is used by one thread; the functions are pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "serve/tool_calls.h"

namespace minfer::serve {

bool is_harmony_template(std::string_view template_source);

std::string forced_call_header(std::string_view function_name);

struct HarmonyText {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;  // from finish() only
};

class HarmonyStream {
 public:
  explicit HarmonyStream(bool extract_reasoning = true, bool parallel = true)
      : extract_reasoning_(extract_reasoning), parallel_(parallel) {}
  HarmonyText push(std::string_view piece);
  HarmonyText finish();

 private:
  enum class State { kFirstHeader, kHeader, kBody, kBetween, kRaw };
  enum class Sink { kReasoning, kContent, kCall };

  void step(HarmonyText& out);
  bool read_header(HarmonyText& out);
  bool read_body(HarmonyText& out);
  bool read_between();
  void open_message(std::string_view header);
  void close_message(HarmonyText& out);
  void send(HarmonyText& out, std::string_view text);

  bool extract_reasoning_;
  bool parallel_;
  State state_ = State::kFirstHeader;
  std::string pending_;
  // The message being read.
  Sink sink_ = Sink::kContent;
  std::string recipient_;    // the function's name for a call to functions.NAME
  bool json_type_ = false;   // <|constrain|>json or " json" in the header
  std::string raw_message_;  // the whole message as generated, for a call that fails
  std::string call_text_;    // a call's body
  std::vector<ToolCall> calls_;
};

HarmonyText parse_harmony(std::string_view text, bool extract_reasoning = true,
                          bool parallel = true);

}  // namespace minfer::serve
