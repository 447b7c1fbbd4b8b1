// Checks the tokenizers against llama.cpp: its own Qwen2 test vectors, and the
// goldens tools/gen_tokenizer_goldens.py recorded from llama.cpp.
#include <gtest/gtest.h>
#include "gguf/file.h"
#include "test_models.h"
#include "tokenizer/gguf_vocab.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "tokenizer/hf_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_dump_testutil.h"

namespace minfer::tokenizer {
namespace {

using testing::GoldenCase;
using testing::ids_to_string;

const std::string kQwen2Dir = std::string(MINFER_SHARED_DIR) + "/data/qwen2-tokenizer";
const std::string kGolden = std::string(MINFER_TEST_DATA_DIR) + "/golden";

std::string escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

const Tokenizer& qwen2() {
  static const Tokenizer* tok = [] {
    Result<Vocab> v = load_hf_vocab(kQwen2Dir);
    EXPECT_TRUE(v.is_ok()) << v.message();
    Result<Tokenizer> t = Tokenizer::create(std::move(v).value());
    EXPECT_TRUE(t.is_ok()) << t.message();
    return new Tokenizer(std::move(t).value());
  }();
  return *tok;
}

// Runs every case; reports each mismatch and the totals.
void check_cases(const Tokenizer& tok, const std::vector<GoldenCase>& cases, const char* name) {
  int ids_ok = 0;
  int detok_ok = 0;
  for (const GoldenCase& c : cases) {
    Result<std::vector<int32_t>> got = tok.encode(c.text, c.add_special, c.parse_special);
    ASSERT_TRUE(got.is_ok()) << got.message();
    if (*got == c.ids) {
      ++ids_ok;
    } else {
      ADD_FAILURE() << name << ": \"" << escape(c.text) << "\" add_special=" << c.add_special
                    << " parse_special=" << c.parse_special << "\n  want " << ids_to_string(c.ids)
                    << "\n  got  " << ids_to_string(*got);
    }
    const std::string text = tok.decode(c.ids);
    if (text == c.detok) {
      ++detok_ok;
    } else {
      ADD_FAILURE() << name << ": decode of " << ids_to_string(c.ids) << "\n  want \""
                    << escape(c.detok) << "\"\n  got  \"" << escape(text) << "\"";
    }
  }
  std::printf("%s: ids %d/%zu, detokenization %d/%zu\n", name, ids_ok, cases.size(), detok_ok,
              cases.size());
}

TEST(Qwen2Golden, LlamaCppTestVectors) {
  Result<std::string> inp = testing::read_file(kQwen2Dir + "/ggml-vocab-qwen2.gguf.inp");
  Result<std::string> out = testing::read_file(kQwen2Dir + "/ggml-vocab-qwen2.gguf.out");
  ASSERT_TRUE(inp.is_ok() && out.is_ok());
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < inp->size();) {
    size_t end = inp->find(sep, pos);
    if (end == std::string::npos) end = inp->size();
    inputs.push_back(inp->substr(pos, end - pos));
    pos = end + sep.size();
  }
  std::vector<std::vector<int32_t>> expected;
  std::istringstream lines(*out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::vector<int32_t> ids;
    for (int32_t id; f >> id;) ids.push_back(id);
    expected.push_back(ids);
  }
  ASSERT_EQ(inputs.size(), expected.size());
  int ok = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Result<std::vector<int32_t>> got = qwen2().encode(inputs[i], false, false);
    ASSERT_TRUE(got.is_ok()) << got.message();
    if (*got == expected[i]) {
      ++ok;
    } else {
      ADD_FAILURE() << "\"" << escape(inputs[i]) << "\"\n  want " << ids_to_string(expected[i])
                    << "\n  got  " << ids_to_string(*got);
    }
    EXPECT_EQ(qwen2().decode(*got), inputs[i]);
  }
  std::printf("qwen2 llama.cpp vectors: %d/%zu\n", ok, inputs.size());
}

TEST(Qwen2Golden, LlamaCppGoldens) {
  Result<std::vector<GoldenCase>> cases = testing::load_golden(kGolden + "/qwen2.json");
  ASSERT_TRUE(cases.is_ok()) << cases.message();
  check_cases(qwen2(), *cases, "qwen2");
}

TEST(Qwen2Golden, RandomInputs) {
  Result<std::vector<GoldenCase>> cases = testing::load_golden(kGolden + "/qwen2_random.json");
  ASSERT_TRUE(cases.is_ok()) << cases.message();
  check_cases(qwen2(), *cases, "qwen2_random");
}

// The Qwen2 vocabulary under the other pre-tokenizers exercises their regexes
// (and Llama 3's whole-word lookup) against llama.cpp.
void check_with_pre(const std::string& pre, const std::string& golden) {
  HfVocabOptions options;
  options.pre = pre;
  Result<Vocab> v = load_hf_vocab(kQwen2Dir, options);
  ASSERT_TRUE(v.is_ok()) << v.message();
  Result<Tokenizer> tok = Tokenizer::create(std::move(v).value());
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  Result<std::vector<GoldenCase>> cases = testing::load_golden(kGolden + "/" + golden + ".json");
  ASSERT_TRUE(cases.is_ok()) << cases.message();
  check_cases(*tok, *cases, golden.c_str());
}

TEST(Qwen2Golden, Llama3PreTokenizer) {
  check_with_pre("llama-bpe", "qwen2_pre_llama_bpe");
}
TEST(Qwen2Golden, DefaultPreTokenizer) {
  check_with_pre("default", "qwen2_pre_default");
}
TEST(Qwen2Golden, O200kPreTokenizer) {
  check_with_pre("gpt-4o", "qwen2_pre_gpt_4o");
}

TEST(SpmGolden, SmallHandMadeVocab) {
  Result<Vocab> v = testing::load_vocab_dump(kGolden + "/spm_small.vocab");
  ASSERT_TRUE(v.is_ok()) << v.message();
  Result<Tokenizer> tok = Tokenizer::create(std::move(v).value());
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  Result<std::vector<GoldenCase>> cases = testing::load_golden(kGolden + "/spm_small.json");
  ASSERT_TRUE(cases.is_ok()) << cases.message();
  check_cases(*tok, *cases, "spm_small");
}

// The real Gemma 3 vocabulary (262k tokens), read from the model file by our
// GGUF reader.
TEST(Gemma3Golden, RealVocab) {
  const std::string path = minfer::testing::gemma3_model_path();
  ASSERT_FALSE(path.empty()) << minfer::testing::kMissingGemma3;
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.is_ok()) << file.message();
  Result<Vocab> v = vocab_from_gguf(**file);
  ASSERT_TRUE(v.is_ok()) << v.message();
  Result<Tokenizer> tok = Tokenizer::create(std::move(v).value());
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  for (const char* name : {"gemma3", "gemma3_random"}) {
    Result<std::vector<GoldenCase>> cases =
        testing::load_golden(kGolden + "/" + std::string(name) + ".json");
    ASSERT_TRUE(cases.is_ok()) << cases.message();
    check_cases(*tok, *cases, name);
  }
}

}  // namespace
}  // namespace minfer::tokenizer
