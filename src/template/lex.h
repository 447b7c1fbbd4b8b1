// The template's lexical layer: the source cut into text and tags with the
// whitespace rules applied (template/parse.h lists them), and a tag's inside
// cut into tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace minfer::tmpl {

struct Segment {
  enum class Kind { kText, kExpr, kStmt } kind;
  std::string text;  // the text, or the tag's inside
  int line;          // where it starts (1-based)
};

Result<std::vector<Segment>> lex_segments(std::string_view source);

struct Token {
  enum class Kind { kName, kInt, kFloat, kString, kOp, kEnd } kind;
  std::string text;  // name, operator, the string's value (unescaped), the number's digits
  int line;
};

// A tag's tokens, ending with one kEnd. Strings take Python's escapes.
Result<std::vector<Token>> lex_tokens(std::string_view tag, int line);

}  // namespace minfer::tmpl
