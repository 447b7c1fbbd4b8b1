// Schema conformance by random walks: mask a random logits row, take the best
// allowed token, repeat until EOG, over multi-byte vocabularies whose tokens
// cross structural boundaries and split UTF-8 characters. Every text must
// parse and validate (tests/grammar/grammar_testutil.cpp's validator), and
// mask() must agree with accept() token by token.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar_testutil.h"

namespace minfer::grammar {
namespace {

using nlohmann::ordered_json;

const std::vector<const char*>& walk_schemas() {
  static const std::vector<const char*> k = {
      R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":8},
          "age":{"type":"integer"},"email":{"type":"string"},
          "tags":{"type":"array","items":{"type":"string"},"maxItems":3}},
          "required":["name","age"]})",
      R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"number"},
          "children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},
          "required":["value"]}},"$ref":"#/$defs/node"})",
      R"({"type":"object","properties":{"color":{"enum":["red","green","blue"]},
          "version":{"const":2},"mode":{"type":"string","enum":["a",1,"b",null]}},
          "required":["color","version"]})",
      R"({"anyOf":[{"type":"string","maxLength":2},{"type":"integer"},
          {"type":"array","prefixItems":[{"type":"boolean"},{"type":"null"}],"items":false}]})",
      R"({"type":"object","properties":{"id":{"type":"integer"}},
          "additionalProperties":{"type":"boolean"}})",
      R"({"type":"array","items":{"type":["number","null"]},"minItems":2,"maxItems":3})",
      R"({"type":"object","properties":{"kind":{"const":"leaf"},"label":{"type":"string"},
          "n":{"type":"number"}},"required":["kind","label","n"],"additionalProperties":false})",
      R"({"oneOf":[{"type":"boolean"},{"type":"string","minLength":3}]})",
      R"({"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"array",
          "items":{"type":"object","properties":{"c":{"type":"string","maxLength":4}},
          "required":["c"]}}},"required":["b"]}},"required":["a"]})",
      R"({"type":"object"})",
      "{}",
  };
  return k;
}

struct Vocabs {
  std::vector<std::shared_ptr<const TokenVocabulary>> all = {testing::byte_vocabulary(),
                                                             testing::multi_byte_vocabulary(0),
                                                             testing::multi_byte_vocabulary(1)};
};

TEST(RandomWalk, GeneratedTextsParseAndValidate) {
  Vocabs vocabs;
  int n_walks = 0;
  for (const char* text : walk_schemas()) {
    const ordered_json schema = ordered_json::parse(text);
    auto g = JsonGrammar::from_schema(schema);
    ASSERT_TRUE(g.is_ok()) << g.message();
    for (size_t v = 0; v < vocabs.all.size(); ++v) {
      ASSERT_NE(vocabs.all[v], nullptr);
      for (uint64_t seed = 0; seed < 12; ++seed) {
        testing::WalkResult w = testing::random_walk(*g, vocabs.all[v], seed * 31 + v, 3000, 40);
        ASSERT_TRUE(w.error.empty())
            << text << " vocab " << v << " seed " << seed << ": " << w.error << " after " << w.text;
        ASSERT_TRUE(w.reached_eog) << text << " vocab " << v << ": " << w.text;
        const ordered_json value = ordered_json::parse(w.text, nullptr, false);
        ASSERT_FALSE(value.is_discarded()) << "does not parse: " << w.text;
        EXPECT_EQ(testing::validate(value, schema, schema), "")
            << text << " vocab " << v << ": " << w.text;
        ++n_walks;
      }
    }
  }
  EXPECT_EQ(n_walks, static_cast<int>(walk_schemas().size()) * 3 * 12);
}

// Termination: a walk that prefers closing tokens from the start ends soon.
TEST(RandomWalk, ClosingWalksTerminate) {
  Vocabs vocabs;
  for (const char* text : walk_schemas()) {
    auto g = JsonGrammar::from_schema(ordered_json::parse(text));
    ASSERT_TRUE(g.is_ok()) << g.message();
    for (size_t v = 0; v < vocabs.all.size(); ++v) {
      for (uint64_t seed = 100; seed < 110; ++seed) {
        testing::WalkResult w = testing::random_walk(*g, vocabs.all[v], seed, 400, 0);
        EXPECT_TRUE(w.error.empty()) << w.error;
        EXPECT_TRUE(w.reached_eog)
            << text << " vocab " << v << " after " << w.steps << " steps: " << w.text;
      }
    }
  }
}

// mask() and accept() agree on every token at every step of some walks.
TEST(RandomWalk, MaskAgreesWithAccept) {
  Vocabs vocabs;
  const auto& vocab = vocabs.all[1];
  std::mt19937_64 rng(7);
  for (const char* text : walk_schemas()) {
    auto g = JsonGrammar::from_schema(ordered_json::parse(text));
    ASSERT_TRUE(g.is_ok());
    auto c = JsonConstraint::create(*g, vocab);
    ASSERT_TRUE(c.is_ok());
    for (int step = 0; step < 60 && !c->ended(); ++step) {
      std::vector<uint8_t> allowed;
      ASSERT_TRUE(c->allowed_tokens(allowed).is_ok());
      std::vector<int32_t> ok;
      for (int32_t t = 0; t < vocab->size(); ++t) {
        JsonConstraint copy = *c;
        const bool accepted = copy.accept(t).is_ok();
        ASSERT_EQ(accepted, allowed[t] == 1)
            << text << " after \"" << c->text() << "\" token \"" << vocab->token(t).bytes << "\"";
        if (accepted) ok.push_back(t);
      }
      ASSERT_FALSE(ok.empty());
      ASSERT_TRUE(c->accept(ok[rng() % ok.size()]).is_ok());
    }
  }
}

}  // namespace
}  // namespace minfer::grammar
