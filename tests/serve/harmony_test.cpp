// OpenAI's harmony format (serve/harmony.h): detection from the template's
// text, the reply read whole and streamed (split at every byte, the pieces
// agreeing with the whole), channels, tool calls, malformed text as content,
// and how plan_chat (serve/chat_plan.h) prompts and constrains a forced call.
#include "serve/harmony.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "grammar/json_grammar.h"
#include "serve/chat_output.h"
#include "serve/chat_plan.h"

namespace minfer::serve {
namespace {

using nlohmann::json;

std::string template_file(const std::string& name) {
  std::ifstream f(std::string(MINFER_TEST_DATA_DIR) + "/../template/golden/templates/" + name);
  EXPECT_TRUE(f) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The reply as the prompt's "<|start|>assistant" leaves it to the model.
constexpr std::string_view kThinkThenAnswer =
    "<|channel|>analysis<|message|>The user greets. Reply.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hello! <|Not a marker|> ok";

constexpr std::string_view kThinkThenCall =
    "<|channel|>analysis<|message|>Need weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    "<|message|>{\"city\": \"Paris\"}";

// The text pushed as two pieces at every split point, and byte by byte:
// each reading agrees with the whole one.
void expect_streams_agree(std::string_view text, bool extract = true) {
  const HarmonyText whole = parse_harmony(text, extract);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    HarmonyStream s(extract);
    HarmonyText a = s.push(text.substr(0, cut));
    const HarmonyText b = s.push(text.substr(cut));
    HarmonyText c = s.finish();
    EXPECT_EQ(a.reasoning + b.reasoning + c.reasoning, whole.reasoning) << "cut " << cut;
    EXPECT_EQ(a.content + b.content + c.content, whole.content) << "cut " << cut;
    ASSERT_EQ(c.calls.size(), whole.calls.size()) << "cut " << cut;
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(c.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(c.calls[i].arguments, whole.calls[i].arguments);
    }
  }
  HarmonyStream s(extract);
  std::string reasoning, content;
  for (char ch : text) {
    HarmonyText d = s.push(std::string_view(&ch, 1));
    reasoning += d.reasoning;
    content += d.content;
    // A marker is never sent in part.
    EXPECT_EQ(content.find("<|end"), std::string::npos) << content;
  }
  HarmonyText rest = s.finish();
  EXPECT_EQ(reasoning + rest.reasoning, whole.reasoning);
  EXPECT_EQ(content + rest.content, whole.content);
}

TEST(Harmony, DetectedFromTheTemplateText) {
  const std::string harmony = template_file("harmony.jinja");
  EXPECT_TRUE(is_harmony_template(harmony));
  EXPECT_EQ(detect_tool_format(harmony), ToolFormat::kHarmony);
  EXPECT_STREQ(tool_format_name(ToolFormat::kHarmony), "harmony");
  for (const char* other :
       {"qwen3_tools.jinja", "llama3.jinja", "mistral.jinja", "chatml.jinja", "phi3.jinja"}) {
    EXPECT_FALSE(is_harmony_template(template_file(other))) << other;
    EXPECT_NE(detect_tool_format(template_file(other)), ToolFormat::kHarmony) << other;
  }
}

TEST(Harmony, AnalysisIsReasoningAndFinalIsContent) {
  const HarmonyText t = parse_harmony(kThinkThenAnswer);
  EXPECT_EQ(t.reasoning, "The user greets. Reply.");
  EXPECT_EQ(t.content, "Hello! <|Not a marker|> ok");
  EXPECT_TRUE(t.calls.empty());
  expect_streams_agree(kThinkThenAnswer);
  // The end markers, when a reader renders them, end messages too.
  const HarmonyText ended = parse_harmony(std::string(kThinkThenAnswer) + "<|return|>");
  EXPECT_EQ(ended.content, "Hello! <|Not a marker|> ok");
}

TEST(Harmony, AnalysisStaysContentWithoutExtraction) {
  const HarmonyText t = parse_harmony(kThinkThenAnswer, /*extract_reasoning=*/false);
  EXPECT_EQ(t.reasoning, "");
  EXPECT_EQ(t.content, "The user greets. Reply.Hello! <|Not a marker|> ok");
  expect_streams_agree(kThinkThenAnswer, false);
}

TEST(Harmony, CommentaryToAFunctionIsACall) {
  const HarmonyText t = parse_harmony(kThinkThenCall);
  EXPECT_EQ(t.reasoning, "Need weather.");
  EXPECT_EQ(t.content, "");
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(t.calls[0].arguments), json::parse(R"({"city": "Paris"})"));
  EXPECT_TRUE(t.calls[0].id.starts_with("call_"));
  expect_streams_agree(kThinkThenCall);
  // The recipient after the role, "json" without <|constrain|>, and <|call|>.
  const HarmonyText role =
      parse_harmony(" to=functions.now<|channel|>commentary json<|message|>{}<|call|>");
  ASSERT_EQ(role.calls.size(), 1u);
  EXPECT_EQ(role.calls[0].name, "now");
  EXPECT_EQ(role.calls[0].arguments, "{}");
}

TEST(Harmony, PreamblesAndSeveralCalls) {
  const std::string text =
      "<|channel|>commentary<|message|>Checking both.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\": \"Paris\"}<|call|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\": \"Rome\"}<|call|>";
  const HarmonyText t = parse_harmony(text);
  EXPECT_EQ(t.content, "Checking both.");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(json::parse(t.calls[1].arguments)["city"], "Rome");
  EXPECT_NE(t.calls[0].id, t.calls[1].id);
  expect_streams_agree(text);
  EXPECT_EQ(parse_harmony(text, true, /*parallel=*/false).calls.size(), 1u);
  // A json commentary message without a recipient naming the function
  // (a forced choice among several).
  const HarmonyText named = parse_harmony(
      "<|channel|>commentary <|constrain|>json<|message|>"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}");
  ASSERT_EQ(named.calls.size(), 1u);
  EXPECT_EQ(named.calls[0].name, "get_weather");
}

TEST(Harmony, MalformedTextIsContent) {
  // No harmony at all: the text as it came.
  EXPECT_EQ(parse_harmony("Just text, no channels.").content, "Just text, no channels.");
  expect_streams_agree("Just text, no channels.");
  // A call whose arguments are not an object: the message, raw.
  const std::string bad =
      "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": ";
  const HarmonyText t = parse_harmony(bad);
  EXPECT_TRUE(t.calls.empty());
  EXPECT_EQ(t.content, bad);
  expect_streams_agree(bad);
  // A header that never ends, and text where a message should start.
  EXPECT_EQ(parse_harmony("<|channel|>final").content, "<|channel|>final");
  const std::string lost = "<|channel|>final<|message|>Hi<|end|> trailing words";
  EXPECT_EQ(parse_harmony(lost).content, "Hi trailing words");
  expect_streams_agree(lost);
  const std::string long_header = "<|channel|>" + std::string(400, 'x');
  EXPECT_EQ(parse_harmony(long_header).content, long_header);
  EXPECT_EQ(parse_harmony("").content, "");
}

TEST(Harmony, ChatOutputContinuesAForcedCall) {
  ReplyReading reading;
  reading.harmony = true;
  reading.extract_reasoning = true;
  reading.tools = ToolFormat::kHarmony;
  reading.tool_prefix = forced_call_header("get_weather");
  ChatOutput out(reading);
  ChatDelta d = out.push("{\"city\": ");
  EXPECT_EQ(d.content + d.reasoning, "");
  (void)out.push("\"Paris\"}");
  ChatDelta rest = out.finish();
  ASSERT_EQ(rest.calls.size(), 1u);
  EXPECT_EQ(rest.calls[0].name, "get_weather");
  EXPECT_EQ(rest.content, "");
}

runtime::ChatFormatter harmony_formatter() {
  auto f = runtime::ChatFormatter::from_template(template_file("harmony.jinja"), "", "<|return|>");
  EXPECT_TRUE(f.is_ok()) << f.message();
  return std::move(*f);
}

Result<CompletionParams> request(const std::string& extra) {
  const std::string body = R"({"messages": [{"role": "user", "content": "Weather?"}], "tools": [
      {"type": "function", "function": {"name": "get_weather", "description": "Weather",
       "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                      "required": ["city"]}}},
      {"type": "function", "function": {"name": "now"}}])" +
                           (extra.empty() ? "" : ", " + extra) + "}";
  auto p = parse_completion(json::parse(body), true, runtime::SamplerParams{});
  if (p) order_tools(p->tools, body);
  return p;
}

TEST(Harmony, PlanRendersToolsEffortAndReadsByChannel) {
  const runtime::ChatFormatter f = harmony_formatter();
  auto p = request(R"("reasoning_effort": "high")");
  ASSERT_TRUE(p.is_ok()) << p.message();
  auto r = plan_chat(f, ChatOptions{}, *p);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_TRUE(r->harmony);
  EXPECT_EQ(r->tools, ToolFormat::kHarmony);
  EXPECT_NE(p->prompt.find("Reasoning: high"), std::string::npos) << p->prompt;
  EXPECT_NE(p->prompt.find("type get_weather = (_: {\ncity: string,\n}) => any;"),
            std::string::npos)
      << p->prompt;
  EXPECT_TRUE(p->prompt.ends_with("<|start|>assistant"));
  EXPECT_EQ(p->format, CompletionParams::Format::kText);
  // --reasoning-format none without tools: the raw text is the content.
  auto plain = parse_completion(json::parse(R"({"messages": [{"role": "user", "content": "Hi"}],
                                                "reasoning_format": "none"})"),
                                true, runtime::SamplerParams{});
  ASSERT_TRUE(plain.is_ok()) << plain.message();
  auto raw = plan_chat(f, ChatOptions{}, *plain);
  ASSERT_TRUE(raw.is_ok()) << raw.message();
  EXPECT_FALSE(raw->harmony);
}

TEST(Harmony, ForcedCallsEndThePromptWithTheirHeader) {
  const runtime::ChatFormatter f = harmony_formatter();
  auto p = request(R"("tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
  ASSERT_TRUE(p.is_ok()) << p.message();
  auto r = plan_chat(f, ChatOptions{}, *p);
  ASSERT_TRUE(r.is_ok()) << r.message();
  const std::string header =
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>";
  EXPECT_EQ(r->tool_prefix, header);
  EXPECT_TRUE(p->prompt.ends_with("<|start|>assistant" + header)) << p->prompt;
  EXPECT_EQ(p->format, CompletionParams::Format::kJsonSchema);
  EXPECT_EQ(p->schema.dump(), p->tools.tools[0].parameters.dump());  // the arguments alone
  EXPECT_TRUE(grammar::JsonGrammar::from_schema(p->schema).is_ok());
  // required among several: a json message whose body names the function.
  auto q = request(R"("tool_choice": "required")");
  ASSERT_TRUE(q.is_ok()) << q.message();
  auto rq = plan_chat(f, ChatOptions{}, *q);
  ASSERT_TRUE(rq.is_ok()) << rq.message();
  EXPECT_TRUE(q->prompt.ends_with("<|channel|>commentary <|constrain|>json<|message|>"));
  EXPECT_NE(q->schema.dump().find("anyOf"), std::string::npos);
  EXPECT_TRUE(grammar::JsonGrammar::from_schema(q->schema).is_ok());
  // What the constrained body gives reads back as the call.
  ChatOutput out(*rq);
  (void)out.push(R"({"name": "now", "arguments": {}})");
  ChatDelta d = out.finish();
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "now");
}

TEST(Harmony, EarlierReasoningReachesTheTemplateAsThinking) {
  const runtime::ChatFormatter f = harmony_formatter();
  runtime::ChatMessage call("assistant", "");
  call.reasoning_content = "Need the tool.";
  call.tool_calls.push_back({"c1", "get_weather", R"({"city": "Oslo"})", {}});
  std::vector<runtime::ChatMessage> messages = {{"user", "Weather?"}, call, {"tool", "5 C"}};
  messages.back().tool_call_id = "c1";
  auto text = f.render(messages);
  ASSERT_TRUE(text.is_ok()) << text.message();
  EXPECT_NE(text->find("<|channel|>analysis<|message|>Need the tool.<|end|>"), std::string::npos)
      << *text;
  EXPECT_NE(text->find("to=functions.get_weather<|channel|>commentary json<|message|>"
                       "{\"city\": \"Oslo\"}<|call|>"),
            std::string::npos)
      << *text;
}

}  // namespace
}  // namespace minfer::serve
