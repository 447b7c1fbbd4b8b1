// Reasoning in a model's output: the text between <think> and </think>
// (Qwen3, DeepSeek-R1 and its distills) separated from the answer, as
// llama-server's --reasoning-format does it.
//
// Contract:
//   - ReasoningFormat: kNone leaves everything in the content, tags
//     included; kDeepSeek and kAuto (the default) take the thinking out into
//     reasoning_content, whole and in stream deltas.
//   - ReasoningStream: push() each piece; it returns the reasoning and the
//     content safe to send (a tail that may begin "<think>" or "</think>"
//     is held until it is decided). Thinking is recognised when the reply
//     opens with <think> (after white space) or when the prompt left one
//     open (`open_in_prompt`: the template wrote "<think>" at the end of
//     the generation prompt). A reply that never closes its thinking is all
//     reasoning. White space right after </think> is dropped, as the
//     templates write it there.
//   - prompt_opens_thinking(prompt) says whether a rendered prompt ends in
//     an open <think>.
// Threading: a stream is used by one thread; the functions are pure.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace minfer::serve {

enum class ReasoningFormat { kNone, kDeepSeek, kAuto };

// "none", "deepseek", "auto" (and llama-server's "deepseek-legacy", read as
// deepseek); anything else is an invalid-argument error naming `field`.
[[nodiscard]] Result<ReasoningFormat> parse_reasoning_format(std::string_view name,
                                                             std::string_view field);

bool prompt_opens_thinking(std::string_view prompt);

struct ReasoningText {
  std::string reasoning;
  std::string content;
};

class ReasoningStream {
 public:
  ReasoningStream(bool extract, bool open_in_prompt)
      : state_(!extract         ? State::kContent
               : open_in_prompt ? State::kThinking
                                : State::kStart) {}
  ReasoningText push(std::string_view piece);
  ReasoningText finish();

 private:
  enum class State { kStart, kThinking, kAfterThinking, kContent };
  void step(ReasoningText& out);

  State state_;
  std::string pending_;
};

}  // namespace minfer::serve
