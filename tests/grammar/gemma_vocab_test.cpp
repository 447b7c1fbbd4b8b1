// The real Gemma 3 vocabulary (262,144 tokens): TokenVocabulary from the
// tokenizer, random walks to EOG, the cost of mask(), and the cost of the
// largest schemas the limits accept (printed, loosely asserted;
// docs/GRAMMAR.md records them). Skipped when the GGUF is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "base/utf8.h"
#include "gguf/file.h"
#include "grammar/json_constraint.h"
#include "grammar_testutil.h"
#include "test_models.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace minfer::grammar {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

Result<std::shared_ptr<const TokenVocabulary>> gemma_vocabulary() {
  const std::string path = minfer::testing::gemma3_model_path();
  if (path.empty()) return Status::not_found(minfer::testing::kMissingGemma3);
  MINFER_ASSIGN_OR_RETURN(auto file, gguf::File::open(path));
  MINFER_ASSIGN_OR_RETURN(auto v, tokenizer::vocab_from_gguf(*file));
  MINFER_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::create(std::move(v)));
  return TokenVocabulary::from_tokenizer(tok);
}

int32_t token_spelled(const TokenVocabulary& vocab, const std::string& bytes) {
  for (int32_t t = 0; t < vocab.size(); ++t) {
    if (!vocab.token(t).is_special && vocab.token(t).bytes == bytes) return t;
  }
  return -1;
}

// Schemas at the limits of json_grammar.h, each with the prefix (tokens
// spelled exactly so) after which its widest state set opens.
struct LimitCase {
  const char* label;
  ordered_json schema;
  std::vector<std::string> prefix;
};

std::vector<LimitCase> limit_cases() {
  std::vector<LimitCase> cases;
  ordered_json values = ordered_json::array();  // kMaxBranching strings sharing a prefix
  for (int i = 0; i < 1024; ++i) values.push_back("value number " + std::to_string(i));
  cases.push_back({"enum of 1024 strings", {{"enum", values}}, {"\"", "value"}});
  ordered_json optional = ordered_json::object();  // a run of kMaxBranching keys
  for (int i = 0; i < 1024; ++i) {
    optional["field_" + std::to_string(i)] = {{"type", {"string", "integer", "null"}}};
  }
  cases.push_back({"1024 optional properties",
                   {{"type", "object"}, {"properties", optional}, {"required", {"field_1023"}}},
                   {"{\"", "field"}});
  ordered_json branches = ordered_json::array();  // kMaxBranching objects in a union
  for (int i = 0; i < 1024; ++i) {
    branches.push_back({{"type", "object"},
                        {"properties", {{"key_" + std::to_string(i), {{"type", "integer"}}}}},
                        {"required", {"key_" + std::to_string(i)}}});
  }
  cases.push_back({"anyOf of 1024 objects", {{"anyOf", branches}}, {"{\"", "key"}});
  ordered_json groups = ordered_json::object();  // about kMaxGrammarNodes nodes
  for (int g = 0; g < 31; ++g) {
    ordered_json props = ordered_json::object();
    ordered_json names = ordered_json::array();
    for (int i = 0; i < 1000; ++i) {
      props["p" + std::to_string(i)] = {{"type", "integer"}};
      names.push_back("p" + std::to_string(i));
    }
    groups["g" + std::to_string(g)] = {
        {"type", "object"}, {"properties", props}, {"required", names}};
  }
  cases.push_back({"31,000 required properties",
                   {{"type", "object"}, {"properties", groups}, {"required", {"g0"}}},
                   {"{\"", "g"}});
  return cases;
}

TEST(GemmaVocab, CostOfTheLargestAcceptedSchemas) {
  auto vocab = gemma_vocabulary();
  if (vocab.status().code() == StatusCode::kNotFound) GTEST_SKIP() << vocab.message();
  ASSERT_TRUE(vocab.is_ok()) << vocab.message();
  std::vector<float> logits(static_cast<size_t>((*vocab)->size()));
  for (const LimitCase& k : limit_cases()) {
    Clock::time_point t0 = Clock::now();
    auto g = JsonGrammar::from_schema(k.schema);
    ASSERT_TRUE(g.is_ok()) << k.label << ": " << g.message();
    const double compile_ms = ms_since(t0);
    t0 = Clock::now();
    auto c = JsonConstraint::create(*g, *vocab);
    ASSERT_TRUE(c.is_ok()) << c.message();
    const double create_ms = ms_since(t0);
    t0 = Clock::now();
    ASSERT_TRUE(c->mask(logits).is_ok());
    const double first_ms = ms_since(t0);
    double widest_ms = 0;
    for (const std::string& piece : k.prefix) {
      const int32_t t = token_spelled(**vocab, piece);
      ASSERT_GE(t, 0) << piece;
      ASSERT_TRUE(c->accept(t).is_ok()) << k.label << ": " << piece;
      t0 = Clock::now();
      ASSERT_TRUE(c->mask(logits).is_ok());
      widest_ms = std::max(widest_ms, ms_since(t0));
    }
    std::printf(
        "[gemma] %s: %zu nodes, compile %.1f ms, create %.2f ms, first mask %.2f ms "
        "(total %.1f ms); worst mask after %s: %.2f ms\n",
        k.label, (*g)->nodes().size(), compile_ms, create_ms, first_ms,
        compile_ms + create_ms + first_ms, printable_text(c->text()).c_str(), widest_ms);
    // Loose (shared machines); docs/GRAMMAR.md holds the measured numbers.
    EXPECT_LT(compile_ms + create_ms + first_ms, 1000.0) << k.label;
    EXPECT_LT(widest_ms, 1000.0) << k.label;
  }
}

TEST(GemmaVocab, RandomWalksAndMaskCost) {
  const std::string path = minfer::testing::gemma3_model_path();
  if (path.empty()) GTEST_SKIP() << minfer::testing::kMissingGemma3;
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.is_ok()) << file.message();
  auto v = tokenizer::vocab_from_gguf(**file);
  ASSERT_TRUE(v.is_ok()) << v.message();
  auto tok = tokenizer::Tokenizer::create(std::move(v).value());
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  Clock::time_point t0 = Clock::now();
  auto vocab = TokenVocabulary::from_tokenizer(*tok);
  ASSERT_TRUE(vocab.is_ok()) << vocab.message();
  std::printf("[gemma] TokenVocabulary of %d tokens built in %.1f ms (%zu + %zu trie nodes)\n",
              (*vocab)->size(), ms_since(t0), (*vocab)->all_trie().nodes.size(),
              (*vocab)->non_plain_trie().nodes.size());
  ASSERT_FALSE((*vocab)->eog_tokens().empty());

  const char* person =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},
          "age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},
          "required":["name","age","tags"]})";
  struct Walk {
    const char* label;
    std::shared_ptr<const JsonGrammar> grammar;
    ordered_json schema;
  };
  auto any = JsonGrammar::any_json();
  auto schema = JsonGrammar::from_schema(ordered_json::parse(person));
  ASSERT_TRUE(any.is_ok() && schema.is_ok());
  const Walk walks[] = {{"json_object", *any, ordered_json(true)},
                        {"schema", *schema, ordered_json::parse(person)}};
  std::vector<float> logits(static_cast<size_t>((*vocab)->size()));
  for (const Walk& w : walks) {
    for (uint64_t seed = 0; seed < 3; ++seed) {
      auto c = JsonConstraint::create(w.grammar, *vocab);
      ASSERT_TRUE(c.is_ok());
      std::mt19937_64 rng(seed);
      double total_ms = 0, max_ms = 0;
      int steps = 0;
      for (; steps < 400 && !c->ended(); ++steps) {
        uint64_t x = rng() | 1;  // xorshift: 262k draws per step, cheaply
        for (float& l : logits) {
          x ^= x << 13;
          x ^= x >> 7;
          x ^= x << 17;
          l = static_cast<float>(x >> 40) * 0x1p-24f;
        }
        t0 = Clock::now();
        Status s = c->mask(logits);
        const double ms = ms_since(t0);
        ASSERT_TRUE(s.is_ok()) << s.message() << " after " << c->text();
        total_ms += ms;
        max_ms = std::max(max_ms, ms);
        int32_t pick =
            static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        if (steps >= 40) {  // prefer closing: EOG, else a token with '"', '}', ']'
          std::vector<int32_t> closing;
          for (int32_t t = 0; t < (*vocab)->size(); ++t) {
            if (logits[t] == -std::numeric_limits<float>::infinity()) continue;
            if ((*vocab)->token(t).is_eog) {
              closing.assign(1, t);
              break;
            }
            if ((*vocab)->token(t).bytes.find_first_of("\"}]") != std::string::npos) {
              closing.push_back(t);
            }
          }
          if (!closing.empty()) pick = closing[rng() % closing.size()];
        }
        ASSERT_TRUE(c->accept(pick).is_ok());
      }
      ASSERT_TRUE(c->ended()) << w.label << ": " << c->text();
      std::printf("[gemma] %s seed %llu: %d tokens, mask() mean %.2f ms, max %.2f ms: %s\n",
                  w.label, static_cast<unsigned long long>(seed), steps, total_ms / steps, max_ms,
                  printable_text(c->text().substr(0, 80)).c_str());
      const ordered_json value = ordered_json::parse(c->text(), nullptr, false);
      ASSERT_FALSE(value.is_discarded()) << c->text();
      EXPECT_TRUE(value.is_object());
      EXPECT_EQ(testing::validate(value, w.schema, w.schema), "") << c->text();
    }
  }
}

}  // namespace
}  // namespace minfer::grammar
