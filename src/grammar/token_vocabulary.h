// TokenVocabulary: a model's tokens as the byte strings they add to the text,
// arranged for fast grammar masking. Built once per model, shared by every
// constrained sequence.
//
// Contract:
// - create() takes one TokenInfo per token id: its bytes, whether it ends
//   generation (EOG), whether it is a special/control token. Special tokens
//   that are not EOG, and tokens with no bytes, are never allowed by a
//   grammar. An id may be both EOG and special (Gemma's <eos>).
// - from_tokenizer() reads them from a Tokenizer: bytes are
//   token_to_piece(id, /*render_special=*/false); EOG is is_eog(id); special
//   are the control, unknown and unused token types (user-defined tokens such
//   as Gemma's "\n\n" or runs of spaces are ordinary text).
// - Errors: an empty vocabulary, or one of more than INT32_MAX tokens, is
//   kInvalidArgument.
//
// Layout: two byte tries of the grammar-eligible tokens (ids grouped at the
// node where their bytes end, children of a node contiguous): one of all of
// them, and one of the tokens that are not "plain string text" (those with a
// '"', a '\\', a byte < 0x20, or bytes that are not whole UTF-8 characters).
// Plain tokens are kept apart, sorted by code point count, because inside a
// JSON string every one of them is allowed up to the length bound: masking a
// string state walks only the small second trie.
//
// Completeness: mask() looks one token ahead. A vocabulary should spell
// every byte on its own (byte fallback, as the Gemma, Llama and GPT-2
// vocabularies do); otherwise a text may reach a state that only a missing
// token could continue (say a UTF-8 lead byte whose continuation exists only
// inside longer tokens that overrun a maxLength), and mask() reports it.
//
// Threading: immutable after create(); share it through the shared_ptr.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace minfer::tokenizer {
class Tokenizer;
}

namespace minfer::grammar {

struct TokenInfo {
  std::string bytes;
  bool is_eog = false;
  bool is_special = false;
};

// A byte trie over token ids. Node 0 is the root (the empty prefix).
struct TokenTrie {
  struct TrieNode {
    uint32_t first_child = 0;  // children are nodes [first_child, first_child + n_children)
    uint32_t n_children = 0;
    uint32_t first_token = 0;  // ids ending here are tokens[first_token, + n_tokens)
    uint32_t n_tokens = 0;
    uint8_t byte = 0;  // the edge byte from the parent
  };
  std::vector<TrieNode> nodes;
  std::vector<int32_t> tokens;

  static TokenTrie build(const std::vector<TokenInfo>& infos, const std::vector<int32_t>& ids);
};

class TokenVocabulary {
 public:
  [[nodiscard]] static Result<std::shared_ptr<const TokenVocabulary>> create(
      std::vector<TokenInfo> tokens);
  [[nodiscard]] static Result<std::shared_ptr<const TokenVocabulary>> from_tokenizer(
      const tokenizer::Tokenizer& tokenizer);

  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  const TokenInfo& token(int32_t id) const { return tokens_[id]; }
  const std::vector<int32_t>& eog_tokens() const { return eog_; }

  const TokenTrie& all_trie() const { return all_; }
  const TokenTrie& non_plain_trie() const { return non_plain_; }
  // Plain string tokens as (code points, id), ascending.
  const std::vector<std::pair<int32_t, int32_t>>& plain_by_length() const { return plain_; }

 private:
  explicit TokenVocabulary(std::vector<TokenInfo> tokens);
  std::vector<TokenInfo> tokens_;
  std::vector<int32_t> eog_;
  TokenTrie all_;
  TokenTrie non_plain_;
  std::vector<std::pair<int32_t, int32_t>> plain_;
};

// What every constraint's mask() does with its allowed-token vector: a
// logits row shorter than the vocabulary is kInvalidArgument (`who` names
// the constraint); otherwise every token not allowed, and every entry past
// the vocabulary, is set to -infinity. `allowed` is produced after the check
// by `allowed_tokens`, whose error is returned as is.
template <typename AllowedFn>
[[nodiscard]] Status mask_logits(std::span<float> logits, int32_t n_vocab, const char* who,
                                 AllowedFn&& allowed_tokens) {
  const size_t n = static_cast<size_t>(n_vocab);
  if (logits.size() < n) {
    return Status::invalid_argument(
        std::string(who) + ": logits row of " + std::to_string(logits.size()) +
        " entries for a vocabulary of " + std::to_string(n) + " tokens");
  }
  std::vector<uint8_t> allowed;
  MINFER_RETURN_IF_ERROR(allowed_tokens(allowed));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t t = 0; t < n; ++t) {
    if (!allowed[t]) logits[t] = kNegInf;
  }
  for (size_t t = n; t < logits.size(); ++t) logits[t] = kNegInf;
  return Status::ok();
}

}  // namespace minfer::grammar
