// Tokenizer: text <-> token ids for byte-level BPE ("gpt2") and
// SentencePiece-style BPE ("llama") vocabularies, reproducing llama.cpp's
// tokenization.
//
// Contract:
// - create() validates a Vocab (ids in range, one type/score per token when
//   present, unique token texts, merges that name known tokens, a supported
//   model and pre-tokenizer) and builds the lookup tables. Errors are values.
// - encode() rejects text that is not well-formed UTF-8 with an error naming
//   the byte offset. Otherwise it cannot fail except for a vocabulary that
//   lacks what the text needs (e.g. add_special with add_bos but no BOS id).
// - token_to_piece() returns the bytes a token stands for. A piece may be a
//   fragment of a multi-byte character; Detokenizer reassembles those.
//
// Ownership and threading: a Tokenizer is immutable after create(); copies
// share the same tables, and all const methods are safe to call from many
// threads at once. A Detokenizer is a small stateful object for one stream; it
// keeps its Tokenizer's tables alive and must not be shared across threads
// without external locking.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/special_split.h"
#include "tokenizer/vocab.h"

namespace minfer::tokenizer {

class Tokenizer {
 public:
  static Result<Tokenizer> create(Vocab vocab);

  // add_special: add BOS/EOS as the vocabulary's add_bos/add_eos flags say.
  // parse_special: text that spells a control token ("<|im_start|>") becomes
  // that token. User-defined tokens are always recognised, as in llama.cpp.
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special,
                                      bool parse_special) const;

  // How encode() cuts text before tokenizing it: the special tokens it
  // recognises (as parse_special says) and the raw runs between them, in text
  // order; overlaps are settled as SpecialTokenSplitter describes.
  std::vector<TextFragment> split_special(std::string_view text, bool parse_special) const;

  // Bytes of one token. Control/unknown tokens render as their text when
  // render_special is true, as nothing otherwise; unused tokens and invalid
  // ids render as nothing.
  std::string token_to_piece(int32_t id, bool render_special = true) const;

  // Concatenated pieces (may end in an incomplete UTF-8 sequence).
  std::string decode(std::span<const int32_t> ids, bool render_special = true) const;

  int32_t n_vocab() const;
  int32_t bos() const;
  int32_t eos() const;
  int32_t eot() const;
  bool is_eog(int32_t id) const;                    // end of generation: eos, eot and friends
  TokenType token_type(int32_t id) const;           // kUndefined for invalid ids
  const std::string& token_text(int32_t id) const;  // "" for invalid ids
  int32_t find_token(std::string_view text) const;  // -1 when absent
  const Vocab& vocab() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Turns a stream of ids into text, emitting only complete UTF-8 characters:
// bytes of a character split across tokens are held back until the character
// is complete. Ill-formed bytes come out as U+FFFD so output is always valid.
class Detokenizer {
 public:
  explicit Detokenizer(Tokenizer tokenizer, bool render_special = true)
      : tokenizer_(std::move(tokenizer)), render_special_(render_special) {}

  // The text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Whatever is still held back, with incomplete sequences as U+FFFD; resets.
  std::string flush();
  bool has_pending() const { return !pending_.empty(); }

 private:
  Tokenizer tokenizer_;
  bool render_special_;
  std::string pending_;
};

}  // namespace minfer::tokenizer
