// Tool calls streamed while they are generated (serve/tool_calls.h's
// take_deltas(), serve/chat_output.h's call_deltas, the Anthropic
// tool_use events of serve/anthropic_content.h): a Hermes call's header
// as soon as its name and the opening of its arguments have come, its
// arguments in pieces that add up to the final arguments exactly, other
// shapes whole at the end, and a call that turns out malformed falling back
// to content as the whole parse does.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "serve/anthropic_content.h"
#include "serve/chat_output.h"
#include "serve/tool_calls.h"

namespace minfer::serve {
namespace {

// What a client puts together from a stream fed `chunk` bytes at a time.
struct Streamed {
  std::string content;
  std::vector<ToolCall> calls;           // from the deltas
  std::vector<int> pieces;               // argument deltas per call
  std::vector<ToolCall> final_calls;     // finish()'s
  size_t header_at = std::string::npos;  // the text's bytes pushed when the first header came
};

Streamed stream(const std::string& text, size_t chunk = 1, bool parallel = true) {
  ToolCallStream s(ToolFormat::kHermes, parallel);
  Streamed out;
  const auto take = [&](size_t pushed) {
    for (const ToolCallDelta& d : s.take_deltas()) {
      if (d.index >= out.calls.size()) {
        out.calls.resize(d.index + 1);
        out.pieces.resize(d.index + 1);
      }
      if (!d.id.empty()) {
        EXPECT_TRUE(out.calls[d.index].id.empty()) << "a second header for call " << d.index;
        out.calls[d.index].id = d.id;
        out.calls[d.index].name = d.name;
        if (out.header_at == std::string::npos) out.header_at = pushed;
      } else {
        EXPECT_FALSE(out.calls[d.index].id.empty()) << "arguments before the header";
      }
      out.calls[d.index].arguments += d.arguments;
      out.pieces[d.index] += d.arguments.empty() ? 0 : 1;
    }
  };
  for (size_t at = 0; at < text.size(); at += chunk) {
    out.content += s.push(text.substr(at, chunk));
    take(std::min(text.size(), at + chunk));
  }
  ToolCallText rest = s.finish();
  out.content += rest.content;
  out.final_calls = rest.calls;
  take(text.size());
  return out;
}

void expect_same_calls(const Streamed& s) {
  ASSERT_EQ(s.calls.size(), s.final_calls.size());
  for (size_t k = 0; k < s.calls.size(); ++k) {
    EXPECT_EQ(s.calls[k].id, s.final_calls[k].id);
    EXPECT_EQ(s.calls[k].name, s.final_calls[k].name);
    EXPECT_EQ(s.calls[k].arguments, s.final_calls[k].arguments);
  }
}

TEST(ToolCallStream, HermesArgumentsStreamAsTheyCome) {
  const std::string text =
      "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
      "\"days\": [1, 2], \"note\": \"a } and \\\" inside\"}}\n</tool_call>";
  const Streamed s = stream(text);
  EXPECT_EQ(s.content, "Checking.\n");
  ASSERT_EQ(s.final_calls.size(), 1u);
  expect_same_calls(s);
  // The arguments as the model wrote them, in many pieces; the header came
  // right after the arguments' '{'.
  EXPECT_EQ(s.final_calls[0].arguments,
            "{\"city\": \"Paris\", \"days\": [1, 2], \"note\": \"a } and \\\" inside\"}");
  EXPECT_GT(s.pieces[0], 10);
  EXPECT_EQ(s.header_at, text.find("{\"city\"") + 1);
  // Whole pushes and the non-streamed parse agree.
  expect_same_calls(stream(text, text.size()));
  EXPECT_EQ(parse_tool_calls(ToolFormat::kHermes, text).calls[0].arguments,
            s.final_calls[0].arguments);
}

TEST(ToolCallStream, SeveralCallsEachStreamWithTheirIndex) {
  const std::string text =
      "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}}</tool_call>\n"
      "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";
  for (size_t chunk : {1, 3, 7}) {
    const Streamed s = stream(text, chunk);
    ASSERT_EQ(s.final_calls.size(), 2u) << chunk;
    expect_same_calls(s);
    EXPECT_EQ(s.calls[1].name, "b");
    EXPECT_NE(s.calls[0].id, s.calls[1].id);
  }
  // parallel_tool_calls false: the second call is neither streamed nor kept.
  const Streamed one = stream(text, 1, false);
  ASSERT_EQ(one.final_calls.size(), 1u);
  expect_same_calls(one);
}

TEST(ToolCallStream, OtherShapesGoOutWholeAtTheEnd) {
  for (const std::string text : {
           // the arguments first, or as a JSON string, or a key after them
           "<tool_call>{\"arguments\": {\"x\": 1}, \"name\": \"a\"}</tool_call>",
           "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>",
       }) {
    const Streamed s = stream(text);
    ASSERT_EQ(s.final_calls.size(), 1u) << text;
    expect_same_calls(s);
    EXPECT_EQ(s.pieces[0], 1) << text;
    EXPECT_EQ(s.header_at, text.size()) << text;  // only at finish()
  }
  const Streamed after = stream(
      "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}, "
      "\"id\": \"c9\"}</tool_call>");
  ASSERT_EQ(after.final_calls.size(), 1u);
  expect_same_calls(after);
  EXPECT_GT(after.pieces[0], 1);
}

TEST(ToolCallStream, PiecesNeverSplitACharacter) {
  const std::string text = "<tool_call>{\"name\": \"t\", \"arguments\": {\"q\": \"日本語 ü 🌍\"}}";
  ToolCallStream s(ToolFormat::kHermes);
  for (char c : text) {
    (void)s.push(std::string(1, c));
    for (const ToolCallDelta& d : s.take_deltas()) {
      EXPECT_NO_THROW((void)nlohmann::json(d.arguments).dump()) << "a split character";
    }
  }
  EXPECT_EQ(s.finish().calls.size(), 1u);
}

// A call whose header went out and that then breaks (bad JSON, cut by the
// length limit, text after it that is not a call): no call at the end, the
// text whole as content, as the non-streamed reply has it.
TEST(ToolCallStream, AMalformedCallFallsBackToContent) {
  for (const std::string text : {
           "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": tru}}</tool_call>",
           "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": [1, 2",
           "<tool_call>{\"name\": \"a\", \"arguments\": {}} junk",
       }) {
    const Streamed s = stream(text);
    EXPECT_FALSE(s.calls.empty()) << text;  // its header went out
    EXPECT_TRUE(s.final_calls.empty()) << text;
    EXPECT_EQ(s.content, text);
    const ToolCallText whole = parse_tool_calls(ToolFormat::kHermes, text);
    EXPECT_TRUE(whole.calls.empty());
    EXPECT_EQ(whole.content, text);
  }
}

TEST(ToolCallStream, ChatOutputCarriesTheDeltasAfterReasoning) {
  ReplyReading reading;
  reading.extract_reasoning = true;
  reading.thinking_open = true;
  reading.tools = ToolFormat::kHermes;
  ChatOutput out(reading);
  const std::string text =
      "Need it.</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"city\": \"Oslo\"}}";
  std::string reasoning, args;
  size_t headers = 0;
  for (char c : text) {
    ChatDelta d = out.push(std::string(1, c));
    reasoning += d.reasoning;
    EXPECT_TRUE(d.calls.empty());
    for (const ToolCallDelta& f : d.call_deltas) {
      headers += f.id.empty() ? 0 : 1;
      args += f.arguments;
    }
  }
  EXPECT_EQ(headers, 1u);
  ChatDelta end = out.finish();
  for (const ToolCallDelta& f : end.call_deltas) args += f.arguments;
  EXPECT_EQ(reasoning + end.reasoning, "Need it.");
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(args, end.calls[0].arguments);
  EXPECT_EQ(args, "{\"city\": \"Oslo\"}");

  // A harmony reply's calls go out whole from finish().
  ReplyReading harmony;
  harmony.harmony = true;
  harmony.tools = ToolFormat::kHarmony;
  ChatOutput h(harmony);
  (void)h.push(" to=functions.w<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}");
  ChatDelta hend = h.finish();
  ASSERT_EQ(hend.calls.size(), 1u);
  ASSERT_EQ(hend.call_deltas.size(), 2u);
  EXPECT_EQ(hend.call_deltas[0].name, "w");
  EXPECT_EQ(hend.call_deltas[1].arguments, hend.calls[0].arguments);
}

std::vector<nlohmann::json> events_data(const std::string& sse) {
  std::vector<nlohmann::json> out;
  for (size_t at = sse.find("data: "); at != std::string::npos; at = sse.find("data: ", at)) {
    const size_t end = sse.find('\n', at);
    out.push_back(nlohmann::json::parse(sse.substr(at + 6, end - at - 6)));
    at = end;
  }
  return out;
}

TEST(ToolCallStream, AnthropicToolUseInputStreamsInPieces) {
  ContentBlockEvents blocks;
  ChatDelta text;
  text.content = "Sure.";
  std::string sse = blocks.push(text);
  ChatDelta header;
  header.call_deltas = {{0, "call_x", "get_weather", ""}};
  ChatDelta a, b;
  a.call_deltas = {{0, "", "", "{\"city\": "}};
  b.call_deltas = {{0, "", "", "\"Paris\"}"}};
  sse += blocks.push(header) + blocks.push(a) + blocks.push(b);
  sse += blocks.finish({{"call_x", "get_weather", "{\"city\": \"Paris\"}"}});
  const auto e = events_data(sse);
  // text start, delta, stop; tool_use start, two input deltas, stop.
  ASSERT_EQ(e.size(), 7u) << sse;
  EXPECT_EQ(e[3]["type"], "content_block_start");
  EXPECT_EQ(e[3]["index"], 1);
  EXPECT_EQ(e[3]["content_block"]["type"], "tool_use");
  EXPECT_EQ(e[3]["content_block"]["name"], "get_weather");
  EXPECT_TRUE(e[3]["content_block"]["id"].get<std::string>().starts_with("toolu_"));
  EXPECT_EQ(e[4]["delta"]["partial_json"].get<std::string>() +
                e[5]["delta"]["partial_json"].get<std::string>(),
            "{\"city\": \"Paris\"}");
  EXPECT_EQ(e[6]["type"], "content_block_stop");
}

}  // namespace
}  // namespace minfer::serve
