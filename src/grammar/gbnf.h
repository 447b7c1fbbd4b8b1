// GbnfGrammar: a GBNF grammar (llama.cpp's grammar syntax, as llama-server's
// "grammar" field carries it) parsed into flat rules over Unicode code points.
//
// Syntax: rules `name ::= alternatives`, names of letters, digits and '-';
// `root` is the start rule. Alternatives are separated by '|'; a sequence is
// elements side by side; `( ... )` groups; `"..."` is a literal; `[...]` and
// `[^...]` are character classes with ranges `a-z`; `.` is any code point;
// `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` repeat the element before them;
// `#` starts a comment to the end of the line. Escapes in literals and
// classes: \n \t \r \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH. A rule ends at
// a newline, except inside a group or right after '|'.
//
// Contract:
// - parse(text) returns the grammar or a kInvalidArgument Status of the form
//   "grammar: line L, column C: expected X" (positions count bytes from 1),
//   or naming the rule for an undefined rule (at its first reference), a rule
//   defined twice, a missing root, and left recursion (a rule that reaches
//   itself before consuming a character; a repetition of something that can
//   be empty is one).
// - Limits (docs/GRAMMAR.md, "Limits"): the text, the rules, the elements
//   after repetitions are expanded, the repetition bounds and the nesting of
//   groups are bounded; a grammar past one is refused naming the limit, so a
//   hostile grammar costs at most a bounded parse.
// - The parsed form: every rule is a list of alternatives; an alternative is
//   a run of elements in elements() ended by a kEnd element. A kChars element
//   matches one code point (its merged, sorted ranges, or their complement);
//   a kRule element stands for one of the rule's alternatives. Groups and
//   repetitions become rules of their own.
//
// Threading: immutable after parse(); share it through the shared_ptr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace minfer::grammar {

inline constexpr size_t kMaxGbnfTextBytes = 256 * 1024;
inline constexpr size_t kMaxGbnfRules = 8192;
inline constexpr size_t kMaxGbnfElements = 131072;
inline constexpr uint32_t kMaxGbnfRepetition = 1000;
inline constexpr int kMaxGbnfGroupNesting = 64;

struct GbnfElement {
  enum class Kind : uint8_t { kEnd, kChars, kRule };
  Kind kind = Kind::kEnd;
  bool negated = false;      // kChars: matches the code points outside its ranges
  int32_t rule = -1;         // kRule
  uint32_t first_range = 0;  // kChars: ranges()[first_range, first_range + n_ranges)
  uint32_t n_ranges = 0;
};

class GbnfGrammar {
 public:
  using Range = std::pair<uint32_t, uint32_t>;  // inclusive code points

  [[nodiscard]] static Result<std::shared_ptr<const GbnfGrammar>> parse(std::string_view text);

  int32_t root() const { return root_; }
  size_t n_rules() const { return rule_alternatives_.size(); }
  const std::string& rule_name(int32_t rule) const { return rule_names_[rule]; }
  // Element indices where the rule's alternatives start.
  const std::vector<int32_t>& alternatives(int32_t rule) const { return rule_alternatives_[rule]; }
  const std::vector<GbnfElement>& elements() const { return elements_; }
  const GbnfElement& element(int32_t i) const { return elements_[i]; }

  // A kChars element matches code point `cp`.
  bool matches(const GbnfElement& e, uint32_t cp) const;
  // A kChars element matches some code point in [lo, hi].
  bool may_match(const GbnfElement& e, uint32_t lo, uint32_t hi) const;

 private:
  friend class GbnfParser;
  GbnfGrammar() = default;

  int32_t root_ = -1;
  std::vector<std::string> rule_names_;
  std::vector<std::vector<int32_t>> rule_alternatives_;
  std::vector<GbnfElement> elements_;
  std::vector<Range> ranges_;
};

}  // namespace minfer::grammar
