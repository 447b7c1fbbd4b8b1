// Tool calls in a model's output: which convention a chat template's family
// writes them in, and the parser that takes them out of the generated text,
// whole or while it streams.
//
// Contract:
//   - detect_tool_format(source) reads the template's text, never a file
//     name: "<tool_call>" is Hermes (Qwen 2.5/3, Hermes 2/3); "[TOOL_CALLS]"
//     Mistral; "<|python_tag|>", or Llama 3 headers with the ipython role,
//     Llama 3.x; any other template that reads `tools` the generic JSON
//     convention; a template that does not read `tools` (or none) is
//     answered through a Hermes system prompt (serve/chat_tools.h), so
//     Hermes. A harmony template (serve/harmony.h: "<|start|>" and
//     "<|channel|>") is kHarmony, read by serve/harmony.h's own stream:
//     ToolCallStream passes its text through as content.
//   - ToolCallStream: push() each piece of generated text; it returns the
//     content that is safe to send (text that might begin a call's marker is
//     held back until it is decided) and, from finish(), the calls. Once a
//     marker appears (Hermes <tool_call>, Mistral [TOOL_CALLS], Llama's
//     <|python_tag|>; for Llama 3.x and generic a reply that opens with a
//     JSON value) the rest is held and parsed at finish().
//   - Text that looked like a call but does not parse into one (bad JSON,
//     no name) comes back as content, whole: never an error.
//   - parse_tool_calls(format, text) is push(text) then finish().
//   - With parallel false only the first call is kept.
// Threading: a stream is used by one thread; the functions are pure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::serve {

enum class ToolFormat { kHermes, kLlama3, kMistral, kGeneric, kHarmony };

const char* tool_format_name(ToolFormat f);

// The family of the template's tool calls (above).
ToolFormat detect_tool_format(std::string_view template_source);
// Whether the template renders `tools` itself (else the Hermes system prompt
// describes them).
bool template_reads_tools(std::string_view template_source);

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text (an object)
};

struct ToolCallText {
  std::string content;
  std::vector<ToolCall> calls;
};

// A fresh call id: 9 letters and digits for Mistral (its templates insist),
// "call_" and 24 of them otherwise.
std::string new_tool_call_id(ToolFormat f);

// Where the JSON value that begins at `start` ends (one past it), or npos
// when it is not one complete value (strings, escapes and nesting tracked;
// the value itself is not validated).
size_t json_value_end(std::string_view text, size_t start);

class ToolCallStream {
 public:
  explicit ToolCallStream(ToolFormat format, bool parallel = true)
      : format_(format), parallel_(parallel) {}
  // Content safe to send now.
  std::string push(std::string_view piece);
  // The rest: held content, and the calls when the held text is calls.
  ToolCallText finish();
  // A marker (or a reply opening as JSON) was seen: calls may follow.
  bool holding() const { return held_all_; }

 private:
  std::string take_safe_content();

  ToolFormat format_;
  bool parallel_;
  std::string pending_;
  bool held_all_ = false;      // from a marker on, everything waits for finish()
  bool sent_content_ = false;  // something other than whitespace went out
};

ToolCallText parse_tool_calls(ToolFormat format, std::string_view text, bool parallel = true);

}  // namespace minfer::serve
