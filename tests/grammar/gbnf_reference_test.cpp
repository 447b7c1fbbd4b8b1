// GBNF against llama.cpp (tests/grammar/golden/gbnf_llama_cpp.json, written
// by tools/ref/make_gbnf_goldens.py): minfer's parser accepts exactly the
// grammars llama.cpp's does, and every text llama.cpp generated under a
// grammar is a prefix of a text of minfer's grammar — a whole text where
// llama.cpp's generation stopped on its own.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "base/json.h"
#include "grammar/gbnf.h"
#include "grammar/gbnf_constraint.h"
#include "grammar_testutil.h"

namespace minfer::grammar {
namespace {

TEST(GbnfReference, ParsesAndAcceptsWhatLlamaCppDoes) {
  std::ifstream in(std::string(MINFER_TEST_DATA_DIR) + "/golden/gbnf_llama_cpp.json");
  ASSERT_TRUE(in) << "gbnf_llama_cpp.json missing";
  std::stringstream buf;
  buf << in.rdbuf();
  auto golden = parse_json(buf.str());
  ASSERT_TRUE(golden.is_ok()) << golden.message();
  int grammars = 0, texts = 0, whole = 0;
  for (const auto& c : golden->at("cases")) {
    const std::string text = c.at("grammar").get<std::string>();
    auto g = GbnfGrammar::parse(text);
    ASSERT_EQ(g.is_ok(), c.at("parses").get<bool>()) << text << ": " << g.message();
    ++grammars;
    if (!g.is_ok()) continue;
    for (const auto& o : c.at("outputs")) {
      auto constraint = GbnfConstraint::create(*g, testing::byte_vocabulary());
      ASSERT_TRUE(constraint.is_ok()) << constraint.message();
      const std::string out = o.at("text").get<std::string>();
      const Status s = constraint->accept_bytes(out);
      EXPECT_TRUE(s.is_ok()) << text << " refused \"" << out << "\": " << s.message();
      if (o.at("stopped").get<bool>()) {
        EXPECT_TRUE(constraint->complete()) << text << " left \"" << out << "\" incomplete";
        ++whole;
      }
      ++texts;
    }
  }
  std::printf("%d grammars, %d texts of llama.cpp's (%d whole)\n", grammars, texts, whole);
  EXPECT_GE(texts, 20);
}

}  // namespace
}  // namespace minfer::grammar
