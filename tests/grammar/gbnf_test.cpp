// The GBNF parser (grammar/gbnf.h) and the general recognizer behind
// GbnfConstraint: every construct, errors with their line and column, the
// limits, and accept/reject sets for several grammars fed byte by byte.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/gbnf_constraint.h"
#include "grammar_testutil.h"

namespace minfer::grammar {
namespace {

using testing::byte_vocabulary;
using testing::kByteEog;

std::shared_ptr<const GbnfGrammar> parse_ok(const std::string& text) {
  auto g = GbnfGrammar::parse(text);
  EXPECT_TRUE(g.is_ok()) << text << ": " << g.message();
  return g.is_ok() ? *g : nullptr;
}

// The whole text is a text of the grammar (fed one byte token at a time,
// then EOG), as the sampler would drive it.
bool accepts(const std::shared_ptr<const GbnfGrammar>& g, const std::string& text) {
  auto c = GbnfConstraint::create(g, byte_vocabulary());
  if (!c.is_ok()) return false;
  for (unsigned char b : text) {
    std::vector<uint8_t> allowed;
    if (!c->allowed_tokens(allowed).is_ok() || !allowed[b]) return false;
    if (!c->accept(b).is_ok()) return false;
  }
  std::vector<uint8_t> allowed;
  if (!c->allowed_tokens(allowed).is_ok() || !allowed[kByteEog]) return false;
  return c->accept(kByteEog).is_ok();
}

void expect_set(const std::string& grammar, const std::vector<std::string>& yes,
                const std::vector<std::string>& no) {
  auto g = parse_ok(grammar);
  ASSERT_NE(g, nullptr);
  for (const std::string& s : yes) EXPECT_TRUE(accepts(g, s)) << grammar << " should accept " << s;
  for (const std::string& s : no) EXPECT_FALSE(accepts(g, s)) << grammar << " should reject " << s;
}

void expect_error(const std::string& grammar, std::initializer_list<const char*> parts) {
  auto g = GbnfGrammar::parse(grammar);
  ASSERT_FALSE(g.is_ok()) << grammar;
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  for (const char* part : parts) {
    EXPECT_NE(g.message().find(part), std::string::npos) << g.message() << " lacks " << part;
  }
}

TEST(Gbnf, LiteralsAndEscapes) {
  expect_set(R"g(root ::= "ab" "c")g", {"abc"}, {"", "ab", "abcd", "abd"});
  expect_set(R"g(root ::= "\n\t\r\\\"")g", {"\n\t\r\\\""}, {"n"});
  expect_set(R"g(root ::= "\x41\u00e9\U0001F600")g", {"A\xc3\xa9\xf0\x9f\x98\x80"}, {"A"});
  expect_set("root ::= \"\xc3\xa9t\xc3\xa9\"", {"\xc3\xa9t\xc3\xa9"}, {"ete"});
  expect_set(R"g(root ::= "")g", {""}, {"a"});
}

TEST(Gbnf, AlternationSequenceAndGroups) {
  expect_set(R"g(root ::= "a" | "b" "c" | ("d" | "e") "f")g", {"a", "bc", "df", "ef"},
             {"b", "c", "f", "ad", "def"});
  expect_set("root ::= (\n  \"x\" # a comment\n  | \"y\"\n)\n", {"x", "y"}, {"xy"});
  expect_set("root ::= \"a\" |\n  \"b\"", {"a", "b"}, {"ab"});
  expect_set("root ::= item item\nitem ::= \"p\" | \"q\"", {"pp", "pq", "qp"}, {"p", "ppp"});
}

TEST(Gbnf, CharacterClasses) {
  expect_set("root ::= [a-cx]", {"a", "b", "c", "x"}, {"d", "w", "", "ab"});
  expect_set("root ::= [^a-c\\n]", {"d", "\xc3\xa9", "\xe4\xb8\xad"}, {"a", "\n", ""});
  expect_set(R"g(root ::= [\]\-\\])g", {"]", "-", "\\"}, {"a"});
  expect_set("root ::= [\xc3\xa0-\xc3\xbf]+", {"\xc3\xa0\xc3\xa9"}, {"a", "\xc3\x9f"});
  expect_set("root ::= .", {"a", "\n", "\xf0\x9f\x98\x80"}, {"", "ab"});
  expect_set("root ::= [a-]", {"a", "-"}, {"b"});
}

TEST(Gbnf, Repetitions) {
  expect_set("root ::= \"a\"*", {"", "a", "aaaa"}, {"b", "ab"});
  expect_set("root ::= \"ab\"+", {"ab", "abab"}, {"", "a", "aba"});
  expect_set("root ::= \"a\"? \"b\"", {"b", "ab"}, {"aab", "a"});
  expect_set("root ::= [0-9]{3}", {"123"}, {"12", "1234"});
  expect_set("root ::= [0-9]{2,}", {"12", "12345"}, {"1", ""});
  expect_set("root ::= [0-9]{1,3}", {"1", "12", "123"}, {"", "1234"});
  expect_set("root ::= [0-9]{0,2} \"x\"", {"x", "1x", "12x"}, {"123x"});
  expect_set("root ::= (\"a\" | \"bc\"){2}", {"aa", "abc", "bcbc"}, {"a", "abcbc"});
  expect_set("root ::= [a]{ 2 , 3 }", {"aa", "aaa"}, {"a"});
}

TEST(Gbnf, Arithmetic) {
  const std::string g = R"g(root  ::= expr
expr  ::= term ([-+*/] term)*
term  ::= num | "(" space expr ")" space
num   ::= [0-9]+ space
space ::= [ \t\n]*
)g";
  expect_set(g, {"1", "1+2", "( 1 +2) *3", "((4))/5 ", "12*(3-4)"},
             {"", "+", "1+", "(1", "1)", "a", "1 2"});
}

TEST(Gbnf, JsonLike) {
  const std::string g = R"g(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)g";
  expect_set(
      g, {"{}", R"({"a": 1})", R"({"a":[1, 2.5, "x\u00e9"], "b": {"c": null}})", "{\"k\": true}\n"},
      {"", "[]", R"({"a" 1})", R"({"a": 01x})", R"({"a": "\q"})", "{\"a\": [}"});
}

TEST(Gbnf, Unicode) {
  expect_set("root ::= [\\u4e00-\\u9fff]+ \"\xe3\x80\x82\"",
             {"\xe4\xb8\xad\xe6\x96\x87\xe3\x80\x82"}, {"a\xe3\x80\x82", "\xe4\xb8\xad"});
  // A lead byte is allowed only where a code point with that prefix can come.
  auto g = parse_ok("root ::= [\\u00e0-\\u00ff]");
  auto c = GbnfConstraint::create(g, byte_vocabulary());
  ASSERT_TRUE(c.is_ok());
  std::vector<uint8_t> allowed;
  ASSERT_TRUE(c->allowed_tokens(allowed).is_ok());
  EXPECT_TRUE(allowed[0xC3]);
  EXPECT_FALSE(allowed[0xC2]);
  EXPECT_FALSE(allowed[0xE4]);
  EXPECT_FALSE(allowed['a']);
  EXPECT_FALSE(allowed[kByteEog]);
  ASSERT_TRUE(c->accept(0xC3).is_ok());
  EXPECT_FALSE(c->complete());
  ASSERT_TRUE(c->allowed_tokens(allowed).is_ok());
  EXPECT_TRUE(allowed[0xA0]);
  EXPECT_FALSE(allowed[0x9F]);
  EXPECT_FALSE(c->accept(0x41).is_ok());
  // Overlong forms, surrogates and bytes past U+10FFFF are not code points.
  expect_set("root ::= \".\" | [\\u0000-\\U0010FFFF]", {".", "\xed\x9f\xbf"},
             {"\xe0\x80\xae", "\xc0\xae", "\xed\xa0\x80", "\xf4\x90\x80\x80"});
}

TEST(Gbnf, EndOfGenerationOnlyWhereTheGrammarEnds) {
  auto g = parse_ok("root ::= \"ab\" \"c\"?");
  auto c = GbnfConstraint::create(g, byte_vocabulary());
  ASSERT_TRUE(c.is_ok());
  EXPECT_FALSE(c->accept(kByteEog).is_ok());
  ASSERT_TRUE(c->accept_bytes("ab").is_ok());
  std::vector<uint8_t> allowed;
  ASSERT_TRUE(c->allowed_tokens(allowed).is_ok());
  EXPECT_TRUE(allowed[kByteEog]);
  EXPECT_TRUE(allowed['c']);
  ASSERT_TRUE(c->accept('c').is_ok());
  ASSERT_TRUE(c->allowed_tokens(allowed).is_ok());
  for (int b = 0; b < 256; ++b) EXPECT_FALSE(allowed[b]) << b;
  EXPECT_FALSE(allowed[testing::kByteSpecial]);
  ASSERT_TRUE(c->accept(kByteEog).is_ok());
  EXPECT_EQ(c->accept('c').code(), StatusCode::kOutOfRange);
}

TEST(Gbnf, SyntaxErrorsNameLineAndColumn) {
  expect_error("root ::= \"a\"\nfoo ::= \"b", {"line 2, column 11", "'\"'"});
  expect_error("root ::= [a-z", {"line 1, column 14", "']'"});
  expect_error("root = \"a\"", {"line 1, column 6", "'::='"});
  expect_error("root ::= (\"a\"", {"line 1, column 14", "')'"});
  expect_error("root ::= \"\\q\"", {"line 1, column 11", "escape"});
  expect_error("root ::= \"\\x4\"", {"hex digits"});
  expect_error("root ::= *", {"line 1, column 10", "an element before '*'"});
  expect_error("root ::= \"a\"{3,1}", {"maximum not below the minimum"});
  expect_error("root ::= \"a\" )", {"line 1, column 14"});
  expect_error("root ::= [z-a]", {"range end"});
  expect_error("root ::= []", {"empty class"});
  expect_error("  \n ::= \"a\"", {"line 2, column 2", "a rule name"});
}

TEST(Gbnf, SemanticErrorsNameTheRule) {
  expect_error("root ::= item\n", {"line 1, column 10", "rule 'item' is not defined"});
  expect_error("item ::= \"a\"", {"no rule 'root'"});
  expect_error("root ::= \"a\"\nroot ::= \"b\"", {"line 2, column 1", "'root' is defined twice"});
  expect_error("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", {"'expr' is left-recursive"});
  expect_error("root ::= a\na ::= b \"x\"\nb ::= \"\" | a", {"left-recursive"});
  expect_error("root ::= (\"a\"?)*", {"'root' is left-recursive", "empty text"});
}

TEST(Gbnf, LimitsRefuseQuickly) {
  const auto t0 = std::chrono::steady_clock::now();
  expect_error("root ::= \"a\"{1001}", {"up to 1000"});
  expect_error(std::string("root ::= ") + std::string(100, '(') + "\"a\"" + std::string(100, ')'),
               {"nested at most 64"});
  expect_error("root ::= \"" + std::string(kMaxGbnfTextBytes, 'a') + "\"", {"bytes, above"});
  expect_error("root ::= \"" + std::string(kMaxGbnfElements + 10, 'a') + "\"", {"elements"});
  std::string many = "root ::=";
  for (int i = 0; i < 10; ++i) many += " \"a\"{0,1000}";
  expect_error(many, {"at most 8192 rules"});
  expect_error("root ::= \"a\"{99999999999999999999}", {"up to 1000"});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2.0);
  // Just inside: a thousand repetitions and 64 nested groups still work.
  expect_set("root ::= \"a\"{1000}", {std::string(1000, 'a')}, {std::string(999, 'a')});
  expect_set(std::string("root ::= ") + std::string(64, '(') + "\"a\"" + std::string(64, ')'),
             {"a"}, {""});
}

TEST(Gbnf, AmbiguityIsBoundedNotExponential) {
  // Every split of the text is a parse: the stacks are deduplicated, so the
  // set stays small however long the text.
  auto g = parse_ok("root ::= x*\nx ::= \"a\" | \"a\" \"a\" | \"a\" \"a\" \"a\"");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts(g, std::string(300, 'a')));
  // Nesting that grows with the text stops at the depth bound with an error.
  auto deep = parse_ok("root ::= \"(\" root \")\" | \"x\"");
  auto c = GbnfConstraint::create(deep, byte_vocabulary());
  ASSERT_TRUE(c.is_ok());
  Status s = c->accept_bytes(std::string(kMaxGbnfStackDepth + 10, '('));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.message();
  EXPECT_TRUE(accepts(deep, "((x))"));
}

}  // namespace
}  // namespace minfer::grammar
