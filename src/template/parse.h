// Parsing a Jinja template (the subset chat templates use) into a syntax
// tree (template/ast.h), with the whitespace rules HF's apply_chat_template
// sets: trim_blocks (the first newline after a block or comment tag is
// dropped), lstrip_blocks (spaces and tabs from a line's start to a block or
// comment tag are dropped; "{%+" keeps them) and "-" on a tag's side
// dropping all whitespace on that side.
//
// Statements: if / elif / else, for (with an "if" filter, else, loop.*),
// set (names, tuples, namespace attributes, blocks), macro, break, continue,
// filter blocks, raw, generation (rendered as its body). Expressions: the
// literals, lists, tuples, dicts; attributes, subscripts, slices, calls
// with keyword arguments; filters and "is" tests; not, and, or, in, not in,
// comparisons, + - * / // % ** ~, unary minus, a if b else c.
// Errors name the line and what was expected.
#pragma once

#include <string_view>

#include "base/status.h"
#include "template/ast.h"

namespace minfer::tmpl {

Result<Body> parse_template(std::string_view source);

}  // namespace minfer::tmpl
