// The syntax tree of a parsed template (template/parse.h builds it,
// template/render.cpp walks it): expressions and statements of the Jinja
// subset that chat templates use.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace minfer::tmpl {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {  // a call or filter argument; name empty for positional ones
  std::string name;
  ExprPtr value;
};

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kAttr,     // a.name
    kIndex,    // a[b]
    kSlice,    // a[b:c:d] (each of b, c, d optional)
    kCall,     // a(args)
    kFilter,   // a | name(args)
    kTest,     // a is [not] name(args)
    kUnary,    // op a  ("not", "-", "+")
    kBinary,   // a op b
    kCond,     // a if b else c
    kList,     // [items]
    kTuple,    // (items)
    kDict,     // {items[0]: items[1], ...}
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;  // name, attribute, filter, test or operator
  bool negated = false;
  std::vector<ExprPtr> items;  // operands, elements, slice parts (null for absent)
  std::vector<Arg> args;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // conds[i] -> bodies[i]; bodies.back() the else when one more
    kFor,       // for targets in expr [if cond]: bodies[0], else bodies[1]
    kSet,       // set targets (or ns.attr) = expr
    kSetBlock,  // set name: bodies[0] rendered
    kMacro,     // macro name(params): bodies[0]
    kBreak,
    kContinue,
    kFilterBlock,  // filter name(args): bodies[0]
    kScope,        // a body rendered as it is ({% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;                      // output, for iterable, set value
  ExprPtr cond;                      // for's filter
  std::vector<ExprPtr> conds;        // if/elif conditions
  std::vector<Body> bodies;          // see above
  std::vector<std::string> targets;  // for/set names; set ns.attr: {ns, attr} with attr_target
  bool attr_target = false;
  std::string name;                                     // macro or filter name
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters, defaults
  std::vector<Arg> args;                                // filter block arguments
};

}  // namespace minfer::tmpl
