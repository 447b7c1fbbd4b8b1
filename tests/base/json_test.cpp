// base/json.h: strict, bounded reading into nlohmann documents; the typed
// readers; json_quote as Python's json.dumps(ensure_ascii=False) writes.
#include "base/json.h"

#include <gtest/gtest.h>

#include <string>

namespace minfer {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

json parse_ok(std::string_view text) {
  Result<json> v = parse_json(text);
  EXPECT_TRUE(v.is_ok()) << text << ": " << v.message();
  return v.is_ok() ? std::move(v).value() : json();
}

Status parse_status(std::string_view text, const JsonParseOptions& options = {}) {
  Result<json> v = parse_json(text, options);
  EXPECT_FALSE(v.is_ok()) << "accepted: " << text;
  return v.status();
}

std::string parse_error(std::string_view text, const JsonParseOptions& options = {}) {
  return parse_status(text, options).message();
}

bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

TEST(Json, Scalars) {
  EXPECT_TRUE(parse_ok("null").is_null());
  EXPECT_TRUE(parse_ok(" true ").get<bool>());
  EXPECT_FALSE(parse_ok("false").get<bool>());
  EXPECT_EQ(parse_ok("\"hi\"").get<std::string>(), "hi");
  EXPECT_EQ(*json_to_int(parse_ok("0"), "n"), 0);
  EXPECT_EQ(*json_to_int(parse_ok("-42"), "n"), -42);
  EXPECT_EQ(*json_to_int(parse_ok("9007199254740993"), "n"), 9007199254740993LL);  // beyond 2^53
  EXPECT_EQ(*json_to_int(parse_ok("9223372036854775807"), "n"), INT64_MAX);
  EXPECT_EQ(*json_to_int(parse_ok("-9223372036854775808"), "n"), INT64_MIN);
  EXPECT_DOUBLE_EQ(parse_ok("3.25").get<double>(), 3.25);
  EXPECT_DOUBLE_EQ(parse_ok("-1.5e3").get<double>(), -1500.0);
  EXPECT_DOUBLE_EQ(parse_ok("2E-2").get<double>(), 0.02);
  EXPECT_FALSE(parse_ok("1.0").is_number_integer());
  EXPECT_FALSE(parse_ok("1e3").is_number_integer());
  EXPECT_TRUE(parse_ok("99999999999999999999").is_number_float());
}

TEST(Json, IntegersAreReadExactlyOrRefused) {
  for (const char* not_int64 : {"9223372036854775808", "18446744073709551615",
                                "99999999999999999999", "1.0", "1e3", "\"1\"", "true", "null"}) {
    auto v = json_to_int(parse_ok(not_int64), "id");
    ASSERT_FALSE(v.is_ok()) << not_int64;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  }
  auto small = json_to_int(parse_ok("-1"), "token id", 0, INT32_MAX);
  ASSERT_FALSE(small.is_ok());
  EXPECT_EQ(small.message(), "token id: expected an integer in [0, 2147483647]");
  EXPECT_FALSE(json_to_int(parse_ok("2147483648"), "token id", 0, INT32_MAX).is_ok());
  EXPECT_EQ(*json_to_int(parse_ok("2147483647"), "token id", 0, INT32_MAX), INT32_MAX);
}

TEST(Json, ArraysAndObjects) {
  const std::string text = R"({"e": [1, 2, {"b": null}], "c": {}, "d": [], "a": "x"})";
  auto ordered = parse_ordered_json(text);
  ASSERT_TRUE(ordered.is_ok()) << ordered.message();
  EXPECT_EQ(ordered->begin().key(), "e");  // document order
  EXPECT_EQ(ordered->dump(), R"({"e":[1,2,{"b":null}],"c":{},"d":[],"a":"x"})");
  const json v = parse_ok(text);
  EXPECT_EQ(v.begin().key(), "a");  // json sorts its keys
  const json* e = json_find(v, "e");
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->size(), 3u);
  EXPECT_EQ((*e)[1], 2);
  EXPECT_TRUE(json_find((*e)[2], "b")->is_null());
  EXPECT_EQ(json_find(v, "missing"), nullptr);
  EXPECT_EQ(json_find(*e, "e"), nullptr);  // not an object
}

TEST(Json, StringEscapes) {
  EXPECT_EQ(parse_ok(R"("a\"b\\c\/d\b\f\n\r\t")"), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(parse_ok(R"("\u0041\u00e9\u4e2d")"), "A\xC3\xA9\xE4\xB8\xAD");
  EXPECT_EQ(parse_ok(R"("\u0000")"), std::string(1, '\0'));
  // U+1F600 as a surrogate pair, upper- and lower-case hex.
  EXPECT_EQ(parse_ok(R"("\ud83d\uDE00")"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(parse_ok("\"\xF0\x9F\x98\x80 raw\""), "\xF0\x9F\x98\x80 raw");
}

TEST(Json, SurrogateErrors) {
  for (const char* bad : {R"("\ud83d")", R"("\ud83dx")", R"("\ude00")", R"("\ud83d\u0041")"}) {
    EXPECT_TRUE(contains(parse_error(bad), "surrogate")) << bad << ": " << parse_error(bad);
  }
  EXPECT_TRUE(contains(parse_error(R"("\u12")"), "\\u"));
  EXPECT_TRUE(contains(parse_error(R"("\u12g4")"), "\\u"));
}

TEST(Json, ErrorsNameLineAndColumn) {
  const Status s = parse_status("{\n  \"a\": 1,\n  \"b\" 2\n}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "JSON line 3, column 7: syntax error while parsing object separator - unexpected "
            "number literal; expected ':'");
  EXPECT_TRUE(contains(parse_error("[1, 2,]"), "line 1, column 7"));
  EXPECT_TRUE(contains(parse_error("1 2"), "line 1, column 3"));
  EXPECT_TRUE(contains(parse_error("\n\n  tru"), "line 3, column 6"));
  EXPECT_TRUE(contains(parse_error(""), "line 1, column 1"));
  // The offending bytes are quoted printably, never raw.
  EXPECT_FALSE(contains(parse_error("[\"\xFF\x01\"]"), "\xFF")) << parse_error("[\"\xFF\x01\"]");
}

TEST(Json, RejectsNonStrictInput) {
  for (const char* bad :
       {"01",       "-",         "1.",    ".5",      "1e",         "+1",    "NaN",
        "Infinity", "-Infinity", "[1,]",  "{,}",     "{\"a\":1,}", "{a:1}", "'x'",
        "// c\n1",  "/* c */ 1", "[1] x", "\"\\x\"", "\"\t\"",     "nul",   "truee",
        "{\"a\"}",  "[",         "{",     "1e400",   "-1e400"}) {
    EXPECT_EQ(parse_status(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(contains(parse_error("1e400"), "overflow"));
  // nlohmann alone would stop at a NUL byte and ignore the rest.
  for (std::string_view nul :
       {std::string_view("1\0", 2), std::string_view("{}\0{", 3), std::string_view("\"a\0\"", 4)}) {
    EXPECT_TRUE(contains(parse_error(nul), "NUL")) << parse_error(nul);
  }
  EXPECT_EQ(parse_error(std::string_view("[1,\n 2]\0x", 10)),
            "JSON line 2, column 4: a raw NUL byte");
  for (const char* bad_utf8 :
       {"\"\xC3\x28\"", "\"\xED\xA0\x80\"" /* surrogate */, "\"\xC0\xAF\"" /* overlong */,
        "\"\xF0\x9F\x98\"" /* cut */, "\"\xF4\x90\x80\x80\"" /* past U+10FFFF */}) {
    EXPECT_TRUE(contains(parse_error(bad_utf8), "UTF-8")) << parse_error(bad_utf8);
  }
}

TEST(Json, AByteOrderMarkIsSkipped) {
  EXPECT_EQ(parse_ok("\xEF\xBB\xBF{\"a\": 1}")["a"], 1);
  EXPECT_FALSE(parse_json("1 \xEF\xBB\xBF").is_ok());  // only before the value
}

TEST(Json, DuplicateKeys) {
  const Status s = parse_status(R"({"x": {"a": 1, "b": 2, "a": 3}})");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "JSON object has the key \"a\" twice");
  EXPECT_FALSE(parse_ordered_json(R"({"a": 1, "a": 1})").is_ok());
  // The same key in sibling or nested objects is no repeat.
  parse_ok(R"({"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}], "c": {"a": 3}})");
  // A control character in the key is shown escaped.
  EXPECT_FALSE(contains(parse_error("{\"\\u0007\": 1, \"\\u0007\": 2}"), "\x07"));
  JsonParseOptions lax;
  lax.allow_duplicate_keys = true;
  auto last = parse_json(R"({"a": 1, "a": 2})", lax);
  ASSERT_TRUE(last.is_ok()) << last.message();
  EXPECT_EQ((*last)["a"], 2);
}

TEST(Json, RepeatedKeysWhenAllowed) {
  JsonParseOptions lax;
  lax.allow_duplicate_keys = true;
  const std::string text = R"({"b": 1, "a": 2, "b": {"c": [3]}})";
  auto ordered = parse_ordered_json(text, lax);
  ASSERT_TRUE(ordered.is_ok()) << ordered.message();
  EXPECT_EQ(ordered->dump(), R"({"b":{"c":[3]},"a":2})");  // the last value, the first place
  auto sorted = parse_json(text, lax);
  ASSERT_TRUE(sorted.is_ok()) << sorted.message();
  EXPECT_EQ(sorted->dump(), R"({"a":2,"b":{"c":[3]}})");
}

TEST(Json, AnOrderedObjectOfManyKeysIsBuiltInOnePass) {
  // nlohmann's own ordered_json parse searches the object for every key: a
  // hundred thousand keys took it over half a minute.
  std::string text = "{";
  for (int i = 0; i < 100'000; ++i)
    text += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  text.back() = '}';
  auto o = parse_ordered_json(text);
  ASSERT_TRUE(o.is_ok()) << o.message();
  ASSERT_EQ(o->size(), 100'000u);
  EXPECT_EQ(o->begin().key(), "k0");
  EXPECT_EQ((*o)["k99999"], 99'999);
  text.insert(text.size() - 1, ", \"k5\": 0");
  EXPECT_TRUE(contains(parse_error(text), "\"k5\" twice"));
}

TEST(Json, DepthLimit) {
  JsonParseOptions options;
  options.max_depth = 4;
  EXPECT_TRUE(parse_json("[[[[1]]]]", options).is_ok());
  const Status deep = parse_status("[[[[[1]]]]]", options);
  EXPECT_EQ(deep.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(deep.message(), "JSON nests arrays and objects deeper than 4 levels");
  EXPECT_EQ(parse_status(R"({"a":{"b":{"c":{"d":{}}}}})", options).code(), StatusCode::kOutOfRange);
  // The default limit stops hostile nesting long before the stack would, even
  // unclosed: the pass stops at the first level too many.
  EXPECT_EQ(parse_status(std::string(100000, '[')).code(), StatusCode::kOutOfRange);
  const std::string closed = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(parse_status(closed).code(), StatusCode::kOutOfRange);
  EXPECT_FALSE(parse_ordered_json(closed).is_ok());
}

TEST(Json, TypedReadersNameTheKey) {
  const json o = parse_ok(R"({"s": "x", "b": true, "i": 7, "f": 7.5, "big": 1e30})");
  EXPECT_EQ(*json_get_string(o, "s"), "x");
  EXPECT_TRUE(*json_get_bool(o, "b"));
  EXPECT_EQ(*json_get_int(o, "i"), 7);
  EXPECT_EQ(json_get_string(o, "missing").message(), "no \"missing\"");
  EXPECT_EQ(json_get_string(o, "i").message(), "\"i\" is not a string");
  EXPECT_EQ(json_get_bool(o, "s").message(), "\"s\" is not a boolean");
  EXPECT_EQ(json_get_int(o, "f").message(), "\"f\": expected an integer in [" +
                                                std::to_string(INT64_MIN) + ", " +
                                                std::to_string(INT64_MAX) + "]");
  EXPECT_EQ(json_get_int(o, "i", 0, 5).message(), "\"i\": expected an integer in [0, 5]");
  EXPECT_FALSE(json_get_int(o, "big").is_ok());
  EXPECT_EQ(json_get_int(json::array(), "i").status().code(), StatusCode::kInvalidArgument);
  auto ordered = parse_ordered_json(R"({"n": 3})");
  ASSERT_TRUE(ordered.is_ok());
  EXPECT_EQ(*json_get_int(*ordered, "n"), 3);
}

TEST(Json, QuoteRoundTrips) {
  const std::string s = std::string("a\"b\\c\n\t\x01\x7F/\xE4\xB8\xAD", 13);
  EXPECT_EQ(json_quote(s), "\"a\\\"b\\\\c\\n\\t\\u0001\x7F/\xE4\xB8\xAD\"");
  EXPECT_EQ(json_quote(std::string("\0\b\f\r\x1f", 5)), "\"\\u0000\\b\\f\\r\\u001f\"");
  EXPECT_EQ(parse_ok(json_quote(s)), s);
}

TEST(Json, QuoteReplacesIllFormedUtf8) {
  // One U+FFFD per maximal ill-formed subsequence, as Python decodes with
  // errors="replace": a cut sequence is one, a stray byte is one each.
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(json_quote("\xF0\x9F\x98"
                       "A"),
            "\"" + fffd + "A\"");
  EXPECT_EQ(json_quote("\xC0\xAF"), "\"" + fffd + fffd + "\"");
  EXPECT_EQ(json_quote("\xED\xA0\x80"), "\"" + fffd + fffd + fffd + "\"");
  EXPECT_EQ(json_quote("\xE2\x82"), "\"" + fffd + "\"");
  EXPECT_EQ(json_quote("a\xFF"
                       "b"),
            "\"a" + fffd + "b\"");
  EXPECT_TRUE(parse_json(json_quote("\xFF\xFE\x80\xC3")).is_ok());
}

}  // namespace
}  // namespace minfer
