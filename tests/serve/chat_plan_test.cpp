// A chat request's tools, thinking and template arguments (serve/tool_request.h,
// serve/chat_plan.h): what is read, what is refused naming the field, what
// the template is given, the Hermes fallback for templates without tools,
// and the constraint of a forced call per family: a grammar built from it
// accepts the family's call and nothing else.
#include "serve/chat_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "grammar/json_grammar.h"

namespace minfer::serve {
namespace {

using nlohmann::json;

constexpr const char* kTools = R"("tools": [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                   "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "now"}}])";

Result<CompletionParams> parse(const std::string& extra) {
  const std::string body = R"({"messages": [{"role": "user", "content": "Weather in Paris?"}])" +
                           (extra.empty() ? "" : ", " + extra) + "}";
  auto p = parse_completion(json::parse(body), true, runtime::SamplerParams{});
  if (p) order_tools(p->tools, body);
  return p;
}

std::string template_file(const std::string& name) {
  std::ifstream f(std::string(MINFER_TEST_DATA_DIR) + "/../template/golden/templates/" + name);
  EXPECT_TRUE(f) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

runtime::ChatFormatter formatter(const std::string& source) {
  auto f = runtime::ChatFormatter::from_template(source, "", "<|im_end|>");
  EXPECT_TRUE(f.is_ok()) << f.message();
  return std::move(*f);
}

TEST(ToolRequest, ReadsToolsChoiceAndMessages) {
  auto p = parse(std::string(kTools) +
                 R"(, "tool_choice": {"type": "function", "function": {"name": "now"}},
                    "parallel_tool_calls": false)");
  ASSERT_TRUE(p.is_ok()) << p.message();
  ASSERT_EQ(p->tools.tools.size(), 2u);
  EXPECT_EQ(p->tools.choice, ToolChoice::kNamed);
  EXPECT_EQ(p->tools.named, "now");
  EXPECT_FALSE(p->tools.parallel);
  EXPECT_EQ(p->tools.tools[1].parameters,
            nlohmann::ordered_json::parse(R"({"type": "object", "properties": {}})"));
  // The schema keeps the request's key order.
  EXPECT_EQ(p->tools.tools[0].parameters["properties"].begin().key(), "city");

  const json body = json::parse(R"({"messages": [
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": null, "reasoning_content": "hmm", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
      {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "42"}]})");
  auto m = parse_completion(body, true, runtime::SamplerParams{});
  ASSERT_TRUE(m.is_ok()) << m.message();
  EXPECT_TRUE(m->messages[1].null_content);
  ASSERT_EQ(m->messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(m->messages[1].tool_calls[0].arguments, R"({"a": 1})");
  EXPECT_TRUE(m->messages[1].tool_calls[0].arguments_value.is_dict());
  EXPECT_EQ(m->messages[1].reasoning_content, "hmm");
  EXPECT_EQ(m->messages[2].tool_call_id, "c1");
  EXPECT_EQ(m->tools.choice, ToolChoice::kNone);
}

TEST(ToolRequest, RefusesMalformedDefinitionsNamingTheField) {
  const std::pair<std::string, const char*> bad[] = {
      {R"("tools": {})", "'tools'"},
      {R"("tools": [{"type": "retrieval"}])", "tools[0].type"},
      {R"("tools": [{"type": "function"}])", "tools[0].function"},
      {R"("tools": [{"type": "function", "function": {}}])", "tools[0].function.name"},
      {R"("tools": [{"type": "function", "function": {"name": "a b"}}])", "function.name"},
      {R"("tools": [{"type": "function", "function": {"name": "f", "description": 1}}])",
       "description"},
      {R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])",
       "tools[0].function.parameters"},
      {R"("tools": [{"type": "function", "function": {"name": "f",
           "parameters": {"type": "string"}}}])",
       "parameters.type"},
      {R"("tools": [{"type": "function", "function": {"name": "f"}},
                    {"type": "function", "function": {"name": "f"}}])",
       "tools[1].function.name"},
      {std::string(kTools) + R"(, "tool_choice": "always")", "'tool_choice'"},
      {std::string(kTools) + R"(, "tool_choice": {"type": "function", "function": {"name": "x"}})",
       "tool_choice.function.name"},
      {R"("tool_choice": "required")", "needs 'tools'"},
      {std::string(kTools) + R"(, "parallel_tool_calls": "yes")", "parallel_tool_calls"},
      {std::string(kTools) +
           R"(, "tool_choice": "required", "response_format": {"type": "json_object"})",
       "response_format"},
      {R"("chat_template_kwargs": [1])", "chat_template_kwargs"},
      {R"("reasoning_effort": 3)", "reasoning_effort"},
      {R"("reasoning_format": "r1")", "reasoning_format"},
  };
  for (const auto& [extra, needle] : bad) {
    auto p = parse(extra);
    ASSERT_FALSE(p.is_ok()) << extra;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.message().find(needle), std::string::npos) << extra << " -> " << p.message();
  }
  const std::pair<const char*, const char*> bad_messages[] = {
      {R"([{"role": "assistant", "tool_calls": {}}])", "messages[0].tool_calls"},
      {R"([{"role": "assistant", "tool_calls": [{"function": {"name": 1}}]}])",
       "messages[0].tool_calls[0].function.name"},
      {R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 1}}]}])",
       "arguments"},
      {R"([{"role": "tool", "tool_call_id": 5, "content": "x"}])", "tool_call_id"},
  };
  for (const auto& [messages, needle] : bad_messages) {
    auto p = parse_completion(json::parse(std::string(R"({"messages": )") + messages + "}"), true,
                              runtime::SamplerParams{});
    ASSERT_FALSE(p.is_ok()) << messages;
    EXPECT_NE(p.message().find(needle), std::string::npos) << p.message();
  }
}

TEST(ChatPlan, PassesToolsAndThinkingToTheTemplate) {
  const runtime::ChatFormatter f = formatter(template_file("qwen3_tools.jinja"));
  auto p = parse(kTools);
  ASSERT_TRUE(p.is_ok());
  auto reading = plan_chat(f, ChatOptions{}, *p);
  ASSERT_TRUE(reading.is_ok()) << reading.message();
  EXPECT_TRUE(p->chat_prompt_rendered);
  EXPECT_NE(p->prompt.find("\"name\": \"get_weather\""), std::string::npos) << p->prompt;
  EXPECT_EQ(reading->tools, ToolFormat::kHermes);
  EXPECT_TRUE(reading->extract_reasoning);
  EXPECT_FALSE(reading->thinking_open);
  EXPECT_EQ(p->format, CompletionParams::Format::kText);

  // --reasoning-budget 0 and chat_template_kwargs both turn thinking off.
  auto off = parse(R"("chat_template_kwargs": {"enable_thinking": false})");
  ASSERT_TRUE(plan_chat(f, ChatOptions{}, *off).is_ok());
  EXPECT_TRUE(off->prompt.ends_with("<think>\n\n</think>\n\n")) << off->prompt;
  auto budget = parse("");
  ASSERT_TRUE(plan_chat(f, ChatOptions{ReasoningFormat::kAuto, 0}, *budget).is_ok());
  EXPECT_TRUE(budget->prompt.ends_with("</think>\n\n"));

  // tool_choice none: the template sees no tools, the reply no calls.
  auto none = parse(std::string(kTools) + R"(, "tool_choice": "none")");
  auto r = plan_chat(f, ChatOptions{}, *none);
  EXPECT_EQ(none->prompt.find("get_weather"), std::string::npos);
  EXPECT_FALSE(r->tools.has_value());
}

TEST(ChatPlan, OpenThinkingIsSeen) {
  const runtime::ChatFormatter f = formatter(
      "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant: <think>\n");
  auto p = parse("");
  auto r = plan_chat(f, ChatOptions{}, *p);
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->thinking_open);
  auto none = parse(R"("reasoning_format": "none")");
  r = plan_chat(f, ChatOptions{}, *none);
  EXPECT_FALSE(r->extract_reasoning);
}

TEST(ChatPlan, ThinkingOffThroughKwargsClosesABlockTheTemplateOpened) {
  // A template that opens thinking whatever it is told (DeepSeek-R1's
  // distills): enable_thinking false in chat_template_kwargs closes it, as
  // --reasoning-budget 0 does.
  const runtime::ChatFormatter f =
      formatter("{% for m in messages %}{{ m.content }}{% endfor %}<A><think>\n");
  auto off = parse(R"("chat_template_kwargs": {"enable_thinking": false})");
  auto r = plan_chat(f, ChatOptions{}, *off);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_TRUE(off->prompt.ends_with("<think>\n</think>\n\n")) << off->prompt;
  EXPECT_FALSE(r->thinking_open);
  auto on = parse(R"("chat_template_kwargs": {"enable_thinking": true})");
  r = plan_chat(f, ChatOptions{}, *on);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_TRUE(on->prompt.ends_with("<think>\n")) << on->prompt;
  EXPECT_TRUE(r->thinking_open);
}

// A turn of calls only comes with content null. A template that calls a
// string method on it (Qwen3's `'</think>' in message.content`, QwQ's
// split) fails on none: it is rendered again with "" there; one that can
// tell none apart keeps it.
TEST(ChatPlan, NullContentIsRetriedAsEmptyWhereTheTemplateNeedsAString) {
  const std::string body = R"({"messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]})";
  const auto plan = [&](const char* source) {
    auto p = parse_completion(json::parse(body), true, runtime::SamplerParams{});
    EXPECT_TRUE(p.is_ok()) << p.message();
    // It reads tools: the calls reach it as they are, not as Hermes text.
    auto r =
        plan_chat(formatter(std::string("{% if tools %}T{% endif %}") + source), ChatOptions{}, *p);
    return r.is_ok() ? p->prompt : "error: " + r.message();
  };
  EXPECT_EQ(plan("{% for m in messages %}[{{ m.content.strip() }}]{% endfor %}"), "[Weather?][]");
  EXPECT_EQ(plan("{% for m in messages %}[{{ 'x' in m.content }}]{% endfor %}"), "[False][False]");
  EXPECT_EQ(plan("{% for m in messages %}[{{ m.content is none }}]{% endfor %}"), "[False][True]");
  // A template that fails either way reports its error.
  EXPECT_TRUE(plan("{{ raise_exception('no') }}").starts_with("error: "));
}

// Mistral's templates demand 9-letter-and-digit call ids: OpenAI's and
// Anthropic's ids are mapped, the same for a call and its result, and the
// same in every request.
TEST(ChatPlan, MistralGetsNineCharacterCallIds) {
  const runtime::ChatFormatter f = formatter(template_file("mistral.jinja"));
  const std::string body = std::string(R"({"messages": [
      {"role": "user", "content": "Weather in Paris and Rome?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_AbCdEfGhIjKlMnOpQrStUvWx", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "toolu_01A09q90qw90lq917835lq9", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}},
        {"id": "Kept12345", "type": "function",
         "function": {"name": "now", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "call_AbCdEfGhIjKlMnOpQrStUvWx", "content": "18 C"},
      {"role": "tool", "tool_call_id": "toolu_01A09q90qw90lq917835lq9", "content": "24 C"},
      {"role": "tool", "tool_call_id": "Kept12345", "content": "noon"}], )") +
                           kTools + "}";
  const auto plan = [&] {
    auto p = parse_completion(json::parse(body), true, runtime::SamplerParams{});
    EXPECT_TRUE(p.is_ok()) << p.message();
    order_tools(p->tools, body);
    auto r = plan_chat(f, ChatOptions{}, *p);
    EXPECT_TRUE(r.is_ok()) << r.message();  // the template raises on other ids
    return p->prompt;
  };
  const std::string prompt = plan();
  EXPECT_EQ(prompt.find("call_AbC"), std::string::npos) << prompt;
  EXPECT_EQ(prompt.find("toolu_"), std::string::npos) << prompt;
  // Each call's id is its result's call_id.
  std::vector<std::string> ids, results;
  for (size_t at = prompt.find("\"id\": \""); at != std::string::npos;
       at = prompt.find("\"id\": \"", at + 1)) {
    ids.push_back(prompt.substr(at + 7, 9));
  }
  for (size_t at = prompt.find("\"call_id\": \""); at != std::string::npos;
       at = prompt.find("\"call_id\": \"", at + 1)) {
    results.push_back(prompt.substr(at + 12, 9));
  }
  ASSERT_EQ(ids.size(), 3u) << prompt;
  EXPECT_EQ(ids, results);
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_EQ(ids[2], "Kept12345");
  for (const std::string& id : ids) {
    EXPECT_TRUE(std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(c); })) << id;
  }
  EXPECT_EQ(plan(), prompt);  // the same ids in the next request
}

TEST(ChatPlan, TemplatesWithoutToolsGetTheHermesFallback) {
  const runtime::ChatFormatter f =
      formatter("{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}");
  const std::string text_body = std::string(R"({"messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                      "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
      {"role": "tool", "tool_call_id": "c2", "content": "sunny"}], )") +
                                kTools + "}";
  auto p = parse_completion(json::parse(text_body), true, runtime::SamplerParams{});
  ASSERT_TRUE(p.is_ok()) << p.message();
  order_tools(p->tools, text_body);
  auto r = plan_chat(f, ChatOptions{}, *p);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->tools, ToolFormat::kHermes);
  const std::string& text = p->prompt;
  EXPECT_TRUE(text.starts_with("<system># Tools")) << text;
  EXPECT_NE(text.find("<tools>\n{\"type\":\"function\""), std::string::npos) << text;
  EXPECT_NE(text.find("<assistant><tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":"
                      "\"Paris\"}}\n</tool_call></assistant>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("<user><tool_response>\n18 C\n</tool_response>\n<tool_response>\nsunny\n"
                      "</tool_response></user>"),
            std::string::npos)
      << text;
}

// The forced call's schema compiles, and its prefix and schema are the family's.
TEST(ChatPlan, ForcedCallsAreConstrainedPerFamily) {
  struct Case {
    std::string source;
    const char* prefix;
    const char* args_key;
  };
  const Case cases[] = {
      {template_file("qwen3_tools.jinja"), "<tool_call>\n", "arguments"},
      {template_file("llama3.jinja"), "", "parameters"},
      {template_file("mistral.jinja"), "[TOOL_CALLS]", "arguments"},
      {"{{ tools | tojson }}{% for m in messages %}{{ m.content }}{% endfor %}", "", "arguments"},
      {"{% for m in messages %}{{ m.content }}{% endfor %}", "<tool_call>\n", "arguments"},
  };
  for (const Case& c : cases) {
    const runtime::ChatFormatter f = formatter(c.source);
    auto p = parse(std::string(kTools) +
                   R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
    ASSERT_TRUE(p.is_ok()) << p.message();
    auto r = plan_chat(f, ChatOptions{}, *p);
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(r->tool_prefix, c.prefix);
    EXPECT_TRUE(p->prompt.ends_with(c.prefix));
    EXPECT_EQ(p->format, CompletionParams::Format::kJsonSchema);
    const std::string schema = p->schema.dump();
    EXPECT_NE(schema.find(std::string("\"") + c.args_key + "\""), std::string::npos) << schema;
    EXPECT_NE(schema.find("{\"const\":\"get_weather\"}"), std::string::npos) << schema;
    EXPECT_EQ(schema.find("now"), std::string::npos) << schema;  // the named one only
    EXPECT_TRUE(grammar::JsonGrammar::from_schema(p->schema).is_ok()) << schema;
  }
  // required: any of the tools.
  const runtime::ChatFormatter f = formatter(template_file("qwen3_tools.jinja"));
  auto p = parse(std::string(kTools) + R"(, "tool_choice": "required")");
  ASSERT_TRUE(plan_chat(f, ChatOptions{}, *p).is_ok());
  EXPECT_NE(p->schema.dump().find("anyOf"), std::string::npos);
  EXPECT_TRUE(p->prompt.ends_with("</think>\n\n<tool_call>\n")) << p->prompt;
}

}  // namespace
}  // namespace minfer::serve
