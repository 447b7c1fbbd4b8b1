// Anthropic's Messages API as data (serve/anthropic.h,
// serve/anthropic_content.h) and the reply that reshapes shared errors
// (serve/anthropic_reply.h): what a request body reads into (tools,
// tool_choice, tool_use / tool_result / thinking blocks, thinking), each
// refusal naming its field or block, a prefill continued only where the
// template writes it verbatim, and the content blocks and stream events.
#include "serve/anthropic.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "serve/anthropic_content.h"
#include "serve/anthropic_reply.h"
#include "serve/chat_plan.h"
#include "serve/json_reply.h"

namespace minfer::serve {
namespace {

using nlohmann::json;

Result<MessagesRequest> parse(const std::string& body, bool count_only = false) {
  return parse_messages(json::parse(body), runtime::SamplerParams{}, count_only);
}

TEST(Anthropic, ReadsAMessagesRequest) {
  auto r = parse(R"({
    "model": "claude-x", "max_tokens": 7, "system": [{"type": "text", "text": "be brief"},
                                                     {"type": "text", "text": "and kind"}],
    "messages": [{"role": "user", "content": "hi"},
                 {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
                 {"role": "user", "content": [{"type": "text", "text": "a",
                                               "cache_control": {"type": "ephemeral"}},
                                              {"type": "text", "text": "b"}]}],
    "stop_sequences": ["END", ""], "temperature": 0.5, "top_p": 0.9, "top_k": 3,
    "metadata": {"user_id": "u"}, "stream": true, "tools": [], "some_future_field": 1})");
  ASSERT_TRUE(r.is_ok()) << r.message();
  const CompletionParams& p = r->params;
  EXPECT_EQ(r->model, "claude-x");
  EXPECT_TRUE(p.chat);
  ASSERT_EQ(p.messages.size(), 4u);
  EXPECT_EQ(p.messages[0].role, "system");
  EXPECT_EQ(p.messages[0].content, "be brief\n\nand kind");
  EXPECT_EQ(p.messages[1].content, "hi");
  EXPECT_EQ(p.messages[2].role, "assistant");
  EXPECT_EQ(p.messages[3].content, "a\n\nb");
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 0.9f);
  EXPECT_EQ(p.sampling.top_k, 3);
  EXPECT_EQ(p.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(p.stream);
}

TEST(Anthropic, JoinsConsecutiveTurnsAndDropsAnEmptyPrefill) {
  auto r = parse(R"({"max_tokens": 1, "messages": [
    {"role": "user", "content": "a"}, {"role": "user", "content": "b"},
    {"role": "assistant", "content": ""}]})");
  ASSERT_TRUE(r.is_ok()) << r.message();
  ASSERT_EQ(r->params.messages.size(), 1u);
  EXPECT_EQ(r->params.messages[0].role, "user");
  EXPECT_EQ(r->params.messages[0].content, "a\n\nb");
  EXPECT_TRUE(r->model.empty());  // the reply then names the server's model
}

TEST(Anthropic, CountingNeedsNoMaxTokens) {
  const std::string body = R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})";
  EXPECT_TRUE(parse(body, true).is_ok());
  auto r = parse(body);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("'max_tokens' is required"), std::string::npos) << r.message();
}

TEST(Anthropic, RefusesWrongTypesNamingTheField) {
  const std::string ok_messages = R"("messages": [{"role": "user", "content": "x"}])";
  const std::pair<std::string, const char*> bad[] = {
      {R"({"max_tokens": 0, )" + ok_messages + "}", "'max_tokens'"},
      {R"({"max_tokens": "8", )" + ok_messages + "}", "'max_tokens'"},
      {R"({"max_tokens": 18446744073709551615, )" + ok_messages + "}", "'max_tokens'"},
      {R"({"max_tokens": 8, "model": 3, )" + ok_messages + "}", "'model'"},
      {R"({"max_tokens": 8, "temperature": 1.5, )" + ok_messages + "}", "'temperature'"},
      {R"({"max_tokens": 8, "top_p": -0.1, )" + ok_messages + "}", "'top_p'"},
      {R"({"max_tokens": 8, "top_k": 2.5, )" + ok_messages + "}", "'top_k'"},
      {R"({"max_tokens": 8, "stop_sequences": "END", )" + ok_messages + "}", "'stop_sequences'"},
      {R"({"max_tokens": 8, "stop_sequences": [1], )" + ok_messages + "}", "'stop_sequences'"},
      {R"({"max_tokens": 8, "metadata": "x", )" + ok_messages + "}", "'metadata'"},
      {R"({"max_tokens": 8, "stream": "yes", )" + ok_messages + "}", "'stream'"},
      {R"({"max_tokens": 8, "system": 5, )" + ok_messages + "}", "'system'"},
      {R"({"max_tokens": 8, "messages": []})", "'messages'"},
      {R"({"max_tokens": 8, "messages": "hi"})", "'messages'"},
      {R"({"max_tokens": 8, "messages": [{"role": "system", "content": "x"}]})",
       "'messages[0].role'"},
      {R"({"max_tokens": 8, "messages": [{"role": "user"}]})", "'messages[0].content'"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"text": "x"}]}]})",
       "'messages[0].content[0].type'"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "text"}]}]})",
       "'messages[0].content[0].text'"},
  };
  for (const auto& [body, field] : bad) {
    auto r = parse(body);
    ASSERT_FALSE(r.is_ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(r.message().find(field), std::string::npos) << body << " -> " << r.message();
  }
}

TEST(Anthropic, RefusesBlocksNotSupportedYet) {
  for (const char* type : {"image", "document", "search_result"}) {
    const std::string body =
        R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
          {"type": "text", "text": "look"}, {"type": ")" +
        std::string(type) + R"("}]}]})";
    auto r = parse(body);
    ASSERT_FALSE(r.is_ok()) << type;
    EXPECT_NE(r.message().find("'messages[0].content[1]'"), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(std::string("\"") + type + "\""), std::string::npos) << r.message();
    EXPECT_NE(r.message().find("not supported yet"), std::string::npos) << r.message();
  }
  auto image_system = parse(R"({"max_tokens": 8, "system": [{"type": "image"}],
                                "messages": [{"role": "user", "content": "x"}]})");
  EXPECT_NE(image_system.message().find("'system[0]'"), std::string::npos);
  // A block in the other role's turn.
  for (const char* type : {"tool_use", "thinking", "redacted_thinking"}) {
    auto r = parse(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": ")" +
                   std::string(type) + R"("}]}]})");
    ASSERT_FALSE(r.is_ok()) << type;
    EXPECT_NE(r.message().find("'messages[0].content[0]'"), std::string::npos) << r.message();
  }
  auto result = parse(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"},
    {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]})");
  EXPECT_NE(result.message().find("'messages[1].content[0]'"), std::string::npos);
  auto server_tool = parse(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}],
    "tools": [{"type": "web_search_20250305", "name": "web_search"}]})");
  EXPECT_NE(server_tool.message().find("'tools[0].type'"), std::string::npos);
}

constexpr const char* kWeather = R"({"name": "get_weather", "description": "The weather.",
  "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}})";

Result<MessagesRequest> with_tools(const std::string& extra) {
  return parse(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}],
                   "tools": [)" +
               std::string(kWeather) + R"(, {"name": "get_time", "input_schema":
                   {"type": "object"}, "cache_control": {"type": "ephemeral"}}])" +
               extra + "}");
}

TEST(Anthropic, ReadsToolsInOpenAIsShape) {
  auto r = with_tools("");
  ASSERT_TRUE(r.is_ok()) << r.message();
  const ChatTools& t = r->params.tools;
  ASSERT_EQ(t.tools.size(), 2u);
  EXPECT_EQ(t.tools[0].name, "get_weather");
  EXPECT_EQ(t.tools[0].description, "The weather.");
  EXPECT_EQ(t.tools[0].parameters["required"], nlohmann::ordered_json::array({"city"}));
  EXPECT_EQ(t.choice, ToolChoice::kAuto);
  EXPECT_TRUE(t.parallel);
  // What the template sees: OpenAI's function tools.
  EXPECT_EQ(t.definitions[0]["type"], "function");
  EXPECT_EQ(t.definitions[0]["function"]["name"], "get_weather");
  EXPECT_EQ(t.definitions[0]["function"]["parameters"]["type"], "object");
  EXPECT_FALSE(t.definitions[1]["function"].contains("description"));
}

TEST(Anthropic, MapsToolChoice) {
  const std::pair<const char*, ToolChoice> cases[] = {
      {R"({"type": "auto"})", ToolChoice::kAuto},
      {R"({"type": "any"})", ToolChoice::kRequired},
      {R"({"type": "tool", "name": "get_time"})", ToolChoice::kNamed},
      {R"({"type": "none"})", ToolChoice::kNone},
  };
  for (const auto& [choice, want] : cases) {
    auto r = with_tools(std::string(R"(, "tool_choice": )") + choice);
    ASSERT_TRUE(r.is_ok()) << choice << ": " << r.message();
    EXPECT_EQ(r->params.tools.choice, want) << choice;
  }
  auto named = with_tools(R"(, "tool_choice": {"type": "tool", "name": "get_time",
                                               "disable_parallel_tool_use": true})");
  ASSERT_TRUE(named.is_ok()) << named.message();
  EXPECT_EQ(named->params.tools.named, "get_time");
  EXPECT_FALSE(named->params.tools.parallel);
}

TEST(Anthropic, RefusesMalformedToolsNamingTheField) {
  const std::string x = R"("messages": [{"role": "user", "content": "x"}], "max_tokens": 8)";
  const std::pair<std::string, const char*> bad[] = {
      {R"({"tools": {}, )" + x + "}", "'tools'"},
      {R"({"tools": [3], )" + x + "}", "'tools[0]'"},
      {R"({"tools": [{"input_schema": {"type": "object"}}], )" + x + "}", "'tools[0].name'"},
      {R"({"tools": [{"name": "a b", "input_schema": {"type": "object"}}], )" + x + "}",
       "'tools[0].name'"},
      {R"({"tools": [{"name": "f"}], )" + x + "}", "'tools[0].input_schema'"},
      {R"({"tools": [{"name": "f", "input_schema": {"type": "array"}}], )" + x + "}",
       "'tools[0].input_schema.type'"},
      {R"({"tools": [{"name": "f", "description": 1, "input_schema": {"type": "object"}}], )" + x +
           "}",
       "'tools[0].description'"},
      {R"({"tools": [{"name": "f", "input_schema": {"type": "object"}},
                     {"name": "f", "input_schema": {"type": "object"}}], )" +
           x + "}",
       "'tools[1].name'"},
      {R"({"tool_choice": "auto", )" + x + "}", "'tool_choice'"},
      {R"({"tool_choice": {"type": "some"}, )" + x + "}", "'tool_choice.type'"},
      {R"({"tool_choice": {"type": "any"}, )" + x + "}", "'tool_choice'"},
      {R"({"tools": [{"name": "f", "input_schema": {"type": "object"}}],
           "tool_choice": {"type": "tool", "name": "g"}, )" +
           x + "}",
       "'tool_choice.name'"},
      {R"({"tools": [{"name": "f", "input_schema": {"type": "object"}}],
           "tool_choice": {"type": "tool"}, )" +
           x + "}",
       "'tool_choice.name'"},
      {R"({"tool_choice": {"type": "auto", "disable_parallel_tool_use": 1}, )" + x + "}",
       "'tool_choice.disable_parallel_tool_use'"},
      {R"({"thinking": true, )" + x + "}", "'thinking'"},
      {R"({"thinking": {"type": "on"}, )" + x + "}", "'thinking.type'"},
      {R"({"thinking": {"type": "enabled"}, )" + x + "}", "'thinking.budget_tokens'"},
      {R"({"thinking": {"type": "enabled", "budget_tokens": 100}, )" + x + "}",
       "'thinking.budget_tokens'"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}, {"role": "assistant",
           "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]}]})",
       "'messages[1].content[0].input'"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}, {"role": "assistant",
           "content": [{"type": "tool_use", "name": "f", "input": {}}]}]})",
       "'messages[1].content[0].id'"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
           {"type": "tool_result", "content": "r"}]}]})",
       "'messages[0].content[0].tool_use_id'"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
           {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image"}]}]}]})",
       "'messages[0].content[0].content[0]'"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
           {"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}]}]})",
       "'messages[0].content[0].is_error'"},
  };
  for (const auto& [body, field] : bad) {
    auto r = parse(body);
    ASSERT_FALSE(r.is_ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(r.message().find(field), std::string::npos) << body << " -> " << r.message();
  }
}

TEST(Anthropic, ReadsAToolRoundTrip) {
  auto r = parse(R"({"max_tokens": 8, "messages": [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "ask the tool", "signature": "sig"},
      {"type": "redacted_thinking", "data": "xyz"},
      {"type": "text", "text": "Let me look."},
      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 degrees"},
      {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
       "content": [{"type": "text", "text": "no such"}, {"type": "text", "text": "call"}]},
      {"type": "text", "text": "thanks"}]}]})");
  ASSERT_TRUE(r.is_ok()) << r.message();
  const auto& m = r->params.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[1].role, "assistant");
  EXPECT_EQ(m[1].content, "Let me look.");
  EXPECT_EQ(m[1].reasoning_content, "ask the tool");
  ASSERT_EQ(m[1].tool_calls.size(), 1u);
  EXPECT_EQ(m[1].tool_calls[0].id, "toolu_1");
  EXPECT_EQ(m[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(m[1].tool_calls[0].arguments), json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(m[2].role, "tool");
  EXPECT_EQ(m[2].tool_call_id, "toolu_1");
  EXPECT_EQ(m[2].name, "get_weather");  // looked up from the call
  EXPECT_EQ(m[2].content, "18 degrees");
  EXPECT_EQ(m[3].content, "Error: no such\n\ncall");
  EXPECT_TRUE(m[3].name.empty());
  EXPECT_EQ(m[4].role, "user");
  EXPECT_EQ(m[4].content, "thanks");
  EXPECT_FALSE(r->params.continue_final);
  // A turn of calls alone has null content; a prefill may not hold calls.
  auto calls_only = parse(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]})");
  ASSERT_TRUE(calls_only.is_ok()) << calls_only.message();
  EXPECT_TRUE(calls_only->params.messages[1].null_content);
  auto prefill_call = parse(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]})");
  EXPECT_NE(prefill_call.message().find("tool_use"), std::string::npos);
}

TEST(Anthropic, ReadsThinking) {
  const std::string x = R"("messages": [{"role": "user", "content": "x"}], "max_tokens": 4096)";
  EXPECT_FALSE(parse("{" + x + "}")->params.enable_thinking.has_value());
  EXPECT_EQ(parse(R"({"thinking": {"type": "enabled", "budget_tokens": 2048}, )" + x + "}")
                ->params.enable_thinking,
            std::optional<bool>(true));
  EXPECT_EQ(parse(R"({"thinking": {"type": "disabled"}, )" + x + "}")->params.enable_thinking,
            std::optional<bool>(false));
  EXPECT_EQ(parse(R"({"thinking": {"type": "adaptive"}, )" + x + "}")->params.enable_thinking,
            std::optional<bool>(true));
}

runtime::ChatFormatter formatter(const std::string& content_expr) {
  auto f = runtime::ChatFormatter::from_template(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n" + content_expr +
          "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
          "{% endif %}",
      "", "");
  EXPECT_TRUE(f.is_ok()) << f.message();
  return std::move(*f);
}

// The prompt plan_chat() writes for a conversation read from a body.
Result<std::string> prompt_of(const runtime::ChatFormatter& f, const std::string& body) {
  MINFER_ASSIGN_OR_RETURN(MessagesRequest r, parse(body));
  MINFER_RETURN_IF_ERROR(plan_chat(f, ChatOptions{}, r.params).status());
  return r.params.prompt;
}

std::string turns(const std::string& prefill) {
  return R"({"max_tokens": 8, "messages": [{"role": "user", "content": "Count"},
            {"role": "assistant", "content": )" +
         json(prefill).dump() + "}]}";
}

TEST(Anthropic, APrefillIsContinued) {
  const auto f = formatter("{{ m.content }}");
  auto text = prompt_of(f, turns("1, 2,"));
  ASSERT_TRUE(text.is_ok()) << text.message();
  EXPECT_EQ(*text, "<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n1, 2,");
  // Without a prefill: the template's own rendering, opening the reply.
  auto plain =
      prompt_of(f, R"({"max_tokens": 8, "messages": [{"role": "user", "content": "Count"}]})");
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(*plain, "<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n");
}

TEST(Anthropic, RefusesAPrefillTheTemplateRewrites) {
  // A template that trims turns would show the model "x" for " x".
  const auto trims = formatter("{{ m.content | trim }}");
  auto r = prompt_of(trims, turns(" 1,"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("prefill"), std::string::npos) << r.message();
  EXPECT_TRUE(prompt_of(trims, turns("1,")).is_ok());
  auto ws = prompt_of(formatter("{{ m.content }}"), turns("b "));
  ASSERT_FALSE(ws.is_ok());
  EXPECT_NE(ws.message().find("whitespace"), std::string::npos) << ws.message();
}

TEST(Anthropic, ToolsAndThinkingReachTheTemplate) {
  const auto f = formatter(
      "{{ m.content }}{% for c in m.tool_calls or [] %}[{{ c.function.name }} {{ "
      "c.function.arguments.city }}]"
      "{% endfor %}{% if m.reasoning_content %}({{ m.reasoning_content }}){% endif %}"
      "{% if loop.last %}{% for t in tools or [] %}<{{ t.function.name }}>{% endfor %}"
      "think={{ enable_thinking }}{% endif %}");
  auto p = prompt_of(f, R"({"max_tokens": 8, "thinking": {"type": "disabled"},
    "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
    "messages": [{"role": "user", "content": "w?"}, {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "hm", "signature": ""},
      {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "3C"}]}]})");
  ASSERT_TRUE(p.is_ok()) << p.message();
  EXPECT_NE(p->find("[get_weather Oslo](hm)"), std::string::npos) << *p;
  EXPECT_NE(p->find("<|im_start|>tool\n3C<get_weather>think=False"), std::string::npos) << *p;
  // A forced tool cannot continue a prefill.
  auto forced = prompt_of(f, R"({"max_tokens": 8, "tool_choice": {"type": "any"},
    "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
    "messages": [{"role": "user", "content": "w?"}, {"role": "assistant", "content": "Sure"}]})");
  EXPECT_NE(forced.message().find("prefill"), std::string::npos) << forced.message();
}

TEST(Anthropic, StopReasons) {
  EXPECT_STREQ(stop_reason("stop", "", false), "end_turn");
  EXPECT_STREQ(stop_reason("length", "", false), "max_tokens");
  EXPECT_STREQ(stop_reason("stop", "END", false), "stop_sequence");
  EXPECT_STREQ(stop_reason("stop", "", true), "tool_use");
  EXPECT_STREQ(stop_reason("length", "", true), "tool_use");
}

TEST(Anthropic, MessageBody) {
  MessageReply m;
  m.id = "msg_1";
  m.model = "m";
  m.text = "hi";
  m.stop_reason = "stop_sequence";
  m.stop_sequence = "END";
  m.input_tokens = 5;
  m.output_tokens = 2;
  const json j = message_json(m);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["content"], json::parse(R"([{"type": "text", "text": "hi"}])"));
  EXPECT_EQ(j["stop_sequence"], "END");
  EXPECT_EQ(j["usage"], json::parse(R"({"input_tokens": 5, "output_tokens": 2})"));
  m.stop_reason.clear();
  m.stop_sequence.clear();
  EXPECT_TRUE(message_json(m)["stop_reason"].is_null());
  EXPECT_TRUE(message_json(m)["stop_sequence"].is_null());
  m.text.clear();  // nothing at all: one empty text block
  EXPECT_EQ(message_json(m)["content"], json::parse(R"([{"type": "text", "text": ""}])"));
}

TEST(Anthropic, MessageBodyWithThinkingAndToolUse) {
  MessageReply m;
  m.thinking = "hmm";
  m.calls.push_back({new_tool_use_id(), "get_weather", R"({"city": "Paris"})"});
  const json content = message_json(m)["content"];
  ASSERT_EQ(content.size(), 2u);  // no empty text block beside other blocks
  EXPECT_EQ(content[0], json::parse(R"({"type": "thinking", "thinking": "hmm", "signature": ""})"));
  EXPECT_EQ(content[1]["type"], "tool_use");
  EXPECT_EQ(content[1]["name"], "get_weather");
  EXPECT_EQ(content[1]["input"], json::parse(R"({"city": "Paris"})"));
  const std::string id = content[1]["id"];
  EXPECT_EQ(id.rfind("toolu_", 0), 0u);
  EXPECT_EQ(id.size(), 30u);
  EXPECT_NE(new_tool_use_id(), new_tool_use_id());
}

// The events of a stream, as (event name, data) pairs.
std::vector<std::pair<std::string, json>> events_of(const std::string& sse) {
  std::vector<std::pair<std::string, json>> out;
  size_t at = 0;
  while (at < sse.size()) {
    const size_t end = sse.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << sse.substr(at);
    if (end == std::string::npos) break;
    const std::string event = sse.substr(at, end - at);
    const size_t nl = event.find('\n');
    EXPECT_EQ(event.rfind("event: ", 0), 0u) << event;
    EXPECT_EQ(event.compare(nl + 1, 6, "data: "), 0) << event;
    out.emplace_back(event.substr(7, nl - 7), json::parse(event.substr(nl + 7)));
    at = end + 2;
  }
  return out;
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, json>>& events) {
  std::vector<std::string> names;
  for (const auto& [name, data] : events) {
    names.push_back(name);
    EXPECT_EQ(data["type"], name);
  }
  return names;
}

TEST(Anthropic, StreamEvents) {
  MessageReply m;
  m.id = "msg_1";
  m.model = "m";
  m.input_tokens = 5;
  ContentBlockEvents blocks;
  std::string sse = stream_opening(m) + blocks.push({"", "He", {}}) + blocks.push({"", "llo", {}});
  sse += blocks.finish({});
  m.stop_reason = "end_turn";
  m.output_tokens = 2;
  sse += stream_closing(m);
  const auto events = events_of(sse);
  EXPECT_EQ(names_of(events),
            (std::vector<std::string>{"message_start", "ping", "content_block_start",
                                      "content_block_delta", "content_block_delta",
                                      "content_block_stop", "message_delta", "message_stop"}));
  const json& start = events[0].second["message"];
  EXPECT_EQ(start["content"], json::array());
  EXPECT_EQ(start["usage"]["input_tokens"], 5);
  EXPECT_TRUE(start["stop_reason"].is_null());
  EXPECT_EQ(events[2].second["content_block"], json::parse(R"({"type": "text", "text": ""})"));
  EXPECT_EQ(events[4].second["delta"], json::parse(R"({"type": "text_delta", "text": "llo"})"));
  EXPECT_EQ(events[6].second["delta"]["stop_reason"], "end_turn");
  EXPECT_TRUE(events[6].second["delta"]["stop_sequence"].is_null());
  EXPECT_EQ(events[6].second["usage"]["output_tokens"], 2);
}

TEST(Anthropic, StreamsThinkingTextAndToolUseBlocksInOrder) {
  ContentBlockEvents blocks;
  std::string sse = blocks.push({"let me", "", {}}) + blocks.push({" see", "Sure.", {}});
  sse += blocks.finish(
      {{"toolu_1", "get_weather", R"({"city": "Paris"})"}, {"toolu_2", "get_time", "{}"}});
  const auto e = events_of(sse);
  EXPECT_EQ(names_of(e),
            (std::vector<std::string>{
                "content_block_start", "content_block_delta", "content_block_delta",
                "content_block_delta", "content_block_stop",                         // thinking
                "content_block_start", "content_block_delta", "content_block_stop",  // text
                "content_block_start", "content_block_delta", "content_block_stop",  // call 1
                "content_block_start", "content_block_delta", "content_block_stop"}));
  EXPECT_EQ(e[0].second["content_block"],
            json::parse(R"({"type": "thinking", "thinking": "", "signature": ""})"));
  EXPECT_EQ(e[2].second["delta"], json::parse(R"({"type": "thinking_delta", "thinking": " see"})"));
  EXPECT_EQ(e[3].second["delta"], json::parse(R"({"type": "signature_delta", "signature": ""})"));
  EXPECT_EQ(e[5].second["index"], 1);
  EXPECT_EQ(e[6].second["delta"], json::parse(R"({"type": "text_delta", "text": "Sure."})"));
  EXPECT_EQ(e[8].second["index"], 2);
  EXPECT_EQ(e[8].second["content_block"], json::parse(R"({"type": "tool_use", "id": "toolu_1",
    "name": "get_weather", "input": {}})"));
  EXPECT_EQ(e[9].second["delta"], json::parse(R"({"type": "input_json_delta",
    "partial_json": "{\"city\": \"Paris\"}"})"));
  EXPECT_EQ(e[13].second["index"], 3);
  // A reply of calls alone opens no text block.
  ContentBlockEvents calls_only;
  EXPECT_EQ(events_of(calls_only.finish({{"toolu_1", "f", "{}"}}))[0].second["index"], 0);
}

TEST(Anthropic, ErrorShapes) {
  const auto e = events_of(error_event(Status::unavailable("busy")));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].first, "error");
  EXPECT_EQ(e[0].second, json::parse(R"({"type": "error", "error": {
    "type": "overloaded_error", "message": "busy"}})"));
  EXPECT_STREQ(anthropic_error_type(400), "invalid_request_error");
  EXPECT_STREQ(anthropic_error_type(401), "authentication_error");
  EXPECT_STREQ(anthropic_error_type(404), "not_found_error");
  EXPECT_STREQ(anthropic_error_type(500), "api_error");
}

// Records what a handler answers.
class FakeReply : public HttpReply {
 public:
  void add_header(std::string name, std::string value) override {
    headers.emplace_back(std::move(name), std::move(value));
  }
  void send(int s, std::string_view, std::string b) override {
    status = s;
    body = std::move(b);
  }
  bool begin_stream(std::string_view) override { return true; }
  bool write(std::string_view) override { return true; }
  void end() override {}
  bool client_gone() const override { return false; }
  bool answered() const override { return status != 0; }
  int status = 0;
  std::string body;
  HttpHeaders headers;
};

TEST(Anthropic, ErrorReplyReshapesSharedErrors) {
  FakeReply inner;
  AnthropicErrorReply reply(inner);
  reply.add_header("Retry-After", "1");
  reply.send(401, "application/json", error_json(401, "invalid or missing API key"));
  EXPECT_EQ(inner.status, 401);
  EXPECT_EQ(json::parse(inner.body), json::parse(R"({"type": "error", "error": {
    "type": "authentication_error", "message": "invalid or missing API key"}})"));
  ASSERT_EQ(inner.headers.size(), 1u);
  FakeReply ok;
  AnthropicErrorReply pass(ok);
  pass.send(200, "application/json", "{}");
  EXPECT_EQ(ok.body, "{}");
  EXPECT_TRUE(is_anthropic_path("/v1/messages"));
  EXPECT_TRUE(is_anthropic_path("/v1/messages/count_tokens"));
  EXPECT_FALSE(is_anthropic_path("/v1/messagesx"));
  EXPECT_FALSE(is_anthropic_path("/v1/chat/completions"));
}

}  // namespace
}  // namespace minfer::serve
