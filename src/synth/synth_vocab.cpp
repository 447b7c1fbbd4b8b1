#include "synth/synth_vocab.h"

#include <cstdio>
#include <unordered_set>

#include "gguf/writer.h"
#include "synth/synth_rng.h"
#include "tokenizer/hf_vocab.h"
#include "tokenizer/unicode.h"

namespace minfer::synth {
namespace {

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;

// GPT-2's reversible byte -> printable code point map, in byte order.
std::vector<std::string> byte_symbols() {
  std::vector<std::string> out;
  for (int b = 0; b < 256; ++b) out.push_back(tokenizer::byte_to_unicode(static_cast<uint8_t>(b)));
  return out;
}

// Picks an index biased towards the start of [0, n): the minimum of two draws,
// so that short, early tokens take part in more merges, as in real vocabularies.
uint64_t biased_index(SynthRng& rng, uint64_t n) {
  const uint64_t a = rng.below(n), b = rng.below(n);
  return a < b ? a : b;
}

Status check_size(int n_vocab, int minimum, const char* kind) {
  if (n_vocab < minimum) {
    return Status::invalid_argument(std::string("a synthetic ") + kind +
                                    " vocabulary needs at least " + std::to_string(minimum) +
                                    " tokens, got " + std::to_string(n_vocab));
  }
  return Status::ok();
}

}  // namespace

Result<tokenizer::Vocab> make_synthetic_bpe(int n_vocab, const std::string& pre, uint64_t seed) {
  constexpr int kSpecials = 3;
  MINFER_RETURN_IF_ERROR(check_size(n_vocab, 256 + kSpecials, "BPE"));
  tokenizer::Vocab v;
  v.model = "gpt2";
  v.pre = pre;
  v.tokens = byte_symbols();
  std::unordered_set<std::string> seen(v.tokens.begin(), v.tokens.end());
  SynthRng rng = SynthRng::for_stream(seed, "vocab.bpe", 0);
  const size_t n_regular = static_cast<size_t>(n_vocab - kSpecials);
  while (v.tokens.size() < n_regular) {
    const uint64_t n = v.tokens.size();
    const std::string& left = v.tokens[biased_index(rng, n)];
    const std::string& right = v.tokens[biased_index(rng, n)];
    std::string joined = left + right;
    if (joined.size() > 24 || !seen.insert(joined).second) continue;
    v.merges.push_back(left + " " + right);
    v.tokens.push_back(std::move(joined));
  }
  v.token_types.assign(v.tokens.size(), kNormal);
  for (const char* special : {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"}) {
    v.tokens.emplace_back(special);
    v.token_types.push_back(kControl);
  }
  v.bos_id = n_vocab - 3;
  v.eos_id = n_vocab - 2;
  v.eot_id = n_vocab - 1;
  v.add_bos = true;
  return v;
}

Result<tokenizer::Vocab> make_synthetic_spm(int n_vocab, uint64_t seed) {
  MINFER_RETURN_IF_ERROR(check_size(n_vocab, 4 + 256 + 96, "SPM"));
  tokenizer::Vocab v;
  v.model = "llama";
  v.pre = "default";
  v.tokens = {"<pad>", "<eos>", "<bos>", "<unk>"};
  v.token_types = {kControl, kControl, kControl, kUnknown};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.tokens.emplace_back(name);
    v.token_types.push_back(kByte);
  }
  const size_t first_piece = v.tokens.size();
  v.tokens.emplace_back("\xe2\x96\x81");  // U+2581, SentencePiece's space
  for (char c = 33; c < 127; ++c) v.tokens.emplace_back(1, c);
  std::unordered_set<std::string> seen(v.tokens.begin() + first_piece, v.tokens.end());
  SynthRng rng = SynthRng::for_stream(seed, "vocab.spm", 0);
  while (v.tokens.size() < static_cast<size_t>(n_vocab)) {
    const uint64_t n = v.tokens.size() - first_piece;
    const std::string& left = v.tokens[first_piece + biased_index(rng, n)];
    const std::string& right = v.tokens[first_piece + biased_index(rng, n)];
    std::string joined = left + right;
    if (joined.size() > 24 || !seen.insert(joined).second) continue;
    v.tokens.push_back(std::move(joined));
  }
  v.token_types.resize(v.tokens.size(), kNormal);
  // Scores fall with the index: earlier (shorter) pieces merge first.
  v.scores.resize(v.tokens.size(), 0.0f);
  for (size_t i = first_piece; i < v.tokens.size(); ++i) {
    v.scores[i] = -static_cast<float>(i - first_piece);
  }
  v.pad_id = 0;
  v.eos_id = 1;
  v.bos_id = 2;
  v.unk_id = 3;
  v.add_bos = true;
  return v;
}

Result<tokenizer::Vocab> load_qwen2_vocab(const std::string& dir, int n_vocab) {
  tokenizer::HfVocabOptions options;
  options.vocab_size = n_vocab;
  options.pre = "qwen2";
  auto v = tokenizer::load_hf_vocab(dir, options);
  if (!v) return v.status().with_context("Qwen2 tokenizer in '" + dir + "'");
  if (static_cast<int>(v->tokens.size()) != n_vocab) {
    return Status::invalid_argument("Qwen2 tokenizer in '" + dir + "' has " +
                                    std::to_string(v->tokens.size()) + " tokens, the model needs " +
                                    std::to_string(n_vocab));
  }
  return v;
}

void write_vocab(gguf::Writer& w, const tokenizer::Vocab& v, const std::string& chat_template) {
  w.set_string("tokenizer.ggml.model", v.model);
  w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  if (!v.scores.empty()) w.set_f32_array("tokenizer.ggml.scores", v.scores);
  w.set_i32_array("tokenizer.ggml.token_type", v.token_types);
  if (!v.merges.empty()) w.set_string_array("tokenizer.ggml.merges", v.merges);
  auto set_id = [&](const char* key, int32_t id) {
    if (id >= 0) w.set_u32(key, static_cast<uint32_t>(id));
  };
  set_id("tokenizer.ggml.bos_token_id", v.bos_id);
  set_id("tokenizer.ggml.eos_token_id", v.eos_id);
  set_id("tokenizer.ggml.eot_token_id", v.eot_id);
  set_id("tokenizer.ggml.unknown_token_id", v.unk_id);
  set_id("tokenizer.ggml.padding_token_id", v.pad_id);
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  if (v.model == "llama") w.set_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  if (!chat_template.empty()) w.set_string("tokenizer.chat_template", chat_template);
}

}  // namespace minfer::synth
