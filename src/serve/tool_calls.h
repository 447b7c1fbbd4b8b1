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
//   - take_deltas() gives the calls as a stream sends them (ToolCallDelta):
//     a Hermes call written {"name": ..., "arguments": {...}} goes out
//     while it is generated, its header once the name and the opening of
//     the arguments object have come, then the arguments' text as it
//     arrives (never part of a UTF-8 character); a call in any other shape,
//     and every other family's, goes out whole after finish(). After
//     finish() each of its calls has had its header and all of its
//     arguments, exactly: the pieces of a call add up to its `arguments`.
//   - Text that looked like a call but does not parse into one (bad JSON,
//     no name, cut by the length limit) comes back as content, whole:
//     never an error. A streamed call that ends so is not among finish()'s
//     calls (the deltas already taken stay taken: a client holds a call
//     that the reply's finish reason, not "tool_calls", disowns).
//   - A Hermes call's arguments are the text the model wrote (what a
//     stream sends), as are Mistral's name[ARGS]{...}; the other forms'
//     are the parsed JSON written compactly.
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

// One piece of a streamed call: its header (index, id, name; no arguments)
// first, then pieces of its arguments' JSON text.
struct ToolCallDelta {
  size_t index = 0;       // the call's place among the reply's calls
  std::string id, name;   // the header's only
  std::string arguments;  // a piece of the arguments ("" in the header)
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
  // The call deltas decided since the last take (above).
  std::vector<ToolCallDelta> take_deltas();
  // A marker (or a reply opening as JSON) was seen: calls may follow.
  bool holding() const { return held_all_; }

 private:
  // Streaming Hermes calls out of pending_ (from its marker on).
  enum class Phase { kHeader, kArguments, kAfter, kStopped };
  struct Announced {
    std::string id, name, arguments;  // the header and the arguments sent
  };
  std::string take_safe_content();
  void stream_calls();
  bool read_header();
  bool read_arguments();
  bool read_after();
  void settle_calls(std::vector<ToolCall>& calls);

  ToolFormat format_;
  bool parallel_;
  std::string pending_;
  bool held_all_ = false;      // from a marker on, everything waits for finish()
  bool sent_content_ = false;  // something other than whitespace went out
  std::vector<ToolCallDelta> deltas_;
  std::vector<Announced> announced_;
  Phase phase_ = Phase::kHeader;
  size_t call_at_ = 0;    // the current call's marker in pending_
  size_t object_at_ = 0;  // its JSON object's '{'
  size_t sent_at_ = 0;    // the next byte of its arguments to send
  size_t scan_at_ = 0;    // the next byte of its arguments to read
  int depth_ = 0;         // the arguments' nesting at scan_at_
  bool in_string_ = false, escaped_ = false;
};

ToolCallText parse_tool_calls(ToolFormat format, std::string_view text, bool parallel = true);

}  // namespace minfer::serve
