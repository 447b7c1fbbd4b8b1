// Vocab: the tokenizer description a GGUF file carries in its
// `tokenizer.ggml.*` keys, as a plain value.
//
// Contract: a Vocab is only data; nothing here is validated. Tokenizer::create()
// checks it (ids in range, merges that reference known tokens, sizes that
// agree) and reports problems as errors. Token texts are stored exactly as the
// file stores them: byte-level BPE vocabularies keep the GPT-2 byte->unicode
// spelling ("Ġthe"), SentencePiece vocabularies keep "▁" for spaces and
// "<0xAB>" for byte tokens.
//
// Threading: plain value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace minfer::tokenizer {

// Values of `tokenizer.ggml.token_type`.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Vocab {
  // `tokenizer.ggml.model`: "gpt2" (byte-level BPE) or "llama" (SentencePiece
  // style BPE with byte fallback).
  std::string model;
  // `tokenizer.ggml.pre`: "qwen2", "llama3" / "llama-bpe", "default", ...
  // Only meaningful for "gpt2".
  std::string pre = "default";
  std::vector<std::string> tokens;
  std::vector<float> scores;         // empty, or one per token
  std::vector<int32_t> token_types;  // empty (all normal), or one TokenType per token
  std::vector<std::string> merges;   // "left right", rank = index; "gpt2" only

  int32_t bos_id = -1;  // -1: absent
  int32_t eos_id = -1;
  int32_t eot_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;

  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // "llama" only: prefix raw text with a space
};

}  // namespace minfer::tokenizer
