#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace minfer::tokenizer {
namespace {

std::vector<std::string> pieces(const RegexSplitter& splitter, const std::string& text) {
  std::vector<std::string> out;
  for (const auto& [offset, length] : splitter.split(text))
    out.push_back(text.substr(offset, length));
  return out;
}

// The o200k pattern (pre "gpt-4o") against Python's `regex` module over the
// same pattern (tests/tokenizer/golden/o200k_splits.json, written by
// tools/gen_pretokenizer_goldens.py).
TEST(PreTokenizer, O200kMatchesPythonRegex) {
  std::ifstream in(std::string(MINFER_TEST_DATA_DIR) + "/golden/o200k_splits.json");
  ASSERT_TRUE(in) << "o200k_splits.json missing";
  std::stringstream buf;
  buf << in.rdbuf();
  const nlohmann::json golden = nlohmann::json::parse(buf.str());
  Result<std::vector<std::string>> patterns = pre_tokenizer_patterns("gpt-4o");
  ASSERT_TRUE(patterns.is_ok()) << patterns.message();
  Result<RegexSplitter> splitter = RegexSplitter::create(*patterns);
  ASSERT_TRUE(splitter.is_ok()) << splitter.message();
  size_t checked = 0;
  for (const auto& c : golden.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    EXPECT_EQ(pieces(*splitter, text), c.at("pieces").get<std::vector<std::string>>())
        << "text: " << text;
    ++checked;
  }
  EXPECT_GT(checked, 300u);
}

TEST(PreTokenizer, O200kSplitsCaseRunsAndKeepsContractions) {
  Result<std::vector<std::string>> patterns = pre_tokenizer_patterns("llama4");
  ASSERT_TRUE(patterns.is_ok()) << patterns.message();
  Result<RegexSplitter> splitter = RegexSplitter::create(*patterns);
  ASSERT_TRUE(splitter.is_ok()) << splitter.message();
  EXPECT_EQ(pieces(*splitter, "HelloWorld it's"),
            (std::vector<std::string>{"Hello", "World", " it's"}));
  EXPECT_EQ(pieces(*splitter, "1234567"), (std::vector<std::string>{"123", "456", "7"}));
}

TEST(PreTokenizer, UnknownNameIsAnErrorNamingIt) {
  Result<std::vector<std::string>> patterns = pre_tokenizer_patterns("no-such-pre");
  ASSERT_FALSE(patterns.is_ok());
  EXPECT_NE(patterns.message().find("no-such-pre"), std::string::npos);
}

}  // namespace
}  // namespace minfer::tokenizer
