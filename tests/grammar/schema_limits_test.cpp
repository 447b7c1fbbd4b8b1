// The schema compiler's bounds (json_grammar.h, "Limits"): schemas whose shape
// would drive unbounded recursion, unbounded cost or a failure in the middle
// of generation are refused at compile time with kInvalidArgument naming the
// limit, and schemas just inside the limits still compile and generate.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/json_constraint.h"
#include "grammar/json_grammar.h"
#include "grammar_testutil.h"

namespace minfer::grammar {
namespace {

using nlohmann::ordered_json;
using testing::accepts_whole;
using testing::byte_vocabulary;
using testing::first_rejected_byte;

// Expects a kInvalidArgument error whose message holds every one of `parts`.
void expect_refused(const Result<std::shared_ptr<const JsonGrammar>>& g,
                    std::initializer_list<const char*> parts) {
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << g.message();
  for (const char* part : parts) {
    EXPECT_NE(g.message().find(part), std::string::npos) << g.message() << " lacks " << part;
  }
}

// {"type":"array","items":{"type":"array","items":...}}, `depth` arrays, the
// innermost holding integers.
ordered_json nested_arrays(int depth, int min_items) {
  ordered_json s = {{"type", "integer"}};
  for (int i = 0; i < depth; ++i) {
    ordered_json a = {{"type", "array"}, {"items", std::move(s)}};
    if (min_items > 0) a["minItems"] = min_items;
    s = std::move(a);
  }
  return s;
}

TEST(SchemaLimits, DeeplyNestedItemsAreRefusedNotACrash) {
  expect_refused(JsonGrammar::from_schema(nested_arrays(2000, 0)),
                 {"kMaxSchemaDepth", "/items/items/items"});
}

TEST(SchemaLimits, LongRefChainIsRefused) {
  // d0 -> d1 -> ... -> d9999: two levels of JSON, 10,000 levels of $ref.
  ordered_json defs = ordered_json::object();
  constexpr int kChain = 10000;
  for (int i = 0; i < kChain; ++i) {
    defs["d" + std::to_string(i)] = {{"$ref", "#/$defs/d" + std::to_string(i + 1)}};
  }
  defs["d" + std::to_string(kChain)] = {{"type", "integer"}};
  const ordered_json schema = {{"$defs", defs}, {"$ref", "#/$defs/d0"}};
  expect_refused(JsonGrammar::from_schema(schema), {"kMaxSchemaDepth", "/$defs/d"});
}

TEST(SchemaLimits, DeepValuesAndDocumentsAreRefusedNotACrash) {
  // A const nested 100,000 deep: never generable (kMaxNesting), never dumped.
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  ordered_json schema = ordered_json::object();
  schema["const"] = ordered_json::parse(deep);  // moved in: the test copies nothing deep
  expect_refused(JsonGrammar::from_schema(schema), {"no JSON value satisfies"});
  // The nlohmann::json overload must not copy a 100,000-deep document.
  nlohmann::json doc = {{"type", "array"}};
  doc["default"] = nlohmann::json::parse(deep);
  expect_refused(JsonGrammar::from_schema(doc), {"kMaxSchemaDepth"});
}

TEST(SchemaLimits, RecursiveSchemasStillCompile) {
  const char* tree = R"({"$defs":{"node":{"type":"object","properties":{
      "value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["value","children"]}},"$ref":"#/$defs/node"})";
  auto g = JsonGrammar::from_schema(ordered_json::parse(tree));
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_TRUE(accepts_whole(*g, R"({"value":1,"children":[{"value":2,"children":[]}]})"));
  // Items nested 60 deep (within kMaxNesting, and within kMaxSchemaDepth).
  ASSERT_TRUE(JsonGrammar::from_schema(nested_arrays(60, 1)).is_ok());
}

TEST(SchemaLimits, HugeEnumIsRefusedQuickly) {
  ordered_json values = ordered_json::array();
  for (int i = 0; i < 100000; ++i) values.push_back("value number " + std::to_string(i));
  const auto t0 = std::chrono::steady_clock::now();
  expect_refused(JsonGrammar::from_schema(ordered_json{{"enum", values}}),
                 {"kMaxBranching", "1024"});
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms, 1000.0);  // refused before any per-value work
}

TEST(SchemaLimits, EnumAtTheLimitCompilesAndGenerates) {
  ordered_json values = ordered_json::array();
  for (int i = 0; i < 1024; ++i) values.push_back("value number " + std::to_string(i));
  auto g = JsonGrammar::from_schema(ordered_json{{"enum", values}});
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_TRUE(accepts_whole(*g, R"("value number 1023")"));
  EXPECT_FALSE(accepts_whole(*g, R"("value number 1024")"));
}

TEST(SchemaLimits, WideUnionsAreRefused) {
  // Two enums that are each within the limit, but whose union is not.
  ordered_json a = ordered_json::array();
  ordered_json b = ordered_json::array();
  for (int i = 0; i < 1000; ++i) {
    a.push_back(i);
    b.push_back("s" + std::to_string(i));
  }
  const ordered_json schema = {{"anyOf", {{{"enum", a}}, {{"enum", b}}}}};
  expect_refused(JsonGrammar::from_schema(schema), {"kMaxBranching"});
}

ordered_json many_properties(int n, bool required) {
  ordered_json props = ordered_json::object();
  ordered_json names = ordered_json::array();
  for (int i = 0; i < n; ++i) {
    props["p" + std::to_string(i)] = {{"type", "integer"}};
    names.push_back("p" + std::to_string(i));
  }
  ordered_json s = {{"type", "object"}, {"properties", props}};
  if (required) s["required"] = names;
  return s;
}

TEST(SchemaLimits, TooManyOptionalPropertiesAreRefused) {
  expect_refused(JsonGrammar::from_schema(many_properties(10000, false)), {"kMaxBranching"});
  // Two objects of 1000 optional properties each open 2000 key states at '"'.
  const ordered_json two = {
      {"anyOf", {many_properties(1000, false), many_properties(1000, false)}}};
  expect_refused(JsonGrammar::from_schema(two), {"kMaxBranching"});
}

TEST(SchemaLimits, ManyRequiredPropertiesCompileAndGenerate) {
  auto g = JsonGrammar::from_schema(many_properties(5000, true));
  ASSERT_TRUE(g.is_ok()) << g.message();
  std::string text = "{";
  for (int i = 0; i < 5000; ++i) text += (i ? ",\"p" : "\"p") + std::to_string(i) + "\":1";
  EXPECT_TRUE(accepts_whole(*g, text + "}"));
}

TEST(SchemaLimits, TooManyPropertiesInAllAreRefused) {
  ordered_json props = ordered_json::object();
  for (int i = 0; i < 40; ++i) props["o" + std::to_string(i)] = many_properties(1000, true);
  expect_refused(JsonGrammar::from_schema(ordered_json{{"type", "object"}, {"properties", props}}),
                 {"kMaxGrammarNodes"});
}

TEST(SchemaLimits, LongLiteralsAreRefused) {
  const ordered_json schema = {{"const", std::string(300 * 1024, 'x')}};
  expect_refused(JsonGrammar::from_schema(schema), {"kMaxLiteralBytes"});
}

TEST(SchemaLimits, NestingBeyondTheRecognizerIsRefused) {
  // Every value needs 70 open arrays.
  expect_refused(JsonGrammar::from_schema(nested_arrays(70, 1)), {"kMaxNesting", "70"});
  // Required properties nested 70 deep.
  ordered_json s = {{"type", "integer"}};
  for (int i = 0; i < 70; ++i) {
    s = {{"type", "object"}, {"properties", {{"x", std::move(s)}}}, {"required", {"x"}}};
  }
  expect_refused(JsonGrammar::from_schema(s), {"kMaxNesting"});
  // Through $ref: 70 definitions, each an array of the next.
  ordered_json defs = ordered_json::object();
  for (int i = 0; i < 70; ++i) {
    defs["a" + std::to_string(i)] = {{"type", "array"},
                                     {"minItems", 1},
                                     {"items", {{"$ref", "#/$defs/a" + std::to_string(i + 1)}}}};
  }
  defs["a70"] = {{"type", "null"}};
  expect_refused(JsonGrammar::from_schema(ordered_json{{"$defs", defs}, {"$ref", "#/$defs/a0"}}),
                 {"kMaxNesting"});
  // Optional nesting is fine: the arrays may be empty.
  auto g = JsonGrammar::from_schema(nested_arrays(70, 0));
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_TRUE(accepts_whole(*g, "[[[]]]"));
}

TEST(SchemaLimits, AnOptionalValueTooDeepForWhereItSitsIsNeverStarted) {
  // 10 nested objects; the innermost has an optional "deep" whose value needs
  // 60 more levels (70 in all) and a required "z". "deep" must not be offered.
  ordered_json s = {{"type", "object"},
                    {"properties", {{"deep", nested_arrays(60, 1)}, {"z", {{"type", "null"}}}}},
                    {"required", {"z"}}};
  for (int i = 0; i < 9; ++i) {
    s = {{"type", "object"}, {"properties", {{"a", std::move(s)}}}, {"required", {"a"}}};
  }
  auto g = JsonGrammar::from_schema(s);
  ASSERT_TRUE(g.is_ok()) << g.message();
  std::string prefix;
  for (int i = 0; i < 9; ++i) prefix += "{\"a\":";
  prefix += "{\"";
  auto c = JsonConstraint::create(*g, byte_vocabulary());
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(first_rejected_byte(*c, prefix + "d"), static_cast<int>(prefix.size()));
  std::string whole = prefix + "z\":null";
  for (int i = 0; i < 10; ++i) whole += "}";
  EXPECT_TRUE(accepts_whole(*g, whole));
}

TEST(SchemaLimits, BuildingFromNodesChecksTheLimitsToo) {
  // A graph that skips the compiler: a union of 5000 literals.
  std::vector<Node> nodes(1);
  for (int i = 0; i < 5000; ++i) {
    Node n;
    n.kind = NodeKind::kLiteral;
    n.text = std::to_string(i);
    nodes[0].alternatives.push_back(static_cast<int32_t>(nodes.size()));
    nodes.push_back(std::move(n));
  }
  expect_refused(JsonGrammar::from_nodes(nodes, 0), {"kMaxBranching"});
}

}  // namespace
}  // namespace minfer::grammar
