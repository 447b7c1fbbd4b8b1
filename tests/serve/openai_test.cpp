// The server's request parsing and stop-string text (serve/openai.h): what
// is read, what is refused (naming the field), and stop strings matched
// across pieces without sending any part of one.
#include "serve/openai.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <utility>

namespace minfer::serve {
namespace {

using nlohmann::json;

TEST(OpenAi, ReadsAChatRequest) {
  const json body = json::parse(R"({
    "model": "x", "messages": [{"role": "system", "content": "be brief"},
                               {"role": "user", "content": [{"type": "text", "text": "a"},
                                                            {"type": "text", "text": "b"}]}],
    "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 3, "seed": 11,
    "stop": ["END", ""], "stream": true, "stream_options": {"include_usage": true},
    "some_future_field": {"ignored": true}})");
  auto p = parse_completion(body, true, runtime::SamplerParams{});
  ASSERT_TRUE(p.is_ok()) << p.message();
  ASSERT_EQ(p->messages.size(), 2u);
  EXPECT_EQ(p->messages[1].content, "ab");
  EXPECT_EQ(p->max_tokens, 7);
  EXPECT_FLOAT_EQ(p->sampling.temperature, 0.5f);
  EXPECT_EQ(p->sampling.top_k, 3);
  EXPECT_EQ(p->sampling.seed, 11u);
  EXPECT_EQ(p->stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(p->stream);
  EXPECT_TRUE(p->include_usage);
}

TEST(OpenAi, RefusesWrongTypesNamingTheField) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"messages": []})", "messages"},
      {R"({"messages": [{"content": "x"}]})", "role"},
      {R"({"messages": [{"role": "user", "content": 3}]})", "content"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": "9"})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": -1})", "temperature"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stop": [1]})", "stop"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 17})", "'n'"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 0})", "'n'"},
      {R"({"messages": [{"role": "user", "content": "x"}], "presence_penalty": 3})",
       "presence_penalty"},
      {R"({"messages": [{"role": "user", "content": "x"}], "frequency_penalty": "1"})",
       "frequency_penalty"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})", "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})",
       "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": "json"})",
       "response_format"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}})",
       "response_format"},
      {R"({"messages": [{"role": "user", "content": "x"}],
           "response_format": {"type": "json_schema", "json_schema": {"schema": 3}}})",
       "json_schema.schema"},
      {R"({"messages": [{"role": "user", "content": "x"}], "user": 5})", "user"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stream": "yes"})", "stream"},
  };
  for (const auto& [text, field] : bad) {
    auto p = parse_completion(json::parse(text), true, runtime::SamplerParams{});
    ASSERT_FALSE(p.is_ok()) << text;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.message().find(field), std::string::npos) << p.message();
    EXPECT_EQ(http_status(p.status()), 400);
  }
  auto tokens = parse_completion(json::parse(R"({"prompt": [1, 2, 3]})"), false, {});
  ASSERT_TRUE(tokens.is_ok());
  EXPECT_EQ(tokens->prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(parse_completion(json::parse(R"({"prompt": [1, -2]})"), false, {}).is_ok());
}

TEST(OpenAi, ReadsChoicesPenaltiesLogprobsAndFormats) {
  auto chat = parse_completion(json::parse(R"({"messages": [{"role": "user", "content": "x"}],
      "n": 3, "presence_penalty": 0.5, "frequency_penalty": -1.5, "logprobs": true,
      "top_logprobs": 4, "user": "u1",
      "response_format": {"type": "json_schema",
                          "json_schema": {"name": "t", "schema": {"type": "object"}}}})"),
                               true, {});
  ASSERT_TRUE(chat.is_ok()) << chat.message();
  EXPECT_EQ(chat->n, 3);
  EXPECT_FLOAT_EQ(chat->sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(chat->sampling.frequency_penalty, -1.5f);
  EXPECT_EQ(chat->top_logprobs, 4);
  EXPECT_EQ(chat->format, CompletionParams::Format::kJsonSchema);
  const std::string body =
      R"({"response_format": {"type": "json_schema", "json_schema": {"schema": {"properties": {"b": {}, "a": {}}}}}})";
  EXPECT_EQ(ordered_schema(body).dump(), R"({"properties":{"b":{},"a":{}}})");  // as written
  EXPECT_TRUE(ordered_schema("{}").is_null());
  auto plain = parse_completion(
      json::parse(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true,
                      "response_format": {"type": "json_object"}})"),
      true, {});
  ASSERT_TRUE(plain.is_ok()) << plain.message();
  EXPECT_EQ(plain->top_logprobs, 0);  // the drawn token's only
  EXPECT_EQ(plain->format, CompletionParams::Format::kJsonObject);
  auto text = parse_completion(json::parse(R"({"prompt": "x", "logprobs": 2})"), false, {});
  ASSERT_TRUE(text.is_ok()) << text.message();
  EXPECT_EQ(text->top_logprobs, 2);
  EXPECT_EQ(text->format, CompletionParams::Format::kText);
  auto none = parse_completion(json::parse(R"({"prompt": "x"})"), false, {});
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(none->top_logprobs, -1);
  EXPECT_EQ(none->n, 1);
}

TEST(OpenAi, ErrorObjectsAndStatuses) {
  const json e = error_body(Status::out_of_range("too long"));
  EXPECT_EQ(e["error"]["message"], "too long");
  EXPECT_EQ(e["error"]["code"], 400);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(http_status(Status::unavailable("loading")), 503);
  EXPECT_EQ(http_status(Status::internal("bug")), 500);
  EXPECT_EQ(http_status(Status::resource_exhausted("full")), 429);
}

TEST(OpenAi, StopStringsAcrossPiecesAreNeverSentInPart) {
  StopText t({"STOP", "xyz"});
  std::string sent;
  for (const char* piece : {"hello S", "T", "O", "nope ST", "OP and more"}) {
    sent += t.push(piece);
    EXPECT_EQ(sent.find("ST"), sent.rfind("ST")) << "a partial stop string went out: " << sent;
  }
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(sent, "hello STOnope ");
  EXPECT_EQ(t.finish(), "");
  StopText none({"END"});
  std::string out = none.push("the E");
  out += none.push("N");
  EXPECT_EQ(out, "the ") << "held: it may still become END";
  out += none.finish();
  EXPECT_EQ(out, "the EN");
  EXPECT_FALSE(none.stopped());
}

// Random bodies: every known field given values of random types (and random
// nesting). Parsing never throws; it reads the body or refuses it with an
// invalid_argument naming a field.
TEST(OpenAi, RandomBodiesAreReadOrRefusedNeverThrown) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  std::function<json(int)> value = [&](int depth) -> json {
    switch (next() % (depth > 2 ? 6 : 8)) {
      case 0:
        return nullptr;
      case 1:
        return next() % 2 == 0;
      case 2:
        return static_cast<int64_t>(next() % 2000) - 1000;
      case 3:
        return static_cast<double>(next() % 1000) / 7.0 - 50;
      case 4:
        return std::string(next() % 2 ? "text" : "user");
      case 5:
        return next();  // a large unsigned
      case 6: {
        json a = json::array();
        for (uint64_t n = next() % 4; n > 0; --n) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        json o = json::object();
        for (const char* k : {"role", "content", "type", "text"}) {
          if (next() % 2) o[k] = value(depth + 1);
        }
        return o;
      }
    }
  };
  const char* fields[] = {
      "messages",       "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p",
      "top_k",          "min_p",  "seed",       "repeat_penalty",        "stop",        "stream",
      "stream_options", "n"};
  int read = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    json body = json::object();
    for (const char* f : fields) {
      if (next() % 3 == 0) body[f] = value(0);
    }
    if (next() % 4 == 0) body["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
    for (bool chat : {true, false}) {
      Result<CompletionParams> p = Status::ok();
      EXPECT_NO_THROW(p = parse_completion(body, chat, runtime::SamplerParams{})) << body.dump();
      if (p.is_ok()) {
        ++read;
      } else {
        ++refused;
        EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << body.dump();
        EXPECT_NE(p.message().find('\''), std::string::npos) << "names no field: " << p.message();
      }
    }
  }
  EXPECT_GT(read, 10);  // most random bodies have some field wrong
  EXPECT_GT(refused, 100);
}

Result<CompletionParams> chat_with(const std::string& fields) {
  return parse_completion(
      json::parse(R"({"messages": [{"role": "user", "content": "x"}], )" + fields + "}"), true,
      runtime::SamplerParams{});
}

TEST(OpenAi, ReadsLogitBiasInBothForms) {
  constexpr float kNever = -std::numeric_limits<float>::infinity();
  auto openai = chat_with(R"("logit_bias": {"15": 100, "7": -5.5, "9": -100})");
  ASSERT_TRUE(openai.is_ok()) << openai.message();
  const auto& b = openai->sampling.logit_bias;
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].id, 15);  // nlohmann::json sorts keys: "15" < "7" < "9"
  EXPECT_EQ(b[0].bias, 100.0f);
  EXPECT_EQ(b[1].id, 7);
  EXPECT_EQ(b[1].bias, -5.5f);
  EXPECT_EQ(b[2].id, 9);
  EXPECT_EQ(b[2].bias, kNever) << "-100 bans, as OpenAI documents";
  auto llama = parse_completion(
      json::parse(R"({"prompt": "x", "logit_bias": [[3, 1.5], [4, false], [3, -2]]})"), false,
      runtime::SamplerParams{});
  ASSERT_TRUE(llama.is_ok()) << llama.message();
  const auto& l = llama->sampling.logit_bias;
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].id, 3);
  EXPECT_EQ(l[0].bias, 1.5f);
  EXPECT_EQ(l[1].id, 4);
  EXPECT_EQ(l[1].bias, kNever);
  EXPECT_EQ(l[2].bias, -2.0f);
  EXPECT_TRUE(chat_with(R"("logit_bias": null)")->sampling.logit_bias.empty());
  EXPECT_TRUE(chat_with(R"("logit_bias": {})")->sampling.logit_bias.empty());
  // The defaults' bias is replaced, not added to.
  runtime::SamplerParams defaults;
  defaults.logit_bias = {{1, 1.0f}};
  auto replaced =
      parse_completion(json::parse(R"({"prompt": "x", "logit_bias": {"2": 3}})"), false, defaults);
  ASSERT_TRUE(replaced.is_ok());
  ASSERT_EQ(replaced->sampling.logit_bias.size(), 1u);
  EXPECT_EQ(replaced->sampling.logit_bias[0].id, 2);
}

TEST(OpenAi, RefusesABadLogitBiasNamingTheEntry) {
  const std::pair<const char*, const char*> bad[] = {
      {R"("logit_bias": 5)", "logit_bias"},
      {R"("logit_bias": "15")", "logit_bias"},
      {R"("logit_bias": {"abc": 1})", "\"abc\""},
      {R"("logit_bias": {"1.5": 1})", "\"1.5\""},
      {R"("logit_bias": {"-3": 1})", "\"-3\""},
      {R"("logit_bias": {"": 1})", "logit_bias"},
      {R"("logit_bias": {"12 ": 1})", "\"12 \""},
      {R"("logit_bias": {"99999999999": 1})", "99999999999"},
      {R"("logit_bias": {"15": 100.5})", "\"15\": 100.5"},
      {R"("logit_bias": {"15": -101})", "\"15\": -101"},
      {R"("logit_bias": {"15": "1"})", "\"15\""},
      {R"("logit_bias": {"15": true})", "\"15\": true"},
      {R"("logit_bias": [[1]])", "logit_bias[0]"},
      {R"("logit_bias": [1, 2])", "logit_bias[0]"},
      {R"("logit_bias": [[1, 2], [1.5, 2]])", "logit_bias[1]"},
      {R"("logit_bias": [[1, 2], [-1, 2]])", "logit_bias[1]"},
      {R"("logit_bias": [["7", 200]])", "logit_bias[0]"},
      {R"("logit_bias": [[7, null]])", "logit_bias[0]"},
  };
  for (const auto& [fields, needle] : bad) {
    auto p = chat_with(fields);
    ASSERT_FALSE(p.is_ok()) << fields;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.message().find("logit_bias"), std::string::npos) << p.message();
    EXPECT_NE(p.message().find(needle), std::string::npos) << p.message();
  }
}

TEST(OpenAi, ChecksTokenIdsAgainstTheVocabulary) {
  auto p = parse_completion(json::parse(R"({"prompt": [0, 9, 10]})"), false, {});
  ASSERT_TRUE(p.is_ok());
  EXPECT_TRUE(check_token_ids(*p, 11).is_ok());
  Status s = check_token_ids(*p, 10);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("10"), std::string::npos) << s.message();
  auto b = chat_with(R"("logit_bias": {"3": 1, "262144": -1})");
  ASSERT_TRUE(b.is_ok());
  EXPECT_TRUE(check_token_ids(*b, 262145).is_ok());
  s = check_token_ids(*b, 262144);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("logit_bias"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("262144"), std::string::npos) << s.message();
}

TEST(OpenAi, ADeepContentIsRefusedWithoutCopyingIt) {
  // As a caller that skipped parse_request_json() would pass it: the parse
  // and nlohmann's destructor are iterative, a copy of the content is not.
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  const json body = json::parse(R"({"messages": [{"role": "user", "content": )" + deep + "}]}");
  auto p = parse_completion(body, true, runtime::SamplerParams{});
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.message().find("messages[0].content"), std::string::npos) << p.message();
}

}  // namespace
}  // namespace minfer::serve
