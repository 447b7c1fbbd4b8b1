// GbnfRecognizer: steps the parse states of a GbnfGrammar byte by byte.
//
// A parse state is a stack of grammar positions (element indices): the top
// is the character class to match next, each frame below is where its rule
// goes on once the one above is done; the empty stack (-1) is a finished
// text. Stacks are persistent linked lists in an arena shared by every
// state, so one step pushes O(1) frames per alternative and the mask walk
// undoes a step by truncating the arena. The grammar's nondeterminism (its
// alternatives) is a *set* of stacks; at every step each stack is expanded
// until its top is a character class, so a state set is always "what may
// come next".
//
// Bytes are decoded as UTF-8. A code point's leading bytes keep the stacks
// whose next class can still match some code point with that prefix, so a
// token that ends inside a character is allowed only where the character
// can be finished.
//
// Bounds: a stack deeper than kMaxGbnfStackDepth, or a step that would make
// more than kMaxGbnfStacks stacks, sets overflowed() (the stacks past the
// bound are dropped); callers report it as kResourceExhausted. Left
// recursion is refused by the parser, so expansion always ends.
//
// Threading: a GbnfRecognizer only reads its grammar; it works on the arena
// it is given. Not thread-safe on one arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "grammar/gbnf.h"

namespace minfer::grammar {

inline constexpr size_t kMaxGbnfStacks = 4096;
inline constexpr uint32_t kMaxGbnfStackDepth = 1024;

struct GbnfFrame {
  int32_t parent = -1;  // the frame below (-1: none)
  int32_t pos = 0;      // element index: a class to match, or a rule reference
  uint32_t depth = 1;   // frames in the stack, this one included
  uint32_t hash = 0;    // of the whole stack
};

// A code point in the middle of its UTF-8 bytes: `value` holds the bits so
// far and `pending` the continuation bytes still to come (0: none).
struct Utf8Partial {
  uint32_t value = 0;
  uint8_t pending = 0;
  uint8_t length = 1;  // the sequence's bytes in all (overlong forms are refused)
};

class GbnfRecognizer {
 public:
  GbnfRecognizer(const GbnfGrammar& grammar, std::vector<GbnfFrame>& arena)
      : g_(grammar), arena_(arena) {}

  // Appends the start stacks (root's alternatives, expanded) to `out`.
  void start(std::vector<int32_t>& out);

  // Steps the stacks in[begin, end) by one byte, appending the survivors to
  // `in` itself (from index end on) and returning the UTF-8 state after the
  // byte in `next`. Returns false for a byte that is not UTF-8 here (then
  // nothing is appended).
  bool step(std::vector<int32_t>& in, size_t begin, size_t end, Utf8Partial partial, uint8_t byte,
            Utf8Partial& next);

  // Sorts v[begin..] and removes stacks equal to another; returns the new end.
  size_t dedupe(std::vector<int32_t>& v, size_t begin) const;

  bool overflowed() const { return overflowed_; }

 private:
  void advance(int32_t top, uint32_t cp, std::vector<int32_t>& out);
  void expand(int32_t frame, std::vector<int32_t>& out, size_t out_begin);
  int32_t push(int32_t parent, int32_t pos);
  bool same_stack(int32_t a, int32_t b) const;

  const GbnfGrammar& g_;
  std::vector<GbnfFrame>& arena_;
  bool overflowed_ = false;
};

}  // namespace minfer::grammar
