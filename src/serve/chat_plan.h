// What a chat request adds to its prompt beyond the messages, and how its
// replies are read: tools, thinking, template arguments, and the constraint
// of a call that must come.
//
// Contract — plan_chat(formatter, options, params):
//   - Renders params.messages through the formatter into params.prompt
//     (params.chat_prompt_rendered set) with the template variables HF's
//     apply_chat_template would get: `tools` (the request's list, when the
//     template reads tools and tool_choice is not "none"),
//     `enable_thinking` (false when --reasoning-budget is 0, a call is
//     forced or the request's enable_thinking is false, else true),
//     `reasoning_effort` when given, then every key of chat_template_kwargs
//     over them. Thinking is off as well when chat_template_kwargs sets
//     enable_thinking to false: a think block the template opened anyway is
//     closed then too.
//   - A message with a null content (a turn of calls only) reaches the
//     template as none; a template that fails on that is rendered again
//     with "" in its place (the error is the second rendering's).
//   - continue_final with a last assistant message (a prefill): the prompt
//     is the template's opening of an assistant turn followed by the
//     prefill, which the reply continues; invalid_argument when the template
//     would not write the prefill verbatim there (e.g. it trims it), or when
//     a call is forced as well.
//   - A template that does not read `tools` (or a built-in format) gets the
//     tools described in a system prompt in the Hermes convention, and an
//     assistant's earlier calls and the tool results rewritten as Hermes
//     text (<tool_call>, <tool_response>), so that any model sees them.
//   - tool_choice "required" or a named function: the prompt ends with the
//     family's opening of a call (Hermes "<tool_call>\n", Mistral
//     "[TOOL_CALLS]"; a thinking block the prompt left open is closed
//     first) and params' format becomes the JSON schema of the family's
//     call body around the functions' parameters (one call, or Mistral's
//     list), so constrained decoding gives a call whose arguments validate.
//     A parameters schema outside docs/GRAMMAR.md's subset is then a 400
//     naming the keyword (when the constraint is compiled). Harmony
//     (serve/harmony.h): the header of a commentary message to the function
//     and its parameters schema; "required" among several, a json message
//     without a recipient and {"name", "arguments"}.
//   - A Mistral template (tool_calls.h) gets the history's call ids as 9
//     letters and digits, as its templates demand: an id that is not
//     already so (OpenAI's call_..., Anthropic's toolu_...) is replaced by
//     a hash of it, the same for the call and the tool result that names
//     it and the same in every request; distinct ids stay distinct.
//   - A harmony template gets each earlier reasoning as `thinking` and a
//     null content as ""; its replies are read by channel
//     (ReplyReading::harmony) unless --reasoning-format none leaves them
//     raw (no tools).
//   - Returns how to read the replies (serve/chat_output.h); a template
//     error is the formatter's Status.
// Threading: pure; on the request's HTTP worker.
#pragma once

#include "base/status.h"
#include "runtime/chat_formatter.h"
#include "serve/chat_output.h"
#include "serve/openai.h"

namespace minfer::serve {

struct ChatOptions {
  ReasoningFormat reasoning_format = ReasoningFormat::kAuto;  // --reasoning-format
  int reasoning_budget = -1;                                  // --reasoning-budget: -1 or 0
};

[[nodiscard]] Result<ReplyReading> plan_chat(const runtime::ChatFormatter& formatter,
                                             const ChatOptions& options, CompletionParams& params);

// The system prompt that describes `tools` to a template that does not read
// them (Hermes' convention).
std::string hermes_tools_prompt(const ChatTools& tools);

}  // namespace minfer::serve
