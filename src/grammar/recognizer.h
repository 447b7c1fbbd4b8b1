// Recognizer: the byte-level pushdown automaton behind JsonConstraint.
//
// A parse state is a stack of Frames (one per open value: the root, each open
// object or array, and the string, number or literal being written). Stacks
// are persistent linked lists in an arena: stepping a state by one byte
// pushes a new top frame (or a copy of the parent with its phase advanced)
// and shares everything below, so a byte costs O(1) and the mask walk can
// undo a step by truncating the arena. Nondeterminism (anyOf, optional
// properties, a number that may end or go on) is a *set* of stacks.
//
// Whitespace between tokens (after '{', '[', ',', ':', before ':', ',', '}',
// ']', and before the top-level value) is bounded so that a model cannot loop
// on it: at most one '\n', which must come first, then at most
// kMaxIndentSpaces spaces ("\n" + 16 spaces at most). No tabs, no '\r', and
// nothing at all after the top-level value.
//
// Nesting is bounded by kMaxNesting open objects/arrays, and a value is
// started only where its Node::min_nesting still fits under that bound, so
// that no state leads to a dead end. Numbers are bounded
// to kMaxIntegerDigits integer digits, kMaxFractionDigits fraction digits and
// kMaxExponentDigits exponent digits, so that every number generated is a
// finite double (nlohmann::json refuses 1e400) and digits cannot run forever.
// The bounds are a subset of RFC 8259, which lets parsers limit numbers.
//
// Threading: a Recognizer only reads its grammar; it works on the arena it is
// given. Not thread-safe on one arena.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/json_grammar.h"

namespace minfer::grammar {

inline constexpr int kMaxIndentSpaces = 16;
inline constexpr int kMaxNesting = 64;
inline constexpr int32_t kMaxIntegerDigits = 20;
inline constexpr int32_t kMaxFractionDigits = 20;
inline constexpr int32_t kMaxExponentDigits = 2;

enum class FrameKind : uint8_t { kRoot, kObject, kArray, kString, kExtraKey, kNumber, kLiteral };

struct Frame {
  int32_t parent = -1;  // arena index of the frame below; -1 for the root
  int32_t node = -1;    // grammar node (the root frame: the top-level value's node)
  int32_t a = 0;        // object: next declared property; array: items done;
                        // string: code points; extra key: first candidate name;
                        // literal: bytes matched; number: digits of this part
  int32_t b = 0;        // object: current property (-1: additional); string: \u value;
                        // extra key: end of candidate names
  int32_t c = 0;        // object: key bytes matched; extra key: key bytes
  FrameKind kind = FrameKind::kRoot;
  uint8_t phase = 0;
  uint8_t ws = 0;      // whitespace run so far: spaces | kWsNewline
  uint8_t aux = 0;     // strings: pending UTF-8 bytes | next byte's range << 2; \u digits
  uint16_t depth = 0;  // open objects/arrays below and including this frame
  uint32_t hash = 0;   // of the whole stack (fields and parent's hash); set by push

  bool same_fields(const Frame& o) const {
    return hash == o.hash && node == o.node && a == o.a && b == o.b && c == o.c && kind == o.kind &&
           phase == o.phase && ws == o.ws && aux == o.aux && depth == o.depth;
  }
};

// Phases, per frame kind.
enum RootPhase : uint8_t { kRootBefore, kRootInValue, kRootDone };
enum ObjectPhase : uint8_t {
  kObjAfterOpen,
  kObjAfterComma,
  kObjInKey,
  kObjInExtraKey,  // waiting for an additional-property key (child frame)
  kObjColon,
  kObjBeforeValue,
  kObjInValue,  // waiting for a member value (child frame)
  kObjAfterValue,
};
enum ArrayPhase : uint8_t { kArrAfterOpen, kArrAfterComma, kArrInItem, kArrAfterItem };
enum StringPhase : uint8_t {
  kStrChars,
  kStrEscape,
  kStrHex,         // aux: digits so far, b: value
  kStrPairEscape,  // after a high surrogate: expecting '\'
  kStrPairU,       // expecting 'u'
  kStrPairHex,     // the low surrogate's digits
};
enum NumberPhase : uint8_t {
  kNumMinus,
  kNumZero,  // accepting
  kNumInt,   // accepting
  kNumDot,
  kNumFrac,  // accepting
  kNumExp,
  kNumExpSign,
  kNumExpDigits,  // accepting
};

class Recognizer {
 public:
  Recognizer(const JsonGrammar& grammar, std::vector<Frame>& arena) : g_(grammar), arena_(arena) {}

  // Pushes the start state for a text that is one value of `node`; returns it.
  int32_t start(int32_t node);

  // Appends to `out` every state reachable from `state` by consuming `byte`.
  void step(int32_t state, uint8_t byte, std::vector<int32_t>& out);

  // True when the text up to `state` is one whole value (the root is done, or
  // a top-level number that may end here).
  bool can_end(int32_t state) const;

  // True for a state inside a string's characters (not in an escape or a
  // UTF-8 sequence) where any complete UTF-8 character other than '"', '\\'
  // and controls keeps the state alive; `capacity` is how many more code
  // points fit (kUnbounded when unlimited).
  bool is_free_string(int32_t state, int64_t& capacity) const;

  // Structural equality of two stacks.
  bool same_stack(int32_t x, int32_t y) const;

  // Removes later duplicates from out[begin, end) (keeps the first of each,
  // in order); returns the new end. O(n log n) in the states, through the
  // stack hashes.
  size_t dedupe(std::vector<int32_t>& out, size_t begin) const;

 private:
  int32_t push(const Frame& f);
  void emit(Frame f, std::vector<int32_t>& out) { out.push_back(push(f)); }
  // The parent's state once its child value (ending now) is done.
  int32_t finished(int32_t parent);
  void enter(int32_t node, uint8_t byte, int32_t parent, uint16_t depth, std::vector<int32_t>& out);
  bool take_ws(Frame& f, uint8_t byte) const;
  // A value of `node` (-1: none) may start inside a frame of depth `depth`.
  bool fits(int32_t node, int32_t depth) const;
  // After a member of object frame `f`, some property or additional key fits.
  bool may_continue(const Frame& f) const;
  void step_root(int32_t s, uint8_t byte, std::vector<int32_t>& out);
  void step_object(int32_t s, uint8_t byte, std::vector<int32_t>& out);
  void start_key(const Frame& f, std::vector<int32_t>& out);
  void step_array(int32_t s, uint8_t byte, std::vector<int32_t>& out);
  void step_string(int32_t s, uint8_t byte, std::vector<int32_t>& out);
  void step_hex(Frame f, uint8_t byte, std::vector<int32_t>& out);
  void step_extra_key(int32_t s, uint8_t byte, std::vector<int32_t>& out);
  void step_number(int32_t s, uint8_t byte, std::vector<int32_t>& out);

  const JsonGrammar& g_;
  std::vector<Frame>& arena_;
};

// The same as Recognizer::can_end, for callers that only read an arena.
bool state_can_end(const std::vector<Frame>& arena, int32_t state);

// True when `text` is, in full, one value of grammar node `node` (used to
// filter enum values by sibling keywords, and by tests).
bool matches(const JsonGrammar& grammar, int32_t node, std::string_view text);

}  // namespace minfer::grammar
