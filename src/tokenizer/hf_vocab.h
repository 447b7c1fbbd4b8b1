// Reads a Hugging Face tokenizer directory (vocab.json, merges.txt,
// added_tokens.json, tokenizer_config.json, optionally config.json) of a
// byte-level BPE model into a Vocab, laid out the way llama.cpp's converter
// lays out a GGUF vocabulary:
// - ids follow vocab.json and the added tokens; ids that no file names (up to
//   config.json's vocab_size, or HfVocabOptions::vocab_size) become "[PAD<id>]"
//   tokens of type unused;
// - added tokens are control tokens (type 3) when marked special or when they
//   look special ("<|...|>", "<unused...>", ...), user-defined (4) otherwise;
//   every other token is normal (1);
// - merges keep merges.txt's order (the rank), without the "#version" line;
// - bos/eos/unk/pad come from tokenizer_config.json's *_token entries (falling
//   back to config.json's *_token_id), add_bos/add_eos from add_*_token.
//
// Errors (missing or malformed files, ids that collide) are values naming the
// file. Threading: no shared state.
#pragma once

#include <string>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace minfer::tokenizer {

struct HfVocabOptions {
  // Total token count to pad to; 0: config.json's vocab_size if present, else
  // just past the highest id.
  int32_t vocab_size = 0;
  // Pre-tokenizer name; empty: derived from tokenizer_class ("Qwen2Tokenizer"
  // -> "qwen2"), else "default".
  std::string pre;
};

Result<Vocab> load_hf_vocab(const std::string& dir, const HfVocabOptions& options);
inline Result<Vocab> load_hf_vocab(const std::string& dir) {
  return load_hf_vocab(dir, {});
}

}  // namespace minfer::tokenizer
