// Checks SpecialTokenSplitter (through Tokenizer::split_special) against a
// plain restatement of llama.cpp's partition rule, on random texts made of
// special-token texts, pieces of them and ordinary bytes; and prints how long
// the real Gemma 3 tokenizer takes on chat turns and prose (never asserted).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gguf/file.h"
#include "test_models.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/hf_vocab.h"
#include "tokenizer/special_split.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_dump_testutil.h"

namespace minfer::tokenizer {
namespace {

// ---------------------------------------------------------------------------
// reference: the rule as llama.cpp writes it, one rescan per special token

// The special tokens in the order they claim text: longest first, equal
// lengths in id order.
std::vector<int32_t> reference_order(const Tokenizer& tok) {
  std::vector<int32_t> specials;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const TokenType t = tok.token_type(id);
    if ((t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) &&
        !tok.token_text(id).empty()) {
      specials.push_back(id);
    }
  }
  std::stable_sort(specials.begin(), specials.end(), [&](int32_t a, int32_t b) {
    return tok.token_text(a).size() > tok.token_text(b).size();
  });
  return specials;
}

std::vector<TextFragment> reference_split(const Tokenizer& tok, const std::vector<int32_t>& order,
                                          std::string_view text, bool parse_special) {
  std::vector<TextFragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  for (int32_t id : order) {
    const TokenType t = tok.token_type(id);
    if (!parse_special && (t == TokenType::kControl || t == TokenType::kUnknown)) continue;
    const std::string& s = tok.token_text(id);
    std::vector<TextFragment> next;
    for (const TextFragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view run = text.substr(f.offset, f.length);
      size_t pos = 0;
      for (size_t hit; (hit = run.find(s, pos)) != std::string_view::npos; pos = hit + s.size()) {
        if (hit > pos) next.push_back({-1, f.offset + pos, hit - pos});
        next.push_back({id, f.offset + hit, s.size()});
      }
      if (pos < run.size()) next.push_back({-1, f.offset + pos, run.size() - pos});
    }
    frags = std::move(next);
  }
  return frags;
}

std::string describe(const std::vector<TextFragment>& frags) {
  std::string out;
  for (const TextFragment& f : frags) {
    out += "(" + std::to_string(f.token) + "@" + std::to_string(f.offset) + "+" +
           std::to_string(f.length) + ")";
  }
  return out;
}

std::vector<std::string> special_texts(const Tokenizer& tok) {
  std::vector<std::string> out;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const TokenType t = tok.token_type(id);
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) {
      if (!tok.token_text(id).empty()) out.push_back(tok.token_text(id));
    }
  }
  return out;
}

// Pieces that make overlaps likely: whole special texts, their prefixes and
// suffixes, runs of whitespace (Gemma has tokens for runs of each), and
// ordinary bytes, including ones that are not UTF-8.
std::string random_text(std::mt19937& rng, const std::vector<std::string>& specials, int pieces) {
  static const std::string kBytes = "ab<>/|_x \n\t0123\xC3\xA9\xFF";
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::string text;
  for (int k = 0; k < pieces; ++k) {
    const std::string& s = specials.empty() ? kBytes : specials[pick(specials.size())];
    switch (pick(6)) {
      case 0:
      case 1:
        text += s;
        break;
      case 2:
        text += s.substr(0, 1 + pick(s.size()));
        break;
      case 3:
        text += s.substr(pick(s.size()));
        break;
      case 4:
        for (size_t n = 1 + pick(4); n > 0; --n) text += kBytes[pick(kBytes.size())];
        break;
      default:
        text.append(1 + pick(40), " \n\t"[pick(3)]);
        break;
    }
  }
  return text;
}

void expect_matches_reference(const Tokenizer& tok, const std::string& name, int n_texts,
                              uint32_t seed) {
  const std::vector<std::string> specials = special_texts(tok);
  const std::vector<int32_t> order = reference_order(tok);
  std::mt19937 rng(seed);
  int checked = 0;
  for (int i = 0; i < n_texts; ++i) {
    const std::string text = random_text(rng, specials, 1 + static_cast<int>(rng() % 40));
    for (bool parse_special : {true, false}) {
      const std::vector<TextFragment> want = reference_split(tok, order, text, parse_special);
      const std::vector<TextFragment> got = tok.split_special(text, parse_special);
      ASSERT_EQ(got, want) << name << " text #" << i << " parse_special=" << parse_special
                           << "\n  want " << describe(want) << "\n  got  " << describe(got);
      ++checked;
    }
  }
  std::printf("%s: %d splits (%zu special tokens) match the reference\n", name.c_str(), checked,
              specials.size());
}

// ---------------------------------------------------------------------------
// tokenizers

Tokenizer load_gemma3() {
  const std::string path = minfer::testing::gemma3_model_path();
  EXPECT_FALSE(path.empty()) << minfer::testing::kMissingGemma3;
  auto file = gguf::File::open(path);
  EXPECT_TRUE(file.is_ok()) << file.message();
  Result<Vocab> v = vocab_from_gguf(**file);
  EXPECT_TRUE(v.is_ok()) << v.message();
  Result<Tokenizer> tok = Tokenizer::create(std::move(v).value());
  EXPECT_TRUE(tok.is_ok()) << tok.message();
  return std::move(tok).value();
}

const Tokenizer& gemma3() {
  static const Tokenizer* tok = new Tokenizer(load_gemma3());
  return *tok;
}

// A vocabulary built to collide: shared prefixes and suffixes, tokens inside
// tokens, self-overlapping ones, equal lengths at different ids, every type.
Tokenizer colliding() {
  Vocab v;
  v.model = "llama";
  v.tokens = {"a",
              "b",
              "ab",
              "ba",
              "aba",
              "bab",
              "abab",
              "bc",
              "cab",
              "abc",
              "ca",
              "aa",
              "aaa",
              "<x>",
              "<x",
              "x>",
              "<",
              "\xC3\xA9",
              "\xC3\xA9"
              "a",
              "c",
              "bcdef",
              "aaaa",
              "<x><",
              "><x",
              ">"};
  const TokenType cycle[] = {TokenType::kControl, TokenType::kUserDefined, TokenType::kUnknown,
                             TokenType::kNormal, TokenType::kUserDefined};
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    v.token_types.push_back(static_cast<int32_t>(cycle[i % std::size(cycle)]));
  }
  Result<Tokenizer> tok = Tokenizer::create(std::move(v));
  EXPECT_TRUE(tok.is_ok()) << tok.message();
  return std::move(tok).value();
}

TEST(SpecialSplit, Gemma3MatchesReference) {
  expect_matches_reference(gemma3(), "gemma3", 400, 1);
}

TEST(SpecialSplit, Gemma3LongTexts) {
  // Long texts keep groups of overlapping occurrences apart over long spans.
  const std::vector<std::string> specials = special_texts(gemma3());
  const std::vector<int32_t> order = reference_order(gemma3());
  std::mt19937 rng(7);
  for (int i = 0; i < 4; ++i) {
    const std::string text = random_text(rng, specials, 3000);
    for (bool parse_special : {true, false}) {
      ASSERT_EQ(gemma3().split_special(text, parse_special),
                reference_split(gemma3(), order, text, parse_special));
    }
  }
}

TEST(SpecialSplit, SyntheticTokenizersMatchReference) {
  expect_matches_reference(colliding(), "colliding", 3000, 2);
  Result<Vocab> spm =
      testing::load_vocab_dump(std::string(MINFER_TEST_DATA_DIR) + "/golden/spm_small.vocab");
  ASSERT_TRUE(spm.is_ok()) << spm.message();
  Result<Tokenizer> spm_tok = Tokenizer::create(std::move(spm).value());
  ASSERT_TRUE(spm_tok.is_ok()) << spm_tok.message();
  expect_matches_reference(*spm_tok, "spm_small", 300, 3);
  Result<Vocab> qwen = load_hf_vocab(std::string(MINFER_SHARED_DIR) + "/data/qwen2-tokenizer");
  ASSERT_TRUE(qwen.is_ok()) << qwen.message();
  Result<Tokenizer> qwen_tok = Tokenizer::create(std::move(qwen).value());
  ASSERT_TRUE(qwen_tok.is_ok()) << qwen_tok.message();
  expect_matches_reference(*qwen_tok, "qwen2", 300, 4);
}

// The rule's corners, worked out by hand on the colliding vocabulary (types
// cycle control, user-defined, unknown, normal, user-defined by id).
TEST(SpecialSplit, OverlapRules) {
  const Tokenizer tok = colliding();
  auto id = [&](const char* s) { return tok.find_token(s); };
  using F = TextFragment;
  // A longer token wins even when it starts later: "bcdef" beats "abc".
  EXPECT_EQ(tok.split_special("abcdef", true),
            (std::vector<F>{{id("a"), 0, 1}, {id("bcdef"), 1, 5}}));
  // Without parse_special the control "bcdef" and "a" take no part.
  EXPECT_EQ(tok.split_special("abcdef", false), (std::vector<F>{{id("abc"), 0, 3}, {-1, 3, 3}}));
  // Self-overlapping: leftmost first, resuming after each occurrence.
  EXPECT_EQ(tok.split_special("aaaaaaaaa", false),
            (std::vector<F>{{id("aaaa"), 0, 4}, {id("aaaa"), 4, 4}, {-1, 8, 1}}));
  // Equal lengths: the lower id ("ab") claims first, even to the right of "ca".
  EXPECT_EQ(tok.split_special("cab", true), (std::vector<F>{{id("c"), 0, 1}, {id("ab"), 1, 2}}));
  // Shorter tokens fill what longer ones left.
  EXPECT_EQ(tok.split_special("<x><x>", true),
            (std::vector<F>{{id("<x><"), 0, 4}, {id("x>"), 4, 2}}));
  EXPECT_EQ(tok.split_special("<x><x>", false),
            (std::vector<F>{{id("<x"), 0, 2}, {id(">"), 2, 1}, {id("<x"), 3, 2}, {id(">"), 5, 1}}));
  EXPECT_TRUE(tok.split_special("", true).empty());
  EXPECT_EQ(tok.split_special("zz", true), (std::vector<F>{{-1, 0, 2}}));
}

// ---------------------------------------------------------------------------
// timings

class ProseGenerator {
 public:
  std::string sentence() {
    static const char* kWords[] = {
        "the",     "model",  "reads",   "a",         "long",      "text",   "and",   "answers",
        "quickly", "with",   "tokens",  "of",        "every",     "kind",   "while", "users",
        "wait",    "for",    "replies", "about",     "weather",   "code",   "music", "history",
        "science", "travel", "recipes", "questions", "carefully", "today",  "maybe", "because",
        "numbers", "like",   "42",      "or",        "3.14",      "appear", "often", "(sometimes)",
    };
    std::string s;
    const int n = 6 + static_cast<int>(next() % 14);
    for (int i = 0; i < n; ++i) {
      std::string w = kWords[next() % std::size(kWords)];
      if (i == 0) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
      s += (i ? " " : "") + w;
      if (i + 1 < n && next() % 9 == 0) s += ',';
    }
    return s + (next() % 5 == 0 ? "?" : ".");
  }
  uint64_t next() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return state_ >> 33;
  }

 private:
  uint64_t state_ = 12345;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.starts_with("model name")) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

TEST(SpecialSplitBench, Gemma3ChatTurnsAndProse) {
  const Tokenizer& tok = gemma3();
  ProseGenerator gen;
  std::vector<std::string> turns;  // Gemma's chat format, user and model in turn
  size_t turn_bytes = 0;
  for (int i = 0; i < 10000; ++i) {
    std::string body = gen.sentence();
    if (i % 2 == 1) body += " " + gen.sentence();
    turns.push_back(std::string("<start_of_turn>") + (i % 2 ? "model" : "user") + "\n" + body +
                    "<end_of_turn>\n");
    turn_bytes += turns.back().size();
  }
  std::string conversation;
  for (const std::string& t : turns) conversation += t;
  std::string prose;
  while (prose.size() < (1u << 20)) {
    prose += gen.sentence();
    prose += gen.next() % 4 == 0 ? "\n\n" : " ";
  }

  std::printf("CPU: %s\n", cpu_name().c_str());
  size_t n_tokens = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (const std::string& t : turns) n_tokens += tok.encode(t, false, true)->size();
  double s = seconds_since(t0);
  std::printf("10,000 chat turns (%zu bytes), one encode each: %.3f s, %.1f us/turn, %zu tokens\n",
              turn_bytes, s, s * 1e6 / 10000, n_tokens);
  t0 = std::chrono::steady_clock::now();
  n_tokens = tok.encode(conversation, false, true)->size();
  std::printf("the same turns as one text: %.3f s, %zu tokens\n", seconds_since(t0), n_tokens);
  t0 = std::chrono::steady_clock::now();
  n_tokens = tok.encode(prose, false, true)->size();
  std::printf("1 MiB of prose (%zu bytes): %.3f s, %zu tokens\n", prose.size(), seconds_since(t0),
              n_tokens);

  t0 = std::chrono::steady_clock::now();
  size_t n_frags = 0;
  for (const std::string& t : turns) n_frags += tok.split_special(t, true).size();
  s = seconds_since(t0);
  std::printf("split_special alone: chat turns %.1f us/turn (%zu fragments)", s * 1e6 / 10000,
              n_frags);
  t0 = std::chrono::steady_clock::now();
  n_frags = tok.split_special(prose, true).size();
  std::printf(", prose %.1f ms (%zu fragments)\n", seconds_since(t0) * 1e3, n_frags);

  // The worst real case: Gemma has tokens for runs of 2..31 spaces, so every
  // byte of a long run ends dozens of overlapping occurrences.
  const std::string spaces(1u << 20, ' ');
  t0 = std::chrono::steady_clock::now();
  n_frags = tok.split_special(spaces, true).size();
  std::printf("split_special of 1 MiB of spaces: %.1f ms (%zu fragments)\n",
              seconds_since(t0) * 1e3, n_frags);

  // The same splits by the one-rescan-per-token rule the tests compare with.
  const std::vector<int32_t> order = reference_order(tok);
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) n_frags += reference_split(tok, order, turns[i], true).size();
  std::printf("reference split: chat turns %.1f us/turn", seconds_since(t0) * 1e6 / 1000);
  for (const std::string* text : {&std::as_const(prose), &spaces}) {
    t0 = std::chrono::steady_clock::now();
    n_frags = reference_split(tok, order, *text, true).size();
    std::printf(", %s %.1f ms", text == &prose ? "prose" : "spaces", seconds_since(t0) * 1e3);
  }
  std::printf("\n");
  t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(Tokenizer::create(tok.vocab()).is_ok());
  std::printf("Tokenizer::create: %.1f ms", seconds_since(t0) * 1e3);
  std::vector<SpecialTokenSplitter::Pattern> patterns;
  for (int32_t id : order) patterns.push_back({tok.token_text(id), id, true});
  t0 = std::chrono::steady_clock::now();
  const SpecialTokenSplitter splitter(std::move(patterns));
  std::printf(", of which the automaton %.1f ms\n", seconds_since(t0) * 1e3);
}

}  // namespace
}  // namespace minfer::tokenizer
