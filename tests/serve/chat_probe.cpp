// minfer_chat_probe: a chat request planned and a model's replies read as
// `minfer serve` does it, for a chat template given as text, with no model.
// tests/serve/chat_templates_test.py drives it with real chat templates and
// compares with Python's jinja2; the server's own path is the same calls
// (parse_completion, order_tools, plan_chat, ChatOutput).
//
// Reads one JSON object on stdin and writes one on stdout:
//   in:  {"template", "bos_token", "eos_token", "request": a chat body,
//         "reasoning_budget"?: -1 | 0, "outputs"?: [generated text, ...],
//         "chunk"?: bytes per push when streaming (default 1)}
//   out: {"detected": the family detect_tool_format() reads from the text,
//         "reads_tools", "family": the family replies are read in (null
//         without tools), "prompt" | "error", "replies": [{"whole",
//         "streamed"}]}, each reply {"reasoning", "content", "calls":
//         [{"id", "name", "arguments", "fragments"}]} ("fragments": how many
//         argument deltas a stream sent for the call; 1 when whole); the
//         streamed one also {"confirmed": how many calls the end gave}.
// Exit status 0 whenever the input was read (a template error is "error").
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <iterator>
#include <string>

#include "runtime/chat_formatter.h"
#include "serve/chat_output.h"
#include "serve/chat_plan.h"
#include "serve/openai.h"
#include "serve/tool_calls.h"
#include "serve/tool_request.h"

namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using namespace minfer;

json call_json(const serve::ToolCall& c, int fragments) {
  return {{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}, {"fragments", fragments}};
}

json read_whole(const serve::ReplyReading& reading, const std::string& text) {
  serve::ChatOutput reader(reading);
  serve::ChatDelta d = reader.push(text);
  serve::ChatDelta rest = reader.finish();
  json calls = json::array();
  for (const serve::ToolCall& c : rest.calls) calls.push_back(call_json(c, 1));
  return {{"reasoning", d.reasoning + rest.reasoning},
          {"content", d.content + rest.content},
          {"calls", calls}};
}

// The reply as a streaming client puts it together from the deltas; a call
// the stream announced but the end did not confirm is there too
// ("confirmed" counts the calls the end gave).
json read_streamed(const serve::ReplyReading& reading, const std::string& text, size_t chunk) {
  serve::ChatOutput reader(reading);
  std::string reasoning, content;
  json calls = json::array();
  const auto take = [&](const serve::ChatDelta& d) {
    reasoning += d.reasoning;
    content += d.content;
    for (const serve::ToolCallDelta& f : d.call_deltas) {
      while (calls.size() <= f.index) {
        calls.push_back({{"id", ""}, {"name", ""}, {"arguments", ""}, {"fragments", 0}});
      }
      json& c = calls[f.index];
      if (!f.id.empty()) c["id"] = f.id;
      if (!f.name.empty()) c["name"] = f.name;
      c["arguments"] = c["arguments"].get<std::string>() + f.arguments;
      if (!f.arguments.empty()) c["fragments"] = c["fragments"].get<int>() + 1;
    }
  };
  for (size_t at = 0; at < text.size(); at += chunk) take(reader.push(text.substr(at, chunk)));
  const serve::ChatDelta rest = reader.finish();
  take(rest);
  return {{"reasoning", reasoning},
          {"content", content},
          {"calls", calls},
          {"confirmed", rest.calls.size()}};
}

int run(const ordered_json& in) {
  const std::string source = in.value("template", "");
  auto formatter = runtime::ChatFormatter::from_template(source, in.value("bos_token", ""),
                                                         in.value("eos_token", ""));
  json out = {{"detected", serve::tool_format_name(serve::detect_tool_format(source))},
              {"reads_tools", serve::template_reads_tools(source)},
              {"family", nullptr}};
  if (!formatter) {
    out["error"] = formatter.message();
    std::cout << out.dump() << "\n";
    return 0;
  }
  // The body as the request wrote it: order_tools() reads its key order.
  const std::string body = in.at("request").dump();
  auto params = serve::parse_completion(json::parse(body), true, runtime::SamplerParams{});
  if (!params) {
    out["error"] = params.message();
    std::cout << out.dump() << "\n";
    return 0;
  }
  serve::order_tools(params->tools, body);
  serve::ChatOptions options;
  options.reasoning_budget = in.value("reasoning_budget", -1);
  auto reading = serve::plan_chat(*formatter, options, *params);
  if (!reading) {
    out["error"] = reading.message();
    std::cout << out.dump() << "\n";
    return 0;
  }
  out["prompt"] = params->prompt;
  if (reading->tools) out["family"] = serve::tool_format_name(*reading->tools);
  const size_t chunk = std::max<size_t>(1, in.value("chunk", size_t{1}));
  json replies = json::array();
  for (const auto& text : in.value("outputs", ordered_json::array())) {
    const std::string t = text.get<std::string>();
    replies.push_back(
        {{"whole", read_whole(*reading, t)}, {"streamed", read_streamed(*reading, t, chunk)}});
  }
  out["replies"] = replies;
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

int main() {
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  const ordered_json in = ordered_json::parse(input, nullptr, false);
  if (in.is_discarded() || !in.is_object() || !in.contains("request")) {
    std::cerr << "minfer_chat_probe: stdin must be one JSON object with a 'request'\n";
    return 2;
  }
  return run(in);
}
