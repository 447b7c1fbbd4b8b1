// GbnfConstraint: per-sequence constrained decoding to a GbnfGrammar (a
// request's GBNF "grammar") — which tokens may come next given the text
// generated so far.
//
// Contract:
// - The text starts empty. mask() leaves the logits of the tokens that may
//   come next untouched and sets every other one to -infinity; accept()
//   advances past the token actually emitted.
// - A token may come next when its bytes extend the text to a prefix of some
//   text of the grammar (UTF-8; a token may end inside a code point that the
//   grammar can still finish). End of generation (the vocabulary's EOG
//   tokens) may come next only when the text is a whole text of the grammar
//   and no code point is half written. Special tokens that are not EOG, and
//   tokens with no bytes, are never allowed.
// - Errors: create() is kInvalidArgument when the grammar's start already
//   has more than kMaxGbnfStacks stacks. mask() on a row shorter than the
//   vocabulary is kInvalidArgument; if no token at all may come next it is
//   kInvalidArgument rather than an all -infinity row. accept() of a token
//   that may not come next is kInvalidArgument naming the token and the
//   byte; kResourceExhausted when a step would pass kMaxGbnfStacks stacks or
//   kMaxGbnfStackDepth frames (gbnf_recognizer.h), state unchanged. The mask
//   walk drops the branches past those bounds (such tokens are not allowed).
//   After EOG has been accepted, mask() and accept() are kOutOfRange.
//
// Cost: mask() walks the vocabulary's byte trie from the current stacks and
// prunes every branch where no stack survives. accept() is O(token bytes x
// stacks x expansion).
//
// Threading: one GbnfConstraint per sequence. mask() and complete() are const
// and touch no shared mutable state; accept() must not run concurrently with
// anything else on the same object.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/gbnf.h"
#include "grammar/gbnf_recognizer.h"
#include "grammar/token_vocabulary.h"

namespace minfer::grammar {

class GbnfConstraint {
 public:
  [[nodiscard]] static Result<GbnfConstraint> create(std::shared_ptr<const GbnfGrammar> grammar,
                                                     std::shared_ptr<const TokenVocabulary> vocab);

  // Sets logits[t] = -infinity for every token t that may not come next.
  [[nodiscard]] Status mask(std::span<float> logits) const;

  // allowed[t] = 1 for every token t that may come next, 0 otherwise
  // (resized to the vocabulary). The same errors as mask().
  [[nodiscard]] Status allowed_tokens(std::vector<uint8_t>& allowed) const;

  // Advances past `token`; an error (state unchanged) if it may not come next.
  [[nodiscard]] Status accept(int32_t token);

  // Advances past raw bytes, as accept() does for a token's bytes (tests and
  // tools that check a whole text).
  [[nodiscard]] Status accept_bytes(std::string_view bytes);

  // The text so far is a whole text of the grammar (EOG may come next).
  bool complete() const;
  bool ended() const { return ended_; }
  const std::string& text() const { return text_; }

 private:
  GbnfConstraint(std::shared_ptr<const GbnfGrammar> grammar,
                 std::shared_ptr<const TokenVocabulary> vocab);
  void compact();

  std::shared_ptr<const GbnfGrammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<GbnfFrame> arena_;  // the live stacks only (compacted after every accept)
  std::vector<int32_t> stacks_;   // tops of the live stacks (-1: finished), no duplicates
  Utf8Partial partial_;
  std::string text_;
  bool ended_ = false;
};

}  // namespace minfer::grammar
