// Tokenizer vocabularies for synthetic models, in the form GGUF stores them
// (the tokenizer.ggml.* keys).
//
// Contract: the generators are deterministic functions of their arguments and
// produce self-consistent vocabularies a tokenizer can load: every merge joins
// two existing tokens into a third existing one; byte tokens cover all 256
// bytes. load_qwen2_vocab() reads the real Qwen2 tokenizer files and pads the
// vocabulary to the model's embedding rows as llama.cpp's converter does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace minfer::gguf {
class Writer;
}

namespace minfer::synth {

// A byte-level BPE vocabulary of exactly n_vocab tokens: 256 byte symbols,
// generated merges, then three control tokens at the end.
Result<tokenizer::Vocab> make_synthetic_bpe(int n_vocab, const std::string& pre, uint64_t seed);

// An SPM vocabulary of exactly n_vocab tokens: <pad> <eos> <bos> <unk>, 256 byte
// tokens, printable ASCII pieces, then generated merged pieces with falling scores.
Result<tokenizer::Vocab> make_synthetic_spm(int n_vocab, uint64_t seed);

// The real Qwen2 vocabulary from `dir` (vocab.json, merges.txt, added tokens),
// padded to n_vocab with unused "[PADn]" tokens.
Result<tokenizer::Vocab> load_qwen2_vocab(const std::string& dir, int n_vocab);

// Writes the tokenizer.ggml.* keys (and tokenizer.chat_template if non-empty).
void write_vocab(gguf::Writer& writer, const tokenizer::Vocab& vocab,
                 const std::string& chat_template);

}  // namespace minfer::synth
