#include "base/json.h"

#include <gtest/gtest.h>

#include <string>

namespace minfer {
namespace {

JsonValue parse_ok(std::string_view text) {
  Result<JsonValue> v = parse_json(text);
  EXPECT_TRUE(v.is_ok()) << text << ": " << v.message();
  return v.is_ok() ? std::move(v).value() : JsonValue();
}

std::string parse_error(std::string_view text, const JsonParseOptions& options = {}) {
  Result<JsonValue> v = parse_json(text, options);
  EXPECT_FALSE(v.is_ok()) << "accepted: " << text;
  return v.message();
}

TEST(Json, Scalars) {
  EXPECT_TRUE(parse_ok("null").is_null());
  EXPECT_TRUE(parse_ok(" true ").as_bool());
  EXPECT_FALSE(parse_ok("false").as_bool());
  EXPECT_EQ(parse_ok("\"hi\"").as_string(), "hi");
  EXPECT_EQ(parse_ok("0").as_int(), 0);
  EXPECT_EQ(parse_ok("-42").as_int(), -42);
  EXPECT_EQ(parse_ok("9007199254740993").as_int(), 9007199254740993LL);  // exact beyond 2^53
  EXPECT_DOUBLE_EQ(parse_ok("3.25").as_double(), 3.25);
  EXPECT_DOUBLE_EQ(parse_ok("-1.5e3").as_double(), -1500.0);
  EXPECT_DOUBLE_EQ(parse_ok("2E-2").as_double(), 0.02);
  EXPECT_FALSE(parse_ok("1.0").is_int());
  EXPECT_FALSE(parse_ok("99999999999999999999").is_int());
  EXPECT_TRUE(parse_ok("99999999999999999999").is_number());
}

TEST(Json, ArraysAndObjects) {
  JsonValue v = parse_ok(R"({"a": [1, 2, {"b": null}], "c": {}, "d": [], "e": "x"})");
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.members().size(), 4u);
  EXPECT_EQ(v.members()[0].first, "a");  // document order
  const JsonValue* a = v.find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items().size(), 3u);
  EXPECT_EQ(a->items()[1].as_int(), 2);
  EXPECT_TRUE(a->items()[2].find("b")->is_null());
  EXPECT_TRUE(v.find("c")->members().empty());
  EXPECT_TRUE(v.find("d")->items().empty());
  EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(Json, StringEscapes) {
  EXPECT_EQ(parse_ok(R"("a\"b\\c\/d\b\f\n\r\t")").as_string(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(parse_ok(R"("\u0041\u00e9\u4e2d")").as_string(), "A\xC3\xA9\xE4\xB8\xAD");
  EXPECT_EQ(parse_ok(R"("\u0000")").as_string(), std::string(1, '\0'));
  // U+1F600 as a surrogate pair, upper- and lower-case hex.
  EXPECT_EQ(parse_ok(R"("\ud83d\uDE00")").as_string(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(parse_ok("\"\xF0\x9F\x98\x80 raw\"").as_string(), "\xF0\x9F\x98\x80 raw");
}

TEST(Json, SurrogateErrors) {
  EXPECT_NE(parse_error(R"("\ud83d")").find("lone high surrogate"), std::string::npos);
  EXPECT_NE(parse_error(R"("\ud83dx")").find("lone high surrogate"), std::string::npos);
  EXPECT_NE(parse_error(R"("\ude00")").find("lone low surrogate"), std::string::npos);
  EXPECT_NE(parse_error(R"("\ud83d\u0041")").find("not followed by a low surrogate"),
            std::string::npos);
  EXPECT_NE(parse_error(R"("\u12")").find("\\u"), std::string::npos);
  EXPECT_NE(parse_error(R"("\u12g4")").find("hex"), std::string::npos);
}

TEST(Json, ErrorsNameLineAndColumn) {
  EXPECT_EQ(parse_error("{\n  \"a\": 1,\n  \"b\" 2\n}"),
            "JSON line 3, column 7: expected ':' after object key");
  EXPECT_EQ(parse_error("[1, 2,]"), "JSON line 1, column 7: unexpected character ']'");
  EXPECT_EQ(parse_error("[1 2]"), "JSON line 1, column 4: expected ',' or ']' in array");
  EXPECT_EQ(parse_error(""), "JSON line 1, column 1: unexpected end of input, expected a value");
  EXPECT_EQ(parse_error("1 2"), "JSON line 1, column 3: unexpected trailing characters");
  EXPECT_EQ(parse_error("\"abc"), "JSON line 1, column 1: unterminated string");
  EXPECT_EQ(parse_error("{\"a\":1,\"a\":2}"), "JSON line 1, column 8: duplicate key \"a\"");
  EXPECT_EQ(parse_error("\n\n  tru"), "JSON line 3, column 3: invalid literal");
}

TEST(Json, RejectsNonStrictInput) {
  for (const char* bad :
       {"01",     "-",   "1.",         ".5",      "1e",  "+1",      "NaN",   "Infinity",
        "[1,]",   "{,}", "{\"a\":1,}", "{a:1}",   "'x'", "// c\n1", "[1] x", "\"\\x\"",
        "\"\t\"", "nul", "truee",      "{\"a\"}", "[",   "{"}) {
    parse_error(bad);
  }
  EXPECT_NE(parse_error("\"\xC3\x28\"").find("invalid UTF-8"), std::string::npos);
  EXPECT_NE(parse_error("\"\xED\xA0\x80\"").find("invalid UTF-8"), std::string::npos);  // surrogate
  EXPECT_NE(parse_error("\"\xC0\xAF\"").find("invalid UTF-8"), std::string::npos);      // overlong
  EXPECT_NE(parse_error("\"\xF0\x9F\x98\"").find("invalid UTF-8"), std::string::npos);
}

TEST(Json, DepthLimit) {
  JsonParseOptions options;
  options.max_depth = 4;
  EXPECT_TRUE(parse_json("[[[[1]]]]", options).is_ok());
  EXPECT_NE(parse_error("[[[[[1]]]]]", options).find("nesting deeper than 4"), std::string::npos);
  EXPECT_NE(parse_error(R"({"a":{"b":{"c":{"d":{}}}}})", options).find("nesting"),
            std::string::npos);
  // The default limit stops hostile nesting long before the stack would.
  const std::string deep(100000, '[');
  EXPECT_NE(parse_error(deep).find("nesting deeper than"), std::string::npos);
}

TEST(Json, QuoteRoundTrips) {
  const std::string s = std::string("a\"b\\c\n\t\x01\xE4\xB8\xAD", 11);
  EXPECT_EQ(json_quote(s), "\"a\\\"b\\\\c\\n\\t\\u0001\xE4\xB8\xAD\"");
  EXPECT_EQ(parse_ok(json_quote(s)).as_string(), s);
}

}  // namespace
}  // namespace minfer
