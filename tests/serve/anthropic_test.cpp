// Anthropic's Messages API as data (serve/anthropic.h) and the reply that
// reshapes shared errors (serve/anthropic_reply.h): what a request body
// reads into, each refusal naming its field or block, a prefill continued
// only where the template writes it verbatim, and the stream's events.
#include "serve/anthropic.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "serve/anthropic_reply.h"
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

TEST(Anthropic, RefusesBlocksAndToolsNotSupportedYet) {
  for (const char* type :
       {"image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"}) {
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
  for (const char* field : {"tools", "tool_choice"}) {
    const std::string body = R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}],
      "tools": [{"name": "f", "input_schema": {}}], "tool_choice": {"type": "auto"}})";
    json j = json::parse(body);
    if (std::string(field) == "tool_choice") j.erase("tools");
    auto r = parse_messages(j, runtime::SamplerParams{}, false);
    ASSERT_FALSE(r.is_ok()) << field;
    EXPECT_NE(r.message().find(std::string("'") + field + "'"), std::string::npos) << r.message();
    EXPECT_NE(r.message().find("not supported yet"), std::string::npos) << r.message();
  }
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

TEST(Anthropic, APrefillIsContinued) {
  const auto f = formatter("{{ m.content }}");
  const std::vector<runtime::ChatMessage> turns = {{"user", "Count"}, {"assistant", "1, 2,"}};
  auto text = messages_prompt(f, turns);
  ASSERT_TRUE(text.is_ok()) << text.message();
  EXPECT_EQ(*text, "<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n1, 2,");
  // Without a prefill: the template's own rendering, opening the reply.
  auto plain = messages_prompt(f, {{"user", "Count"}});
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(*plain, "<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n");
}

TEST(Anthropic, RefusesAPrefillTheTemplateRewrites) {
  // A template that trims turns would show the model "x" for " x".
  const auto trims = formatter("{{ m.content | trim }}");
  auto r = messages_prompt(trims, {{"user", "Count"}, {"assistant", " 1,"}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("prefill"), std::string::npos) << r.message();
  EXPECT_TRUE(messages_prompt(trims, {{"user", "Count"}, {"assistant", "1,"}}).is_ok());
  auto ws = messages_prompt(formatter("{{ m.content }}"), {{"user", "a"}, {"assistant", "b "}});
  ASSERT_FALSE(ws.is_ok());
  EXPECT_NE(ws.message().find("whitespace"), std::string::npos) << ws.message();
}

TEST(Anthropic, StopReasons) {
  EXPECT_STREQ(stop_reason("stop", ""), "end_turn");
  EXPECT_STREQ(stop_reason("length", ""), "max_tokens");
  EXPECT_STREQ(stop_reason("stop", "END"), "stop_sequence");
}

TEST(Anthropic, MessageBody) {
  MessageReply m{"msg_1", "m", "hi", "stop_sequence", "END", 5, 2};
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

TEST(Anthropic, StreamEvents) {
  MessageReply m{"msg_1", "m", "", "", "", 5, 0};
  std::string sse = stream_opening(m) + text_delta_event("He") + text_delta_event("llo");
  m.stop_reason = "end_turn";
  m.output_tokens = 2;
  sse += stream_closing(m);
  const auto events = events_of(sse);
  std::vector<std::string> names;
  for (const auto& [name, data] : events) {
    names.push_back(name);
    EXPECT_EQ(data["type"], name);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"message_start", "content_block_start", "ping",
                                      "content_block_delta", "content_block_delta",
                                      "content_block_stop", "message_delta", "message_stop"}));
  const json& start = events[0].second["message"];
  EXPECT_EQ(start["content"], json::array());
  EXPECT_EQ(start["usage"]["input_tokens"], 5);
  EXPECT_TRUE(start["stop_reason"].is_null());
  EXPECT_EQ(events[1].second["content_block"], json::parse(R"({"type": "text", "text": ""})"));
  EXPECT_EQ(events[4].second["delta"], json::parse(R"({"type": "text_delta", "text": "llo"})"));
  EXPECT_EQ(events[6].second["delta"]["stop_reason"], "end_turn");
  EXPECT_TRUE(events[6].second["delta"]["stop_sequence"].is_null());
  EXPECT_EQ(events[6].second["usage"]["output_tokens"], 2);
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
