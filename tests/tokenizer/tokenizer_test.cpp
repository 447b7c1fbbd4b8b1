#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tokenizer/hf_vocab.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_dump_testutil.h"

namespace minfer::tokenizer {
namespace {

const std::string kQwen2Dir = std::string(MINFER_SHARED_DIR) + "/data/qwen2-tokenizer";

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

const Tokenizer& spm_small() {
  static const Tokenizer* tok = [] {
    Result<Vocab> v =
        testing::load_vocab_dump(std::string(MINFER_TEST_DATA_DIR) + "/golden/spm_small.vocab");
    EXPECT_TRUE(v.is_ok()) << v.message();
    Result<Tokenizer> t = Tokenizer::create(std::move(v).value());
    EXPECT_TRUE(t.is_ok()) << t.message();
    return new Tokenizer(std::move(t).value());
  }();
  return *tok;
}

TEST(HfVocab, Qwen2LayoutMatchesTheGgufConverter) {
  Result<Vocab> r = load_hf_vocab(kQwen2Dir);
  ASSERT_TRUE(r.is_ok()) << r.message();
  const Vocab& v = *r;
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "qwen2");
  ASSERT_EQ(v.tokens.size(), 151646u);
  EXPECT_EQ(v.tokens[0], "!");
  EXPECT_EQ(v.tokens[151643], "<|endoftext|>");
  EXPECT_EQ(v.tokens[151644], "<|im_start|>");
  EXPECT_EQ(v.tokens[151645], "<|im_end|>");
  for (int32_t id : {151643, 151644, 151645}) {
    EXPECT_EQ(v.token_types[id], static_cast<int32_t>(TokenType::kControl));
  }
  EXPECT_EQ(v.token_types[0], static_cast<int32_t>(TokenType::kNormal));
  ASSERT_EQ(v.merges.size(), 151387u);
  EXPECT_EQ(v.merges[0], "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ"
  EXPECT_TRUE(v.scores.empty());
  EXPECT_EQ(v.eos_id, 151645);
  EXPECT_EQ(v.pad_id, 151643);
  EXPECT_EQ(v.bos_id, -1);  // bos_token is null and there is no config.json
  EXPECT_FALSE(v.add_bos);
}

TEST(HfVocab, PadsUnnamedIdsLikeTheConverter) {
  HfVocabOptions options;
  options.vocab_size = 151936;
  Result<Vocab> r = load_hf_vocab(kQwen2Dir, options);
  ASSERT_TRUE(r.is_ok()) << r.message();
  ASSERT_EQ(r->tokens.size(), 151936u);
  EXPECT_EQ(r->tokens[151646], "[PAD151646]");
  EXPECT_EQ(r->tokens[151935], "[PAD151935]");
  EXPECT_EQ(r->token_types[151935], static_cast<int32_t>(TokenType::kUnused));
  Result<Tokenizer> tok = Tokenizer::create(std::move(r).value());
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  EXPECT_EQ(tok->n_vocab(), 151936);
  EXPECT_EQ(tok->token_to_piece(151700), "");  // unused tokens render as nothing

  options.vocab_size = 1000;
  EXPECT_NE(load_hf_vocab(kQwen2Dir, options).message().find("smaller"), std::string::npos);
}

TEST(HfVocab, ErrorsNameTheFile) {
  const auto dir = std::filesystem::temp_directory_path() / "minfer_hf_vocab_test";
  std::filesystem::create_directories(dir);
  EXPECT_NE(load_hf_vocab(dir.string()).message().find("vocab.json: cannot open"),
            std::string::npos);
  std::ofstream(dir / "vocab.json") << "{\"a\": 0,\n \"b\": x}";
  EXPECT_NE(load_hf_vocab(dir.string()).message().find("vocab.json: JSON line 2, column 7"),
            std::string::npos);
  std::ofstream(dir / "vocab.json") << "{\"a\": 0, \"b\": 0}";
  EXPECT_NE(load_hf_vocab(dir.string()).message().find("id 0 is used twice"), std::string::npos);
  std::ofstream(dir / "vocab.json") << "{\"a\": 0, \"b\": 1, \"ab\": 2}";
  std::ofstream(dir / "merges.txt") << "#version: 0.2\na b\nb\n";
  EXPECT_NE(load_hf_vocab(dir.string()).message().find("malformed merge"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Tokenizer, Qwen2Basics) {
  const Tokenizer& tok = qwen2();
  EXPECT_EQ(tok.n_vocab(), 151646);
  EXPECT_EQ(tok.eos(), 151645);
  EXPECT_EQ(tok.eot(), 151645);  // detected from "<|im_end|>"
  EXPECT_TRUE(tok.is_eog(151645));
  EXPECT_TRUE(tok.is_eog(151643));
  EXPECT_FALSE(tok.is_eog(151644));
  EXPECT_FALSE(tok.is_eog(-1));
  EXPECT_EQ(tok.find_token("<|im_start|>"), 151644);
  EXPECT_EQ(tok.find_token("no such token"), -1);
  EXPECT_EQ(tok.token_text(151644), "<|im_start|>");
  EXPECT_EQ(tok.token_text(-5), "");
  EXPECT_EQ(tok.token_type(151644), TokenType::kControl);

  auto ids = tok.encode("<|im_start|>user\nHello world<|im_end|>", false, true);
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{151644, 872, 198, 9707, 1879, 151645}));
  auto literal = tok.encode("<|im_start|>", false, false);
  ASSERT_TRUE(literal.is_ok());
  EXPECT_GT(literal->size(), 1u);  // spelled out, not the control token
  EXPECT_EQ(tok.decode(*literal), "<|im_start|>");

  EXPECT_EQ(tok.token_to_piece(1879), " world");  // "Ġworld"
  EXPECT_EQ(tok.token_to_piece(151644), "<|im_start|>");
  EXPECT_EQ(tok.token_to_piece(151644, false), "");
  EXPECT_EQ(tok.token_to_piece(999999), "");
}

TEST(Tokenizer, SpmBasics) {
  const Tokenizer& tok = spm_small();
  auto ids = tok.encode("Hello world", true, false);
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(ids->front(), tok.bos());
  EXPECT_EQ(tok.decode(*ids, false), " Hello world");  // add_space_prefix
  EXPECT_EQ(tok.token_to_piece(tok.find_token("\xE2\x96\x81Hello")), " Hello");
  EXPECT_EQ(tok.token_to_piece(tok.find_token("<0x41>")), "A");
  // "Ω" is not in the vocabulary: byte fallback.
  auto omega = tok.encode("\xCE\xA9", false, false);
  ASSERT_TRUE(omega.is_ok());
  EXPECT_EQ(*omega, (std::vector<int32_t>{tok.find_token("\xE2\x96\x81"), tok.find_token("<0xCE>"),
                                          tok.find_token("<0xA9>")}));
}

TEST(Tokenizer, InvalidUtf8IsAnErrorWithTheOffset) {
  struct Case {
    std::string text;
    size_t offset;
  };
  for (const Case& c : std::vector<Case>{{"ab\xFF"
                                          "cd",
                                          2},
                                         {"ab\xE4\xB8", 2},           // truncated at the end
                                         {"\xC0\x80", 0},             // overlong
                                         {"x\xED\xA0\x80", 1},        // surrogate
                                         {"ok \xF4\x90\x80\x80", 3},  // > U+10FFFF
                                         {"\x80", 0}}) {
    for (const Tokenizer* tok : {&qwen2(), &spm_small()}) {
      auto r = tok->encode(c.text, false, true);
      ASSERT_FALSE(r.is_ok());
      EXPECT_EQ(r.message(), "invalid UTF-8 at byte offset " + std::to_string(c.offset));
    }
  }
  EXPECT_EQ(find_invalid_utf8("\xF0\x9F\x98\x80 ok"), kUtf8Valid);
}

TEST(Tokenizer, EmptyInput) {
  auto r = qwen2().encode("", true, true);
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->empty());
  auto s = spm_small().encode("", true, true);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(*s, std::vector<int32_t>{spm_small().bos()});
}

TEST(Tokenizer, CreateValidates) {
  Vocab ok;
  ok.model = "gpt2";
  ok.pre = "qwen2";
  ok.tokens = {"a", "b", "ab"};
  ok.merges = {"a b"};
  EXPECT_TRUE(Tokenizer::create(ok).is_ok());
  auto fails = [](Vocab v, const std::string& what) {
    Result<Tokenizer> t = Tokenizer::create(std::move(v));
    ASSERT_FALSE(t.is_ok()) << what;
    EXPECT_NE(t.message().find(what), std::string::npos) << t.message();
  };
  Vocab v = ok;
  v.model = "bert";
  fails(v, "unsupported tokenizer model \"bert\"");
  v = ok;
  v.pre = "klingon";
  fails(v, "unsupported pre-tokenizer \"klingon\"");
  v = ok;
  v.bos_id = 3;
  fails(v, "BOS id 3 is out of range");
  v = ok;
  v.merges = {"a c"};
  fails(v, "merge 0 \"a c\" references a token that is not in the vocabulary");
  v = ok;
  v.merges = {"ab"};
  fails(v, "has no separator");
  v = ok;
  v.scores = {0.0f};
  fails(v, "3 tokens but 1 scores");
  v = ok;
  v.token_types = {1, 1, 9};
  fails(v, "token 2 has invalid type 9");
  v = ok;
  v.tokens = {"a", "b", "a"};
  fails(v, "duplicates token 0");
  v = ok;
  v.add_bos = true;
  fails(v, "add_bos is set but there is no BOS token");
  v = ok;
  v.tokens.clear();
  fails(v, "no tokens");
}

// A harmony vocabulary (gpt-oss): the structure tokens render as text for
// the reply's readers, and <|end|>, which closes one message of a reply that
// goes on, does not end generation; <|return|> and <|call|> do.
TEST(Tokenizer, HarmonyStructureTokensRenderAndEndIsNotEog) {
  Vocab v;
  v.model = "gpt2";
  v.pre = "qwen2";
  v.tokens = {"a",       "b",          "<|start|>", "<|channel|>",  "<|message|>",
              "<|end|>", "<|return|>", "<|call|>",  "<|constrain|>"};
  const auto control = static_cast<int32_t>(TokenType::kControl);
  const auto normal = static_cast<int32_t>(TokenType::kNormal);
  v.token_types = {normal, normal, control, control, control, control, control, control, control};
  v.eos_id = 6;
  Result<Tokenizer> t = Tokenizer::create(v);
  ASSERT_TRUE(t.is_ok()) << t.message();
  for (int32_t id : {2, 3, 4, 5, 8}) {
    EXPECT_EQ(t->token_to_piece(id, /*render_special=*/false), v.tokens[id]);
    EXPECT_FALSE(t->is_eog(id)) << v.tokens[id];
  }
  EXPECT_TRUE(t->is_eog(6));
  EXPECT_TRUE(t->is_eog(7));
  EXPECT_EQ(t->token_to_piece(6, false), "");
  // Without <|channel|> it is no harmony vocabulary: <|end|> ends a turn.
  v.tokens[3] = "<|other|>";
  Result<Tokenizer> plain = Tokenizer::create(v);
  ASSERT_TRUE(plain.is_ok()) << plain.message();
  EXPECT_TRUE(plain->is_eog(5));
  EXPECT_EQ(plain->token_to_piece(5, false), "");
}

TEST(Detokenizer, HoldsBackSplitCharacters) {
  const Tokenizer& tok = qwen2();
  // One byte-level token per byte of U+1F600 (F0 9F 98 80).
  std::vector<int32_t> bytes;
  for (unsigned char b : std::string("\xF0\x9F\x98\x80")) {
    bytes.push_back(tok.find_token(byte_to_unicode(b)));
    ASSERT_GE(bytes.back(), 0);
  }
  Detokenizer d(tok);
  EXPECT_EQ(d.push(tok.find_token("Hi")), "Hi");
  EXPECT_EQ(d.push(bytes[0]), "");
  EXPECT_EQ(d.push(bytes[1]), "");
  EXPECT_EQ(d.push(bytes[2]), "");
  EXPECT_TRUE(d.has_pending());
  EXPECT_EQ(d.push(bytes[3]), "\xF0\x9F\x98\x80");
  EXPECT_FALSE(d.has_pending());
  EXPECT_EQ(d.flush(), "");

  // An unfinished character at the end comes out as U+FFFD.
  EXPECT_EQ(d.push(bytes[0]), "");
  EXPECT_EQ(d.push(bytes[1]), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");
  // A byte that cannot start a character is replaced at once, the rest kept.
  EXPECT_EQ(d.push(bytes[3]), "\xEF\xBF\xBD");
  EXPECT_EQ(d.push(tok.find_token("!")), "!");
}

TEST(Detokenizer, StreamsEveryGoldenTextBackExactly) {
  const std::string text =
      "Hello 你好 \xF0\x9F\x98\x80\xF0\x9F\x9A\x80 caf\xC3\xA9 \xE2\x9C\x85 <|im_end|> \xD0\x81\n";
  for (const Tokenizer* tok : {&qwen2(), &spm_small()}) {
    auto ids = tok->encode(text, false, true);
    ASSERT_TRUE(ids.is_ok());
    Detokenizer d(*tok);
    std::string out;
    for (int32_t id : *ids) {
      const std::string part = d.push(id);
      EXPECT_EQ(find_invalid_utf8(part), kUtf8Valid);
      out += part;
    }
    out += d.flush();
    const std::string want = tok == &spm_small() ? " " + text : text;  // space prefix
    EXPECT_EQ(out, want);
  }
}

TEST(Detokenizer, SpmByteTokens) {
  const Tokenizer& tok = spm_small();
  Detokenizer d(tok);
  EXPECT_EQ(d.push(tok.find_token("<0xE4>")), "");
  EXPECT_EQ(d.push(tok.find_token("<0xB8>")), "");
  EXPECT_EQ(d.push(tok.find_token("<0xAD>")), "\xE4\xB8\xAD");
}

TEST(Tokenizer, SharedAcrossThreads) {
  const Tokenizer tok = qwen2();  // copies share the tables
  const std::string text = "Thread safety: 東京 🚀 <|im_start|>x<|im_end|> 12345 don't\n\n";
  auto want = tok.encode(text, false, true);
  ASSERT_TRUE(want.is_ok());
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto got = tok.encode(text, false, true);
        ok[t] += got.is_ok() && *got == *want;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 50);
}

}  // namespace
}  // namespace minfer::tokenizer
