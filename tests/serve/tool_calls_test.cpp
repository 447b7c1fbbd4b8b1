// Tool calls and reasoning taken out of a model's text (serve/tool_calls.h,
// serve/reasoning.h, serve/chat_output.h): each family's syntax, several
// calls, malformed output returned as content, and streaming that splits
// the text at every byte and still gives the same answer without ever
// sending part of a marker as content.
#include "serve/tool_calls.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "serve/chat_output.h"
#include "serve/reasoning.h"

namespace minfer::serve {
namespace {

using nlohmann::json;

json args_of(const ToolCall& c) {
  return json::parse(c.arguments);
}

TEST(ToolFormat, IsReadFromTheTemplateText) {
  EXPECT_EQ(detect_tool_format("{% for t in tools %}<tool_call>{% endfor %}"), ToolFormat::kHermes);
  EXPECT_EQ(detect_tool_format("{{ tools }}[TOOL_CALLS]"), ToolFormat::kMistral);
  EXPECT_EQ(detect_tool_format("{{ tools }}<|python_tag|>"), ToolFormat::kLlama3);
  EXPECT_EQ(detect_tool_format("<|start_header_id|>ipython{{ tools }}"), ToolFormat::kLlama3);
  EXPECT_EQ(detect_tool_format("{% if tools %}{{ tools | tojson }}{% endif %}"),
            ToolFormat::kGeneric);
  EXPECT_TRUE(template_reads_tools("{% if tools is defined %}"));
  EXPECT_FALSE(template_reads_tools("{{ custom_tools }}{{ builtin_tools }}"));
  EXPECT_FALSE(template_reads_tools(""));
}

TEST(ToolCalls, HermesOneAndMany) {
  auto r = parse_tool_calls(ToolFormat::kHermes,
                            "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", "
                            "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  EXPECT_EQ(r.content, "Let me check.\n");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(args_of(r.calls[0]), json({{"city", "Paris"}}));
  EXPECT_TRUE(r.calls[0].id.starts_with("call_"));

  r = parse_tool_calls(ToolFormat::kHermes,
                       "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n"
                       "<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": [1, \"}\"]}}"
                       "</tool_call>");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(args_of(r.calls[1]), json::parse(R"({"x": [1, "}"]})"));
  EXPECT_NE(r.calls[0].id, r.calls[1].id);

  r = parse_tool_calls(ToolFormat::kHermes,
                       "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>"
                       "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>",
                       /*parallel=*/false);
  EXPECT_EQ(r.calls.size(), 1u);
  // Unclosed at the very end (a forced call ends at the JSON).
  r = parse_tool_calls(ToolFormat::kHermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}");
  EXPECT_EQ(r.calls.size(), 1u);
}

TEST(ToolCalls, MalformedOutputIsContent) {
  for (const char* text : {
           "<tool_call>{\"name\": \"a\", \"arguments\": {}</tool_call>",  // JSON cut
           "<tool_call>{\"arguments\": {}}</tool_call>",                  // no name
           "<tool_call>{\"name\": 3}</tool_call>",                        // name not a string
           "<tool_call>{\"name\": \"a\", \"arguments\": 5}</tool_call>",  // arguments a number
           "<tool_call>not json</tool_call>",
           "<tool_call>",
           "<tool_call>{\"name\": \"a\"} trailing words",
       }) {
    const auto r = parse_tool_calls(ToolFormat::kHermes, text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
  // Nesting past what a request may hold is not a call either.
  const std::string deep =
      "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": " + std::string(200, '[') +
      std::string(200, ']') + "}}</tool_call>";
  EXPECT_TRUE(parse_tool_calls(ToolFormat::kHermes, deep).calls.empty());
}

TEST(ToolCalls, Llama3JsonPythonTagAndBuiltins) {
  auto r = parse_tool_calls(ToolFormat::kLlama3,
                            " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(args_of(r.calls[0]), json({{"city", "Rome"}}));
  EXPECT_EQ(r.content, "");

  r = parse_tool_calls(ToolFormat::kLlama3,
                       "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; "
                       "{\"type\": \"function\", \"name\": \"b\", \"parameters\": {\"k\": 1}}");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[1].name, "b");

  r = parse_tool_calls(ToolFormat::kLlama3,
                       "<|python_tag|>brave_search.call(query=\"news today\", count=3)");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "brave_search");
  EXPECT_EQ(args_of(r.calls[0]), json({{"query", "news today"}, {"count", 3}}));

  r = parse_tool_calls(ToolFormat::kLlama3, "Sure.<|python_tag|>print(1 + 1)");
  EXPECT_EQ(r.content, "Sure.");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "python");
  EXPECT_EQ(args_of(r.calls[0]), json({{"code", "print(1 + 1)"}}));

  // JSON that is not a call, and JSON later in the answer, are content.
  for (const char* text : {"{\"answer\": 42}", "The call is {\"name\": \"a\", \"parameters\": {}}",
                           "{\"name\": \"a\", \"parameters\": {}} and more"}) {
    r = parse_tool_calls(ToolFormat::kLlama3, text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

TEST(ToolCalls, MistralBothSyntaxes) {
  auto r = parse_tool_calls(ToolFormat::kMistral,
                            "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": "
                            "\"abcDEF123\"}, {\"name\": \"b\", \"arguments\": {}}]");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].id, "abcDEF123");
  EXPECT_EQ(r.calls[1].id.size(), 9u);  // Mistral's templates want 9 characters
  EXPECT_EQ(args_of(r.calls[0]), json({{"x", 1}}));

  r = parse_tool_calls(ToolFormat::kMistral,
                       "ok [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]b[ARGS]{}");
  EXPECT_EQ(r.content, "ok ");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(args_of(r.calls[0]), json({{"city", "Oslo"}}));

  // Mistral Small 3.2's template writes the id between the name and the
  // arguments; the arguments come back as written.
  r = parse_tool_calls(ToolFormat::kMistral,
                       "[TOOL_CALLS]get_weather[CALL_ID]Wx7a9Kq2b[ARGS]{\"city\": \"Paris\"}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].id, "Wx7a9Kq2b");
  EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Paris\"}");

  for (const char* text :
       {"[TOOL_CALLS][{\"name\": \"a\"", "[TOOL_CALLS]bad name[ARGS]{}", "[TOOL_CALLS][]",
        "[TOOL_CALLS]f[CALL_ID][ARGS]{}", "[TOOL_CALLS][CALL_ID]x[ARGS]{}"}) {
    r = parse_tool_calls(ToolFormat::kMistral, text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

TEST(ToolCalls, GenericJson) {
  auto r = parse_tool_calls(ToolFormat::kGeneric,
                            "{\"tool_calls\": [{\"name\": \"a\", \"arguments\": {\"q\": \"x\"}}]}");
  ASSERT_EQ(r.calls.size(), 1u);
  r = parse_tool_calls(ToolFormat::kGeneric,
                       "{\"tool_call\": {\"name\": \"a\", \"arguments\": {\"q\": \"x\"}}}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(args_of(r.calls[0]), json({{"q", "x"}}));
  r = parse_tool_calls(ToolFormat::kGeneric, "{\"response\": \"Hello there\"}");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "Hello there");
  r = parse_tool_calls(ToolFormat::kGeneric, "[1, 2, 3]");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "[1, 2, 3]");
  // Arguments given as a JSON string are kept as that string.
  r = parse_tool_calls(ToolFormat::kGeneric, R"({"name": "a", "arguments": "{\"q\": 1}"})");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"q": 1})");
}

// Every split of the text into two pieces, and byte by byte: the streamed
// content equals the whole parse's, the same calls come, and no content
// piece ever holds the start of a marker.
void expect_stream_agrees(ToolFormat f, const std::string& text) {
  const ToolCallText whole = parse_tool_calls(f, text);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ToolCallStream s(f);
    std::string content = s.push(text.substr(0, cut));
    content += s.push(text.substr(cut));
    ToolCallText rest = s.finish();
    EXPECT_EQ(content + rest.content, whole.content) << text << " cut at " << cut;
    ASSERT_EQ(rest.calls.size(), whole.calls.size()) << text;
    for (size_t i = 0; i < whole.calls.size(); ++i) {
      EXPECT_EQ(rest.calls[i].arguments, whole.calls[i].arguments);
    }
  }
  ToolCallStream s(f);
  std::string streamed;
  for (char c : text) {
    const std::string piece = s.push(std::string(1, c));
    if (!whole.calls.empty()) {
      EXPECT_EQ(piece.find('<'), std::string::npos) << "marker leaked: " << text;
      EXPECT_EQ(piece.find("[T"), std::string::npos) << "marker leaked: " << text;
    }
    streamed += piece;
  }
  EXPECT_EQ(streamed + s.finish().content, whole.content);
}

TEST(ToolCalls, StreamingAgreesWithTheWholeParse) {
  expect_stream_agrees(ToolFormat::kHermes,
                       "Checking.<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}}"
                       "</tool_call>");
  expect_stream_agrees(ToolFormat::kHermes, "a < b and <tool b");
  expect_stream_agrees(ToolFormat::kMistral, "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}]");
  expect_stream_agrees(ToolFormat::kLlama3, "  {\"name\": \"a\", \"parameters\": {}}");
  expect_stream_agrees(ToolFormat::kLlama3, "plain text {not a call}");
  expect_stream_agrees(ToolFormat::kGeneric,
                       "{\"tool_call\": {\"name\": \"a\", \"arguments\": {}}}");
  expect_stream_agrees(ToolFormat::kGeneric, "words first {\"name\": \"a\"}");
}

TEST(ToolCalls, ContentBeforeAMarkerStreamsAtOnce) {
  ToolCallStream s(ToolFormat::kHermes);
  EXPECT_EQ(s.push("Hello wor"), "Hello wor");
  EXPECT_EQ(s.push("ld <tool"), "ld ");  // "<tool" may begin <tool_call>: held
  EXPECT_EQ(s.push("_call>{\"name\""), "");
  EXPECT_TRUE(s.holding());
  EXPECT_EQ(s.push(": \"f\", \"arguments\": {}}</tool_call>"), "");
  const ToolCallText rest = s.finish();
  EXPECT_EQ(rest.content, "");
  ASSERT_EQ(rest.calls.size(), 1u);
  EXPECT_EQ(rest.calls[0].name, "f");
}

TEST(JsonValueEnd, FindsTheEndOfOneValue) {
  EXPECT_EQ(json_value_end(R"({"a": "}"} tail)", 0), 10u);
  EXPECT_EQ(json_value_end(R"([1, {"b": "\"]"}] x)", 0), 17u);
  EXPECT_EQ(json_value_end(R"({"a": 1)", 0), std::string::npos);
  EXPECT_EQ(json_value_end(R"("abc\"d" x)", 0), 8u);
  EXPECT_EQ(json_value_end("12, 3", 0), 2u);
}

ReasoningText reasoning_whole(bool open, const std::string& text) {
  ReasoningStream s(true, open);
  ReasoningText a = s.push(text);
  ReasoningText b = s.finish();
  return {a.reasoning + b.reasoning, a.content + b.content};
}

TEST(Reasoning, ThinkTagsAreSeparated) {
  auto r = reasoning_whole(false, "<think>\nadd them\n</think>\n\n4");
  EXPECT_EQ(r.reasoning, "\nadd them\n");
  EXPECT_EQ(r.content, "4");
  r = reasoning_whole(true, "add them</think>4");  // the template opened <think>
  EXPECT_EQ(r.reasoning, "add them");
  EXPECT_EQ(r.content, "4");
  r = reasoning_whole(false, "no thinking <think>here</think>");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "no thinking <think>here</think>");
  r = reasoning_whole(true, "never closed");
  EXPECT_EQ(r.reasoning, "never closed");
  EXPECT_EQ(r.content, "");
  r = reasoning_whole(false, "  <thin");  // looked like a tag, was not
  EXPECT_EQ(r.content, "  <thin");

  ReasoningStream none(false, true);  // --reasoning-format none: all content
  EXPECT_EQ(none.push("<think>x</think>y").content, "<think>x</think>y");

  EXPECT_TRUE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_thinking("<think>\n\n</think>\n\n"));
  EXPECT_TRUE(parse_reasoning_format("deepseek", "f").is_ok());
  EXPECT_FALSE(parse_reasoning_format("r1", "--reasoning-format").is_ok());
}

TEST(Reasoning, StreamedByteByByteNeverShowsATag) {
  const std::string text = "<think>step one</think>\n\nThe answer.";
  ReasoningStream s(true, false);
  std::string reasoning, content;
  for (char c : text) {
    ReasoningText d = s.push(std::string(1, c));
    EXPECT_EQ(d.reasoning.find('<'), std::string::npos);
    EXPECT_EQ(d.content.find('<'), std::string::npos);
    reasoning += d.reasoning;
    content += d.content;
  }
  ReasoningText d = s.finish();
  EXPECT_EQ(reasoning + d.reasoning, "step one");
  EXPECT_EQ(content + d.content, "The answer.");
}

TEST(ChatOutput, ReasoningThenCalls) {
  ReplyReading reading;
  reading.extract_reasoning = true;
  reading.thinking_open = true;
  reading.tools = ToolFormat::kHermes;
  ChatOutput out(reading);
  ChatDelta a = out.push("I need the weather.</think>\n\n<tool_call>\n{\"name\": \"w\", ");
  ChatDelta b = out.push("\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  ChatDelta c = out.finish();
  EXPECT_EQ(a.reasoning + b.reasoning + c.reasoning, "I need the weather.");
  EXPECT_EQ(a.content + b.content + c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "w");

  // A forced call: the prompt wrote the opening, the reply is the JSON.
  ReplyReading forced;
  forced.tools = ToolFormat::kHermes;
  forced.tool_prefix = "<tool_call>\n";
  ChatOutput f(forced);
  EXPECT_EQ(f.push("{\"name\": \"w\", \"arguments\": {}}").content, "");
  ChatDelta end = f.finish();
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.content, "");
}

}  // namespace
}  // namespace minfer::serve
