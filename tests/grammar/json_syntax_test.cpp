// The JSON recognizer on its own: RFC 8259 texts fed one byte per token,
// accepted or rejected at the right byte; the whitespace and nesting bounds;
// what mask() allows at the end of a value; the errors of mask()/accept().
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "grammar/json_constraint.h"
#include "grammar_testutil.h"

namespace minfer::grammar {
namespace {

using testing::byte_vocabulary;
using testing::first_rejected_byte;
using testing::kByteEog;
using testing::kByteSpecial;

std::shared_ptr<const JsonGrammar> any_value() {
  auto g = JsonGrammar::from_schema(nlohmann::json(true));
  return g.is_ok() ? *g : nullptr;
}

JsonConstraint fresh(const std::shared_ptr<const JsonGrammar>& g) {
  return std::move(JsonConstraint::create(g, byte_vocabulary())).value();
}

TEST(JsonSyntax, AcceptsValidTexts) {
  const std::vector<std::string> valid = {
      "{}",
      "[]",
      "0",
      "-0",
      "12",
      "-12.5e+3",
      "1E5",
      "0.5",
      "1e-7",
      "3.25E-0",
      "true",
      "false",
      "null",
      "\"\"",
      "\"abc\"",
      R"("\"\\\/\b\f\n\r\t")",
      R"("\u0041\u00e9\uFFFF")",
      R"("\uD83D\uDE00")",
      "\"\xC3\xA9\xE6\xBC\xA2\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF\"",
      R"({"a":1,"b":[true,false,null],"c":{"d":"e"}})",
      "[1,[2,[3,[]]],{}]",
      "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}",
      "{ \"a\" : 1 }",
      " {}",
      "\n[1]",
      R"(["\u0000"])",
      "[1E-99]",
      "\"\x7F\"",
      R"({"":""})",
      "[-0.0e00]",
      "[\n" + std::string(16, ' ') + "1]",
      std::string(20, '9') + "." + std::string(20, '9') + "e-99"};
  for (const std::string& text : valid) {
    JsonConstraint c = fresh(any_value());
    EXPECT_EQ(first_rejected_byte(c, text), -1) << text;
    EXPECT_TRUE(c.complete()) << text;
    EXPECT_TRUE(c.accept(kByteEog).is_ok()) << text;
    EXPECT_TRUE(c.ended());
  }
}

TEST(JsonSyntax, RejectsInvalidTextsAtTheRightByte) {
  struct Case {
    std::string text;
    int bad_byte;
  };
  const std::vector<Case> cases = {{"01", 1},
                                   {"-a", 1},
                                   {"1.e", 2},
                                   {"+1", 0},
                                   {".5", 0},
                                   {"1e}", 2},
                                   {"[1,]", 3},
                                   {"[,1]", 1},
                                   {R"({"a"})", 4},
                                   {R"({"a":1,})", 7},
                                   {"{a:1}", 1},
                                   {"tru e", 3},
                                   {R"("\x")", 2},
                                   {R"("\u12G4")", 5},
                                   {R"("\uDE00")", 4},
                                   {R"("\uDC")", 4},
                                   {R"("\udfff")", 4},
                                   {R"("\uD83Dx")", 7},
                                   {R"("\uD83D\u0041")", 9},
                                   {R"("\uD83D\uDB00")", 10},
                                   {"\"a\nb\"", 2},
                                   {"\"\xC0\x80\"", 1},
                                   {"\"\xE0\x80\x80\"", 2},
                                   {"\"\xED\xA0\x80\"", 2},
                                   {"\"\xF4\x90\x80\x80\"", 2},
                                   {"\"\xF5\"", 1},
                                   {"\"\x80\"", 1},
                                   {"\"\xC3\"", 2},
                                   {"{}x", 2},
                                   {"{} ", 2},
                                   {"1 ", 1},
                                   {"[1 2]", 3},
                                   {"[" + std::string(17, ' ') + "1]", 17},
                                   {"[\n\n1]", 2},
                                   {"[ \n1]", 2},
                                   {"[\t1]", 1},
                                   {"[\r\n1]", 1},
                                   {"[1e+]", 4},
                                   {"--1", 1},
                                   {"[1]]", 3},
                                   {R"({"a":1 "b":2})", 7},
                                   {"nul", -1},
                                   {"NaN", 0},
                                   {"Infinity", 0},
                                   {"'a'", 0},
                                   {"[1,2", -1},
                                   {"{\"a\":", -1},
                                   {"\"abc", -1},
                                   {"-", -1},
                                   {"1.", -1},
                                   {"1e", -1},
                                   {"1e+", -1},
                                   {std::string(20, '9') + "0", 20},
                                   {"-0." + std::string(21, '1'), 23},
                                   {"1e+999", 5}};
  for (const Case& k : cases) {
    JsonConstraint c = fresh(any_value());
    EXPECT_EQ(first_rejected_byte(c, k.text), k.bad_byte) << k.text;
    if (k.bad_byte < 0) {
      // An unfinished value: EOG is not allowed yet.
      EXPECT_FALSE(c.complete()) << k.text;
      EXPECT_FALSE(c.accept(kByteEog).is_ok()) << k.text;
    }
  }
}

TEST(JsonSyntax, NestingIsBounded) {
  JsonConstraint c = fresh(any_value());
  EXPECT_EQ(first_rejected_byte(c, std::string(kMaxNesting + 1, '[')), kMaxNesting);
  EXPECT_EQ(first_rejected_byte(c, std::string(kMaxNesting, ']')), -1);
  EXPECT_TRUE(c.complete());
}

TEST(JsonSyntax, JsonObjectModeWantsAnObject) {
  auto g = JsonGrammar::any_json();
  ASSERT_TRUE(g.is_ok()) << g.message();
  for (const char* text : {"[]", "1", "\"x\"", "true", "null"}) {
    JsonConstraint c = fresh(*g);
    EXPECT_EQ(first_rejected_byte(c, text), 0) << text;
  }
  JsonConstraint c = fresh(*g);
  EXPECT_EQ(first_rejected_byte(c, R"({"k": [1, {"x": null}], "s": "v"})"), -1);
  EXPECT_TRUE(c.complete());
}

std::vector<int32_t> allowed_ids(const JsonConstraint& c) {
  std::vector<uint8_t> allowed;
  EXPECT_TRUE(c.allowed_tokens(allowed).is_ok());
  std::vector<int32_t> ids;
  for (size_t t = 0; t < allowed.size(); ++t) {
    if (allowed[t]) ids.push_back(static_cast<int32_t>(t));
  }
  return ids;
}

TEST(JsonSyntax, OnlyEogAfterAClosedValue) {
  for (const char* text : {"{}", "[1]", "\"s\"", "true"}) {
    JsonConstraint c = fresh(any_value());
    ASSERT_EQ(first_rejected_byte(c, text), -1);
    EXPECT_EQ(allowed_ids(c), std::vector<int32_t>{kByteEog}) << text;
  }
  // A top-level number may end or go on.
  JsonConstraint c = fresh(any_value());
  ASSERT_EQ(first_rejected_byte(c, "12"), -1);
  std::vector<int32_t> expected;
  for (char ch : std::string("+-.0123456789Ee")) {
    if (ch != '+' && ch != '-') expected.push_back(static_cast<uint8_t>(ch));
  }
  std::sort(expected.begin(), expected.end());
  expected.push_back(kByteEog);
  EXPECT_EQ(allowed_ids(c), expected);
}

TEST(JsonSyntax, AllowedTokensInsideAStringAndAtAValue) {
  JsonConstraint c = fresh(any_value());
  ASSERT_EQ(first_rejected_byte(c, "\"a"), -1);
  const std::vector<int32_t> in_string = allowed_ids(c);
  // Every byte but controls, 0x80..0xC1 and 0xF5..0xFF (and no EOG).
  std::vector<int32_t> expected;
  for (int b = 0x20; b < 0x80; ++b) expected.push_back(b);
  for (int b = 0xC2; b <= 0xF4; ++b) expected.push_back(b);
  EXPECT_EQ(in_string, expected);

  JsonConstraint v = fresh(any_value());
  std::vector<int32_t> value_start;
  for (char ch : std::string("\n \"-0123456789[ft{n"))
    value_start.push_back(static_cast<uint8_t>(ch));
  std::sort(value_start.begin(), value_start.end());
  EXPECT_EQ(allowed_ids(v), value_start);
}

TEST(JsonSyntax, MaskSetsMinusInfinityAndKeepsTheRest) {
  JsonConstraint c = fresh(any_value());
  ASSERT_EQ(first_rejected_byte(c, "[1"), -1);
  std::vector<float> logits(300, 0.5f);  // longer than the 258-token vocabulary
  ASSERT_TRUE(c.mask(logits).is_ok());
  for (int t = 0; t < 300; ++t) {
    const bool allowed = t == ',' || t == ']' || t == '.' || t == 'e' || t == 'E' ||
                         (t >= '0' && t <= '9') || t == ' ' || t == '\n';
    EXPECT_EQ(logits[t], allowed ? 0.5f : -INFINITY) << t;
  }
  std::vector<float> short_row(100, 0.0f);
  Status s = c.mask(short_row);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(JsonSyntax, AcceptErrors) {
  JsonConstraint c = fresh(any_value());
  EXPECT_EQ(c.accept(kByteSpecial).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.accept(-1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.accept(100000).code(), StatusCode::kInvalidArgument);
  Status eog = c.accept(kByteEog);
  EXPECT_EQ(eog.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(eog.message().find("before the JSON value is complete"), std::string::npos);
  Status bad = c.accept('}');
  EXPECT_NE(bad.message().find("token 125 \"}\" is not allowed"), std::string::npos)
      << bad.message();
  // A refused token leaves the state as it was.
  ASSERT_EQ(first_rejected_byte(c, "[]"), -1);
  ASSERT_TRUE(c.accept(kByteEog).is_ok());
  EXPECT_EQ(c.accept('1').code(), StatusCode::kOutOfRange);
  std::vector<float> logits(258, 0.0f);
  EXPECT_EQ(c.mask(logits).code(), StatusCode::kOutOfRange);
}

TEST(JsonSyntax, NoTokenAllowedIsAnError) {
  // A vocabulary without '}' cannot close an object: mask() says so.
  std::vector<TokenInfo> tokens = {{"{"}, {"\"a\":1"}, {"", true, true}};
  auto vocab = TokenVocabulary::create(tokens);
  ASSERT_TRUE(vocab.is_ok());
  auto c = JsonConstraint::create(*JsonGrammar::any_json(), *vocab);
  ASSERT_TRUE(c.is_ok());
  ASSERT_TRUE(c->accept(0).is_ok());
  ASSERT_TRUE(c->accept(1).is_ok());
  std::vector<float> logits(3, 0.0f);
  Status s = c->mask(logits);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no token"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace minfer::grammar
