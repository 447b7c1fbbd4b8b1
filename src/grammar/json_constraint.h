// JsonConstraint: per-sequence constrained decoding to a JsonGrammar — which
// tokens may come next given the text generated so far.
//
// Contract:
// - The text starts empty. mask() leaves the logits of the tokens that may
//   come next untouched and sets every other one to -infinity; accept()
//   advances past the token actually emitted.
// - A token may come next when its bytes extend the text to a prefix of some
//   text of the grammar (recognizer.h describes the whitespace rule). End of
//   generation (the vocabulary's EOG tokens) may come next only when the text
//   is one whole value; once the top-level value is closed nothing but EOG
//   may come (no trailing whitespace). The one exception is a top-level
//   number, which may end or go on ("12" may become "123"): there EOG and
//   digits are both allowed.
// - Special tokens that are not EOG, and tokens with no bytes, are never
//   allowed.
// - Errors: mask() on a row shorter than the vocabulary is kInvalidArgument
//   (entries past the vocabulary are set to -infinity); if no token at all
//   may come next (a vocabulary that lacks the bytes the grammar needs) it is
//   kInvalidArgument rather than an all -infinity row. accept() of a token
//   that may not come next is kInvalidArgument naming the token and the byte;
//   kResourceExhausted if the set of parse states grows past kMaxStates.
//   After EOG has been accepted, mask() and accept() are kOutOfRange errors.
// - Limits: a schema's size is refused when it is compiled
//   (JsonGrammar::from_schema, json_grammar.h "Limits", kInvalidArgument on
//   the caller's thread): one byte opens at most kMaxBranching states from
//   one state, and no state leads past kMaxNesting. kResourceExhausted can
//   still come mid-generation when alternatives that share a long prefix
//   stay alive together and their own branching multiplies (a union of
//   near-identical objects, each holding a wide union): no compile-time
//   bound foresees which texts keep them ambiguous.
//
// Cost: mask() walks the vocabulary's byte trie from the current states and
// prunes every branch where no state survives, so it visits only the tokens
// that share a live prefix; inside a string it walks only the small trie of
// tokens that are not plain string text (token_vocabulary.h). Measured on
// Gemma 3's 262,144 tokens in docs/GRAMMAR.md. accept() is O(token bytes x
// states x log states).
//
// Threading: one JsonConstraint per sequence. mask() and complete() are
// const and touch no shared mutable state (concurrent calls are safe);
// accept() must not run concurrently with anything else on the same object.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/json_grammar.h"
#include "grammar/recognizer.h"
#include "grammar/token_vocabulary.h"

namespace minfer::grammar {

inline constexpr size_t kMaxStates = 4096;

class JsonConstraint {
 public:
  [[nodiscard]] static Result<JsonConstraint> create(std::shared_ptr<const JsonGrammar> grammar,
                                                     std::shared_ptr<const TokenVocabulary> vocab);

  // Sets logits[t] = -infinity for every token t that may not come next.
  Status mask(std::span<float> logits) const;

  // allowed[t] = 1 for every token t that may come next, 0 otherwise
  // (resized to the vocabulary). The same errors as mask().
  Status allowed_tokens(std::vector<uint8_t>& allowed) const;

  // Advances past `token`; an error (state unchanged) if it may not come next.
  Status accept(int32_t token);

  // The text so far is one whole value (EOG may come next).
  bool complete() const;
  // EOG has been accepted.
  bool ended() const { return ended_; }
  // The bytes accepted so far.
  const std::string& text() const { return text_; }

 private:
  JsonConstraint(std::shared_ptr<const JsonGrammar> grammar,
                 std::shared_ptr<const TokenVocabulary> vocab);
  void compact();

  std::shared_ptr<const JsonGrammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<Frame> arena_;     // the live stacks only (compacted after every accept)
  std::vector<int32_t> states_;  // tops of the live stacks, no duplicates
  std::string text_;
  bool ended_ = false;
};

}  // namespace minfer::grammar
