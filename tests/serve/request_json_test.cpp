// The request body's one parse (serve/request_json.h): nesting past
// kMaxJsonDepth is refused before any document is built, whatever holds it
// (a message's content, a response_format schema), and the server's other
// refusals keep their words.
#include "serve/request_json.h"

#include <gtest/gtest.h>

#include <string>

#include "serve/openai.h"

namespace minfer::serve {
namespace {

// `levels` arrays around a 1: [[[1]]] for 3.
std::string arrays(size_t levels) {
  return std::string(levels, '[') + "1" + std::string(levels, ']');
}

void expect_too_deep(const std::string& body) {
  const std::string want = "deeper than " + std::to_string(kMaxJsonDepth) + " levels";
  auto j = parse_request_json(body);
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(j.message().find(want), std::string::npos) << j.message();
  auto o = parse_request_ordered_json(body);
  ASSERT_FALSE(o.is_ok());
  EXPECT_NE(o.message().find(want), std::string::npos) << o.message();
}

TEST(RequestJson, AHundredThousandDeepContentIsRefused) {
  expect_too_deep(R"({"messages": [{"role": "user", "content": )" + arrays(100'000) + "}]}");
}

TEST(RequestJson, AHundredThousandDeepSchemaIsRefused) {
  const std::string body =
      R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type":
      "json_schema", "json_schema": {"schema": {"type": "object", "default": )" +
      arrays(100'000) + "}}}}";
  expect_too_deep(body);
  // The second, ordered parse of the schema goes through the same door.
  EXPECT_TRUE(ordered_schema(body).is_null());
}

TEST(RequestJson, TheLimitIsSixtyFourLevelsCountingTheTopObject) {
  // {"a": [[...]]}: the object is level 1, then 63 arrays.
  const auto body = [](size_t arrays_inside) { return R"({"a": )" + arrays(arrays_inside) + "}"; };
  auto at_limit = parse_request_json(body(kMaxJsonDepth - 1));
  ASSERT_TRUE(at_limit.is_ok()) << at_limit.message();
  EXPECT_TRUE(at_limit->contains("a"));
  expect_too_deep(body(kMaxJsonDepth));
  // Objects count like arrays.
  std::string objects;
  for (int i = 0; i < kMaxJsonDepth; ++i) objects += R"({"k": )";
  objects += "1" + std::string(kMaxJsonDepth, '}');
  ASSERT_TRUE(parse_request_json(objects).is_ok());
  expect_too_deep(R"({"k": )" + objects + "}");
}

TEST(RequestJson, KeepsTheServersOtherRefusals) {
  for (const char* bad : {"", "{", "{\"a\": 1,}", "{\"a\": \"\xff\"}", "{} {}", "nul"}) {
    auto j = parse_request_json(bad);
    ASSERT_FALSE(j.is_ok()) << bad;
    EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(j.message(), "the body is not valid JSON (or not valid UTF-8)") << bad;
  }
  for (const char* not_object : {"[]", "1", "\"x\"", "null"}) {
    auto j = parse_request_ordered_json(not_object);
    ASSERT_FALSE(j.is_ok()) << not_object;
    EXPECT_EQ(j.message(), "the body must be a JSON object") << not_object;
  }
  // An unclosed deep body is still refused for its depth (the pass stops there).
  expect_too_deep(std::string(1000, '['));
}

TEST(RequestJson, OrderedKeepsTheKeyOrder) {
  auto o = parse_request_ordered_json(R"({"z": 1, "a": {"y": 2, "b": 3}})");
  ASSERT_TRUE(o.is_ok()) << o.message();
  EXPECT_EQ(o->dump(), R"({"z":1,"a":{"y":2,"b":3}})");
  const std::string body =
      R"({"response_format": {"type": "json_schema", "json_schema": {"schema":
      {"properties": {"z": {}, "a": {}}}}}})";
  EXPECT_EQ(ordered_schema(body).dump(), R"({"properties":{"z":{},"a":{}}})");
}

TEST(RequestJson, AHundredThousandMessagesParse) {
  std::string body = R"({"messages": [)";
  for (int i = 0; i < 100'000; ++i) body += R"({"role": "user", "content": "hi"},)";
  body.back() = ']';
  body += "}";
  auto j = parse_request_json(body);
  ASSERT_TRUE(j.is_ok()) << j.message();
  auto p = parse_completion(*j, true, runtime::SamplerParams{});
  ASSERT_TRUE(p.is_ok()) << p.message();
  EXPECT_EQ(p->messages.size(), 100'000u);
}

}  // namespace
}  // namespace minfer::serve
