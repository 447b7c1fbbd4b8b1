// The schema compiler: errors that name the keyword and its path, the
// documented generation rules, and agreement with Python jsonschema on the
// goldens of tools/gen_grammar_goldens.py.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/json_grammar.h"
#include "grammar_testutil.h"

namespace minfer::grammar {
namespace {

using nlohmann::ordered_json;
using testing::accepts_whole;

std::shared_ptr<const JsonGrammar> compile(const char* schema) {
  auto g = JsonGrammar::from_schema(ordered_json::parse(schema));
  EXPECT_TRUE(g.is_ok()) << schema << ": " << g.message();
  return g.is_ok() ? *g : nullptr;
}

TEST(Schema, UnsupportedKeywordsAreNamedWithTheirPath) {
  struct Case {
    const char* schema;
    const char* message;
  };
  const Case cases[] = {
      {R"({"type":"object","properties":{"name":{"type":"string","pattern":"^a"}}})",
       R"(schema: unsupported keyword "pattern" at /properties/name)"},
      {R"({"type":"integer","minimum":0})", R"(schema: unsupported keyword "minimum" at /)"},
      {R"({"type":"array","items":{"type":"array","uniqueItems":true}})",
       R"(schema: unsupported keyword "uniqueItems" at /items)"},
      {R"({"$defs":{"a":{"type":"number","multipleOf":2}},"$ref":"#/$defs/a"})",
       R"(schema: unsupported keyword "multipleOf" at /$defs/a)"},
      {R"({"anyOf":[{"type":"string"},{"not":{}}]})", R"(unsupported keyword "not" at /anyOf/1)"},
      {R"({"properties":{"a/b":{"exclusiveMaximum":3}}})",
       R"(unsupported keyword "exclusiveMaximum" at /properties/a~1b)"},
      {R"({"allOf":[{"type":"string"},{"maxLength":3}]})", R"(unsupported keyword "allOf")"},
      {R"({"type":"string","anyOf":[{"maxLength":3}]})",
       R"(unsupported keyword "anyOf" combined with "type" at /)"},
      {R"({"$ref":"http://example.com/s.json"})", R"(unsupported keyword "$ref")"},
      {R"({"$ref":"#/$defs/missing"})", R"("$ref" "#/$defs/missing" names nothing at /)"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})",
       R"(required property "b" is not in "properties" at /)"},
      {R"({"type":"strin"})", R"(unknown type "strin" at /)"},
      {R"({"type":"string","maxLength":-1})", R"("maxLength" must be a non-negative integer)"},
      {R"({"type":"array","items":[{}]})", R"("items" must be a schema)"},
      {R"({"type":"object","patternProperties":{}})", R"(unsupported keyword "patternProperties")"},
      {R"({"type":"string","minLength":3,"maxLength":2})", "no JSON value satisfies"},
      {"false", "no JSON value satisfies"},
      {R"({"enum":[]})", "no JSON value satisfies"},
      {R"({"type":"object","properties":{"a":false},"required":["a"]})", "no JSON value satisfies"},
      {"3", "expected a schema"},
  };
  for (const Case& k : cases) {
    auto g = JsonGrammar::from_schema(ordered_json::parse(k.schema));
    ASSERT_FALSE(g.is_ok()) << k.schema;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << k.schema;
    EXPECT_NE(g.message().find(k.message), std::string::npos) << k.schema << " -> " << g.message();
  }
}

TEST(Schema, AnnotationsAndFormatAreIgnored) {
  auto g = compile(
      R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","title":"t",
          "description":"d","type":"string","format":"email","default":"a","examples":["b"],
          "strict":true})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts_whole(g, R"("not an email")"));
}

TEST(Schema, DeclaredPropertiesInOrderOptionalOnesSkippable) {
  auto g = compile(
      R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"integer"},
          "c":{"type":"integer"}},"required":["a"]})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts_whole(g, R"({"b":1,"a":2,"c":3})"));
  EXPECT_TRUE(accepts_whole(g, R"({"a":2})"));
  EXPECT_TRUE(accepts_whole(g, R"({"a":2,"c":3})"));
  EXPECT_FALSE(accepts_whole(g, R"({"a":2,"b":1})"));  // out of declaration order
  EXPECT_FALSE(accepts_whole(g, R"({"b":1,"c":3})"));  // a is required
  EXPECT_FALSE(accepts_whole(g, R"({})"));
  EXPECT_FALSE(accepts_whole(g, R"({"a":2,"d":3})"));  // absent additionalProperties: false
  // nlohmann::json sorts keys: then the order is alphabetical.
  auto sorted = JsonGrammar::from_schema(nlohmann::json::parse(
      R"({"type":"object","properties":{"b":{},"a":{}},"required":["a","b"]})"));
  ASSERT_TRUE(sorted.is_ok());
  EXPECT_TRUE(accepts_whole(*sorted, R"({"a":1,"b":2})"));
}

TEST(Schema, AdditionalKeysNeverSpellADeclaredName) {
  auto g = compile(
      R"({"type":"object","properties":{"ab":{"type":"integer"}},
          "additionalProperties":{"type":"string"}})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts_whole(g, R"({"a":"x","abc":"y","ab":1,"b":"z"})"));
  EXPECT_FALSE(accepts_whole(g, R"({"ab":1,"ab":"x"})"));
  EXPECT_FALSE(accepts_whole(g, R"({"ab":"x"})"));
  EXPECT_FALSE(accepts_whole(g, R"({"a\u0062":"x"})"));  // no escapes in additional keys
}

TEST(Schema, StringLengthsCountCodePoints) {
  auto g = compile(R"({"type":"string","minLength":2,"maxLength":3})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts_whole(g, "\"\xF0\x9F\x98\x80\xC3\xA9\""));
  EXPECT_TRUE(accepts_whole(g, R"("\uD83D\uDE00\n\u0041")"));
  EXPECT_FALSE(accepts_whole(g, "\"\xF0\x9F\x98\x80\""));
  EXPECT_FALSE(accepts_whole(g, R"("abcd")"));
  EXPECT_FALSE(accepts_whole(g, R"("ab\n\"")"));
}

TEST(Schema, IntegersHaveNoFractionOrExponent) {
  auto g = compile(R"({"type":"integer"})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts_whole(g, "-120"));
  EXPECT_FALSE(accepts_whole(g, "1.0"));
  EXPECT_FALSE(accepts_whole(g, "1e3"));
}

TEST(Schema, RecursiveRefs) {
  auto g = compile(
      R"({"definitions":{"list":{"type":["array","null"],"items":{"$ref":"#/definitions/list"}}},
          "$ref":"#/definitions/list"})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts_whole(g, "[[],[null,[[]]]]"));
  EXPECT_FALSE(accepts_whole(g, "[[1]]"));
  auto self = compile(R"({"type":"array","items":{"$ref":"#"},"maxItems":2})");
  ASSERT_NE(self, nullptr);
  EXPECT_TRUE(accepts_whole(self, "[[],[[]]]"));
  EXPECT_FALSE(accepts_whole(self, "[[],[],[]]"));
}

TEST(Schema, EnumOfStructuredValues) {
  auto g = compile(R"({"enum":[{"a":[1,"x"]},[true],"s",null]})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts_whole(g, R"({"a":[1,"x"]})"));
  EXPECT_TRUE(accepts_whole(g, "[true]"));
  EXPECT_TRUE(accepts_whole(g, "null"));
  EXPECT_FALSE(accepts_whole(g, R"({"a":[1]})"));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Agreement with jsonschema: valid <=> accepted (the valid texts are written
// in the canonical form the grammar generates; see the script).
TEST(Schema, AgreesWithJsonschemaGoldens) {
  const std::string text =
      read_file(std::string(MINFER_TEST_DATA_DIR) + "/golden/schema_cases.json");
  ASSERT_FALSE(text.empty());
  const ordered_json golden = ordered_json::parse(text);
  int n_cases = 0;
  for (const ordered_json& suite : golden["suites"]) {
    auto g = JsonGrammar::from_schema(suite["schema"]);
    ASSERT_TRUE(g.is_ok()) << suite["name"] << ": " << g.message();
    for (const ordered_json& c : suite["cases"]) {
      const std::string t = c["text"].get<std::string>();
      EXPECT_EQ(accepts_whole(*g, t), c["valid"].get<bool>()) << suite["name"] << ": " << t;
      // The independent validator of the random-walk tests agrees too.
      const ordered_json v = ordered_json::parse(t, nullptr, false);
      if (!v.is_discarded()) {
        EXPECT_EQ(testing::validate(v, suite["schema"], suite["schema"]).empty(),
                  c["valid"].get<bool>())
            << "validator on " << suite["name"] << ": " << t;
      }
      ++n_cases;
    }
  }
  EXPECT_GE(n_cases, 80);
}

}  // namespace
}  // namespace minfer::grammar
