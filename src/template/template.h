// A Jinja template of the subset chat templates use, parsed once and
// rendered with a context of values (template/value.h). Our own interpreter,
// checked against Python's jinja2 on real chat templates
// (tests/template/, tools/gen_template_goldens.py).
//
// Contract:
//   - parse() reads the source (template/parse.h: syntax and whitespace rules);
//     an error names the line.
//   - render(context) evaluates with Jinja's semantics: for-loops scope their
//     variables (namespace() objects carry state out), `loop` gives index,
//     index0, revindex, revindex0, first, last, length, previtem, nextitem and
//     cycle(); missing dict keys and names are undefined (printing nothing,
//     false), an attribute of an undefined value is an error.
//   - Globals: range, namespace, dict, raise_exception (its message becomes
//     the error), strftime_now (formats the current local time), plus the
//     context. Filters: trim, tojson, length/count, string, int, float,
//     lower, upper, title, capitalize, join, default/d, first, last, list,
//     reverse, sort, unique, map, select, reject, selectattr, rejectattr,
//     replace, indent, items, dictsort, safe, e/escape, abs, round, sum,
//     batch, wordcount, center, min, max (safe and e/escape make Markup,
//     template/value.h; select, reject, selectattr, rejectattr and map give
//     nothing for a falsy input, none included). Tests: defined, undefined,
//     none, boolean, true, false, string, number, integer, float, mapping,
//     iterable, sequence, callable, odd, even, divisibleby, eq/equalto/==,
//     ne/!=, lt/<, le/<=, gt/>, ge/>=, in, sameas, lower, upper (`in` as
//     Python's: an error for none or a number on the right). String
//     methods: strip, lstrip, rstrip, split, rsplit, startswith, endswith,
//     upper, lower, title, capitalize, replace, find, count, join, format
//     (%-free {} only); dict: items, keys, values, get; list: index, count.
//   - Rendering is bounded (range() of more than 100000 items, macro
//     recursion past depth 64 and a string repeated past 1 MiB are errors):
//     a bad template fails, never hangs. A context value nested past
//     kMaxValueDepth (template/value.h) is refused before rendering, and no
//     value's printing, tojson or comparison recurses past that depth.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "template/ast.h"
#include "template/value.h"

namespace minfer::tmpl {

class Template {
 public:
  static Result<Template> parse(std::string_view source);
  Result<std::string> render(const Dict& context) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace minfer::tmpl
