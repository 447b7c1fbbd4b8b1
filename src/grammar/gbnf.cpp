#include "grammar/gbnf.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include "base/utf8.h"

namespace minfer::grammar {

using Range = GbnfGrammar::Range;
using Kind = GbnfElement::Kind;

// The parser's own form: rules as vectors of alternatives, flattened into
// GbnfGrammar at the end once every name is known.
struct ParsedElement {
  Kind kind = Kind::kChars;
  bool negated = false;
  int32_t rule = -1;
  std::vector<Range> ranges;
};
using Alternative = std::vector<ParsedElement>;

struct ParsedRule {
  std::string name;      // a generated rule: its owner's name with '#' and a number
  bool defined = false;  // a named rule: its definition was seen
  size_t first_ref = 0;  // where it was first referenced (for "not defined")
  std::vector<Alternative> alternatives;
};

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}
  Result<std::shared_ptr<const GbnfGrammar>> run();

 private:
  bool eof() const { return pos_ >= text_.size(); }
  char peek() const { return eof() ? '\0' : text_[pos_]; }
  Status error_at(size_t pos, const std::string& what) const;
  Status expected(const std::string& what) const { return error_at(pos_, "expected " + what); }

  void skip_space(bool newlines);
  Result<std::string> parse_name();
  int32_t rule_id(const std::string& name, size_t at);
  Result<int32_t> new_rule(std::vector<Alternative> alternatives);
  Status count_elements(size_t n);

  Status parse_rule();
  Result<std::vector<Alternative>> parse_alternatives(bool nested);
  Result<Alternative> parse_sequence(bool nested);
  Status parse_literal(Alternative& seq);
  Status parse_class(Alternative& seq);
  Status parse_group(Alternative& seq);
  Result<uint32_t> parse_char(bool in_class);
  Result<uint32_t> parse_escape();
  Result<uint32_t> parse_count();
  Status parse_repetition(Alternative& seq, size_t start);
  Status repeat(Alternative& seq, size_t start, uint32_t min, uint32_t max, bool unbounded);

  Status check_rules() const;
  Status check_left_recursion() const;
  std::shared_ptr<const GbnfGrammar> flatten() const;

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::string current_;  // the rule being defined (names generated rules)
  size_t n_elements_ = 0;
  std::vector<ParsedRule> rules_;
  std::map<std::string, int32_t, std::less<>> ids_;
};

Status GbnfParser::error_at(size_t pos, const std::string& what) const {
  pos = std::min(pos, text_.size());
  const size_t line = 1 + static_cast<size_t>(std::count(text_.begin(), text_.begin() + pos, '\n'));
  const size_t line_start = text_.rfind('\n', pos == 0 ? 0 : pos - 1);
  const size_t column =
      pos + 1 - (line_start == std::string_view::npos || pos == 0 ? 0 : line_start + 1);
  return Status::invalid_argument("GBNF grammar: line " + std::to_string(line) + ", column " +
                                  std::to_string(column) + ": " + what);
}

void GbnfParser::skip_space(bool newlines) {
  while (!eof()) {
    const char c = peek();
    if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
      ++pos_;
    } else if (c == '#') {
      while (!eof() && peek() != '\n') ++pos_;
    } else {
      return;
    }
  }
}

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<std::string> GbnfParser::parse_name() {
  const size_t start = pos_;
  while (!eof() && is_name_char(peek())) ++pos_;
  if (pos_ == start) return expected("a rule name");
  return std::string(text_.substr(start, pos_ - start));
}

int32_t GbnfParser::rule_id(const std::string& name, size_t at) {
  if (const auto it = ids_.find(name); it != ids_.end()) return it->second;
  const auto id = static_cast<int32_t>(rules_.size());
  rules_.push_back(ParsedRule{name, false, at, {}});
  ids_.emplace(name, id);
  return id;
}

Result<int32_t> GbnfParser::new_rule(std::vector<Alternative> alternatives) {
  if (rules_.size() >= kMaxGbnfRules) {
    return expected("at most " + std::to_string(kMaxGbnfRules) +
                    " rules (groups and repetitions count as rules; the limit is in "
                    "docs/GRAMMAR.md)");
  }
  MINFER_RETURN_IF_ERROR(count_elements(alternatives.size()));  // their ends
  const auto id = static_cast<int32_t>(rules_.size());
  rules_.push_back(
      ParsedRule{current_ + "#" + std::to_string(id), true, pos_, std::move(alternatives)});
  return id;
}

Status GbnfParser::count_elements(size_t n) {
  n_elements_ += n;
  if (n_elements_ > kMaxGbnfElements) {
    return expected("at most " + std::to_string(kMaxGbnfElements) +
                    " elements once repetitions are expanded (the limit is in docs/GRAMMAR.md)");
  }
  return Status::ok();
}

Status GbnfParser::parse_rule() {
  const size_t at = pos_;
  MINFER_ASSIGN_OR_RETURN(std::string name, parse_name());
  skip_space(false);
  if (text_.substr(pos_, 3) != "::=") return expected("'::=' after the rule name '" + name + "'");
  pos_ += 3;
  skip_space(true);
  const int32_t id = rule_id(name, at);
  if (rules_[id].defined) return error_at(at, "rule '" + name + "' is defined twice");
  rules_[id].defined = true;
  current_ = name;
  MINFER_ASSIGN_OR_RETURN(std::vector<Alternative> alternatives, parse_alternatives(false));
  MINFER_RETURN_IF_ERROR(count_elements(alternatives.size()));
  rules_[id].alternatives = std::move(alternatives);
  skip_space(false);
  if (!eof() && peek() != '\n') return expected("an element, '|' or the end of the line");
  return Status::ok();
}

Result<std::vector<Alternative>> GbnfParser::parse_alternatives(bool nested) {
  std::vector<Alternative> out;
  MINFER_ASSIGN_OR_RETURN(Alternative first, parse_sequence(nested));
  out.push_back(std::move(first));
  while (peek() == '|') {
    ++pos_;
    skip_space(true);
    MINFER_ASSIGN_OR_RETURN(Alternative next, parse_sequence(nested));
    out.push_back(std::move(next));
  }
  return out;
}

Result<Alternative> GbnfParser::parse_sequence(bool nested) {
  Alternative seq;
  size_t last_start = 0;  // where the element a repetition applies to starts
  bool have_element = false;
  while (!eof()) {
    const char c = peek();
    const size_t start = seq.size();
    if (c == '"') {
      MINFER_RETURN_IF_ERROR(parse_literal(seq));
    } else if (c == '[') {
      MINFER_RETURN_IF_ERROR(parse_class(seq));
    } else if (c == '.') {
      ++pos_;
      seq.push_back(ParsedElement{Kind::kChars, true, -1, {}});  // the complement of nothing
    } else if (c == '(') {
      MINFER_RETURN_IF_ERROR(parse_group(seq));
    } else if (is_name_char(c)) {
      const size_t at = pos_;
      MINFER_ASSIGN_OR_RETURN(std::string name, parse_name());
      seq.push_back(ParsedElement{Kind::kRule, false, rule_id(name, at), {}});
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (!have_element) return expected("an element before '" + std::string(1, c) + "'");
      MINFER_RETURN_IF_ERROR(parse_repetition(seq, last_start));
      have_element = false;
      skip_space(nested);
      continue;
    } else {
      break;
    }
    MINFER_RETURN_IF_ERROR(count_elements(seq.size() - start));
    last_start = start;
    have_element = seq.size() > start;
    skip_space(nested);
  }
  return seq;
}

Status GbnfParser::parse_literal(Alternative& seq) {
  const size_t open = pos_++;
  while (peek() != '"') {
    if (eof() || peek() == '\n') {
      return error_at(pos_, "expected '\"' to close the literal opened at column " +
                                std::to_string(open + 1 - (text_.rfind('\n', open) + 1)));
    }
    MINFER_ASSIGN_OR_RETURN(uint32_t cp, parse_char(false));
    seq.push_back(ParsedElement{Kind::kChars, false, -1, {{cp, cp}}});
  }
  ++pos_;
  return Status::ok();
}

Status GbnfParser::parse_class(Alternative& seq) {
  ++pos_;
  ParsedElement e{Kind::kChars, false, -1, {}};
  if (peek() == '^') {
    e.negated = true;
    ++pos_;
  }
  while (peek() != ']') {
    if (eof()) return expected("']' to close the character class");
    MINFER_ASSIGN_OR_RETURN(uint32_t lo, parse_char(true));
    uint32_t hi = lo;
    if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
      ++pos_;
      const size_t at = pos_;
      MINFER_ASSIGN_OR_RETURN(hi, parse_char(true));
      if (hi < lo) return error_at(at, "expected a range end not below its start");
    }
    e.ranges.emplace_back(lo, hi);
  }
  if (e.ranges.empty()) return expected("a character before ']' (an empty class matches nothing)");
  ++pos_;
  std::sort(e.ranges.begin(), e.ranges.end());
  std::vector<Range> merged;
  for (const Range& r : e.ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  e.ranges = std::move(merged);
  seq.push_back(std::move(e));
  return Status::ok();
}

Status GbnfParser::parse_group(Alternative& seq) {
  const size_t open = pos_++;
  if (++depth_ > kMaxGbnfGroupNesting) {
    return error_at(open, "expected groups nested at most " + std::to_string(kMaxGbnfGroupNesting) +
                              " deep (the limit is in docs/GRAMMAR.md)");
  }
  skip_space(true);
  MINFER_ASSIGN_OR_RETURN(std::vector<Alternative> alternatives, parse_alternatives(true));
  if (peek() != ')')
    return expected("')' to close the group opened at byte " + std::to_string(open + 1));
  ++pos_;
  --depth_;
  MINFER_ASSIGN_OR_RETURN(int32_t id, new_rule(std::move(alternatives)));
  seq.push_back(ParsedElement{Kind::kRule, false, id, {}});
  return Status::ok();
}

Result<uint32_t> GbnfParser::parse_char(bool in_class) {
  if (peek() == '\\') return parse_escape();
  if (!in_class && peek() == '\n') return expected("a character");
  const int n = utf8_sequence_status(text_.substr(pos_));
  if (n <= 0) return expected("well-formed UTF-8");
  size_t p = pos_;
  const uint32_t cp = decode_utf8(text_, p);
  pos_ = p;
  return cp;
}

Result<uint32_t> GbnfParser::parse_escape() {
  const size_t at = pos_++;
  const char c = peek();
  ++pos_;
  switch (c) {
    case 'n':
      return uint32_t{'\n'};
    case 't':
      return uint32_t{'\t'};
    case 'r':
      return uint32_t{'\r'};
    case '\\':
    case '"':
    case '[':
    case ']':
    case '-':
      return static_cast<uint32_t>(c);
    default:
      break;
  }
  const int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
  if (digits == 0) {
    return error_at(at,
                    "expected an escape: \\n \\t \\r \\\\ \\\" \\[ \\] \\- \\xHH \\uHHHH or "
                    "\\UHHHHHHHH");
  }
  uint64_t v = 0;
  for (int i = 0; i < digits; ++i, ++pos_) {
    const int h = eof() ? -1 : hex_value(peek());
    if (h < 0) return expected(std::to_string(digits) + " hex digits after \\" + std::string(1, c));
    v = v * 16 + static_cast<uint64_t>(h);
  }
  if (v > 0x10FFFF) return error_at(at, "expected a code point up to U+10FFFF");
  return static_cast<uint32_t>(v);
}

Result<uint32_t> GbnfParser::parse_count() {
  const size_t start = pos_;
  uint64_t v = 0;
  while (!eof() && peek() >= '0' && peek() <= '9') {
    v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(peek() - '0'), uint64_t{1} << 40);
    ++pos_;
  }
  if (pos_ == start) return expected("a repetition count");
  if (v > kMaxGbnfRepetition) {
    return error_at(start, "expected a repetition count up to " +
                               std::to_string(kMaxGbnfRepetition) +
                               " (the limit is in docs/GRAMMAR.md)");
  }
  return static_cast<uint32_t>(v);
}

Status GbnfParser::parse_repetition(Alternative& seq, size_t start) {
  const char c = peek();
  ++pos_;
  if (c == '*') return repeat(seq, start, 0, 0, true);
  if (c == '+') return repeat(seq, start, 1, 0, true);
  if (c == '?') return repeat(seq, start, 0, 1, false);
  skip_space(true);
  MINFER_ASSIGN_OR_RETURN(uint32_t min, parse_count());
  skip_space(true);
  uint32_t max = min;
  bool unbounded = false;
  if (peek() == ',') {
    ++pos_;
    skip_space(true);
    if (peek() == '}') {
      unbounded = true;
    } else {
      const size_t at = pos_;
      MINFER_ASSIGN_OR_RETURN(max, parse_count());
      if (max < min) return error_at(at, "expected a maximum not below the minimum");
      skip_space(true);
    }
  }
  if (peek() != '}') return expected("'}' to close the repetition");
  ++pos_;
  return repeat(seq, start, min, max, unbounded);
}

// Rewrites seq[start..] (the element just parsed) as `min` copies of it and
// then either a star rule (unbounded) or max - min nested optional rules.
Status GbnfParser::repeat(Alternative& seq, size_t start, uint32_t min, uint32_t max,
                          bool unbounded) {
  Alternative span(std::make_move_iterator(seq.begin() + static_cast<ptrdiff_t>(start)),
                   std::make_move_iterator(seq.end()));
  seq.resize(start);
  ParsedElement x = span.front();
  if (span.size() > 1) {  // a literal of several characters repeats as a whole
    MINFER_ASSIGN_OR_RETURN(int32_t id, new_rule({std::move(span)}));
    x = ParsedElement{Kind::kRule, false, id, {}};
  }
  const size_t optional = unbounded ? 1 : static_cast<size_t>(max - min);
  MINFER_RETURN_IF_ERROR(count_elements(static_cast<size_t>(min) + 3 * optional + 3));
  for (uint32_t i = 0; i < min; ++i) seq.push_back(x);
  if (unbounded) {
    // star ::= x star | ""; its id is the next rule's, known before it exists
    const auto star = static_cast<int32_t>(rules_.size());
    MINFER_ASSIGN_OR_RETURN(int32_t id,
                            new_rule({{x, ParsedElement{Kind::kRule, false, star, {}}}, {}}));
    seq.push_back(ParsedElement{Kind::kRule, false, id, {}});
    return Status::ok();
  }
  int32_t inner = -1;  // opt_k ::= x opt_{k-1} | ""
  for (uint32_t k = min; k < max; ++k) {
    Alternative first{x};
    if (inner >= 0) first.push_back(ParsedElement{Kind::kRule, false, inner, {}});
    MINFER_ASSIGN_OR_RETURN(inner, new_rule({std::move(first), {}}));
  }
  if (inner >= 0) seq.push_back(ParsedElement{Kind::kRule, false, inner, {}});
  return Status::ok();
}

Status GbnfParser::check_rules() const {
  const auto root = ids_.find("root");
  if (root == ids_.end() || !rules_[root->second].defined) {
    return Status::invalid_argument(
        "GBNF grammar: no rule 'root' (the rule generation starts from)");
  }
  for (const ParsedRule& r : rules_) {
    if (!r.defined) return error_at(r.first_ref, "rule '" + r.name + "' is not defined");
  }
  return Status::ok();
}

// A rule that reaches itself before consuming a character would make the
// recognizer's expansion loop. Which rules can match the empty text is found
// first (a worklist, linear in the elements); a rule then "starts with" each
// rule reference preceded only by such rules, and a cycle of that relation
// is refused.
Status GbnfParser::check_left_recursion() const {
  const size_t n = rules_.size();
  std::vector<uint8_t> nullable(n, 0);
  std::vector<std::vector<std::pair<int32_t, size_t>>> users(n);  // (rule, alternative)
  std::vector<std::vector<size_t>> pending(n);
  std::vector<int32_t> work;
  for (size_t r = 0; r < n; ++r) {
    const auto& alts = rules_[r].alternatives;
    pending[r].assign(alts.size(), 0);
    for (size_t a = 0; a < alts.size(); ++a) {
      bool chars = false;
      for (const ParsedElement& e : alts[a]) chars = chars || e.kind == Kind::kChars;
      if (chars) {
        pending[r][a] = SIZE_MAX;
        continue;
      }
      pending[r][a] = alts[a].size();
      for (const ParsedElement& e : alts[a]) users[e.rule].emplace_back(static_cast<int32_t>(r), a);
      if (alts[a].empty() && !nullable[r]) {
        nullable[r] = 1;
        work.push_back(static_cast<int32_t>(r));
      }
    }
  }
  while (!work.empty()) {
    const int32_t done = work.back();
    work.pop_back();
    for (const auto& [r, a] : users[done]) {
      if (pending[r][a] != SIZE_MAX && --pending[r][a] == 0 && !nullable[r]) {
        nullable[r] = 1;
        work.push_back(r);
      }
    }
  }
  std::vector<std::vector<int32_t>> starts(n);
  for (size_t r = 0; r < n; ++r) {
    for (const Alternative& alt : rules_[r].alternatives) {
      for (const ParsedElement& e : alt) {
        if (e.kind != Kind::kRule) break;
        starts[r].push_back(e.rule);
        if (!nullable[e.rule]) break;
      }
    }
  }
  // Iterative depth-first search: 0 unvisited, 1 on the path, 2 done.
  std::vector<uint8_t> color(n, 0);
  std::vector<std::pair<int32_t, size_t>> path;
  for (size_t s = 0; s < n; ++s) {
    if (color[s] != 0) continue;
    path.emplace_back(static_cast<int32_t>(s), 0);
    color[s] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == starts[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const int32_t to = starts[r][next++];
      if (color[to] == 1) {
        const std::string& name = rules_[to].name;
        const std::string owner = name.substr(0, name.find('#'));
        return Status::invalid_argument(
            "GBNF grammar: rule '" + owner +
            "' is left-recursive: it can reach itself before matching a character (through " +
            (owner == name ? "a rule reference"
                           : "a group or a repetition of something that "
                             "can match the empty text") +
            ")");
      }
      if (color[to] == 0) {
        color[to] = 1;
        path.emplace_back(to, 0);
      }
    }
  }
  return Status::ok();
}

std::shared_ptr<const GbnfGrammar> GbnfParser::flatten() const {
  std::shared_ptr<GbnfGrammar> g(new GbnfGrammar());
  g->root_ = ids_.find("root")->second;
  for (const ParsedRule& r : rules_) {
    g->rule_names_.push_back(r.name);
    std::vector<int32_t> starts;
    for (const Alternative& alt : r.alternatives) {
      starts.push_back(static_cast<int32_t>(g->elements_.size()));
      for (const ParsedElement& e : alt) {
        GbnfElement out{e.kind, e.negated, e.rule, static_cast<uint32_t>(g->ranges_.size()),
                        static_cast<uint32_t>(e.ranges.size())};
        g->ranges_.insert(g->ranges_.end(), e.ranges.begin(), e.ranges.end());
        g->elements_.push_back(out);
      }
      g->elements_.push_back(GbnfElement{});
    }
    g->rule_alternatives_.push_back(std::move(starts));
  }
  return g;
}

Result<std::shared_ptr<const GbnfGrammar>> GbnfParser::run() {
  if (text_.size() > kMaxGbnfTextBytes) {
    return Status::invalid_argument("GBNF grammar: " + std::to_string(text_.size()) +
                                    " bytes, above the limit of " +
                                    std::to_string(kMaxGbnfTextBytes) + " (docs/GRAMMAR.md)");
  }
  skip_space(true);
  while (!eof()) {
    MINFER_RETURN_IF_ERROR(parse_rule());
    skip_space(true);
  }
  MINFER_RETURN_IF_ERROR(check_rules());
  MINFER_RETURN_IF_ERROR(check_left_recursion());
  return flatten();
}

Result<std::shared_ptr<const GbnfGrammar>> GbnfGrammar::parse(std::string_view text) {
  return GbnfParser(text).run();
}

bool GbnfGrammar::matches(const GbnfElement& e, uint32_t cp) const {
  const auto begin = ranges_.begin() + e.first_range;
  const auto end = begin + e.n_ranges;
  // The first range whose end is at or past cp (ranges are sorted and disjoint).
  const auto it =
      std::lower_bound(begin, end, cp, [](const Range& r, uint32_t v) { return r.second < v; });
  const bool in = it != end && it->first <= cp;
  return in != e.negated;
}

bool GbnfGrammar::may_match(const GbnfElement& e, uint32_t lo, uint32_t hi) const {
  const auto begin = ranges_.begin() + e.first_range;
  const auto end = begin + e.n_ranges;
  const auto it =
      std::lower_bound(begin, end, lo, [](const Range& r, uint32_t v) { return r.second < v; });
  if (!e.negated) return it != end && it->first <= hi;
  // Merged ranges: [lo, hi] is wholly excluded only when one range covers it.
  return !(it != end && it->first <= lo && it->second >= hi);
}

}  // namespace minfer::grammar
