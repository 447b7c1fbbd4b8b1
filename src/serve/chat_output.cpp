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

namespace {

// Calls that go out whole: each one's header, then its arguments.
std::vector<ToolCallDelta> whole_call_deltas(const std::vector<ToolCall>& calls) {
  std::vector<ToolCallDelta> out;
  for (size_t k = 0; k < calls.size(); ++k) {
    out.push_back({k, calls[k].id, calls[k].name, ""});
    out.push_back({k, "", "", calls[k].arguments});
  }
  return out;
}

}  // namespace

ChatDelta ChatOutput::push(std::string_view piece) {
  if (harmony_) {
    HarmonyText h = harmony_->push(piece);
    return {std::move(h.reasoning), std::move(h.content), {}, {}};
  }
  ReasoningText r = reasoning_.push(piece);
  ChatDelta out{std::move(r.reasoning), std::move(r.content), {}, {}};
  if (tools_) {
    out.content = tools_->push(out.content);
    out.call_deltas = tools_->take_deltas();
  }
  return out;
}

ChatDelta ChatOutput::finish() {
  if (harmony_) {
    HarmonyText h = harmony_->finish();
    std::vector<ToolCallDelta> deltas = whole_call_deltas(h.calls);
    return {std::move(h.reasoning), std::move(h.content), std::move(h.calls), std::move(deltas)};
  }
  ReasoningText r = reasoning_.finish();
  ChatDelta out{std::move(r.reasoning), std::move(r.content), {}, {}};
  if (!tools_) return out;
  out.content = tools_->push(out.content);
  ToolCallText rest = tools_->finish();
  out.content += rest.content;
  out.calls = std::move(rest.calls);
  out.call_deltas = tools_->take_deltas();
  return out;
}

}  // namespace minfer::serve
