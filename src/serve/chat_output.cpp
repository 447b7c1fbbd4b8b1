#include "serve/chat_output.h"

namespace minfer::serve {

ChatOutput::ChatOutput(const ReplyReading& reading)
    : reasoning_(reading.extract_reasoning, reading.thinking_open) {
  if (reading.harmony) {
    harmony_.emplace(reading.extract_reasoning, reading.parallel);
    if (!reading.tool_prefix.empty()) (void)harmony_->push(reading.tool_prefix);
    return;
  }
  if (reading.tools) {
    tools_.emplace(*reading.tools, reading.parallel);
    // The prompt wrote the opening of a forced call: the reply continues it.
    if (!reading.tool_prefix.empty()) (void)tools_->push(reading.tool_prefix);
  }
}

ChatDelta ChatOutput::push(std::string_view piece) {
  if (harmony_) {
    HarmonyText h = harmony_->push(piece);
    return {std::move(h.reasoning), std::move(h.content), {}};
  }
  ReasoningText r = reasoning_.push(piece);
  ChatDelta out{std::move(r.reasoning), std::move(r.content), {}};
  if (tools_) out.content = tools_->push(out.content);
  return out;
}

ChatDelta ChatOutput::finish() {
  if (harmony_) {
    HarmonyText h = harmony_->finish();
    return {std::move(h.reasoning), std::move(h.content), std::move(h.calls)};
  }
  ReasoningText r = reasoning_.finish();
  ChatDelta out{std::move(r.reasoning), std::move(r.content), {}};
  if (!tools_) return out;
  out.content = tools_->push(out.content);
  ToolCallText rest = tools_->finish();
  out.content += rest.content;
  out.calls = std::move(rest.calls);
  return out;
}

}  // namespace minfer::serve
