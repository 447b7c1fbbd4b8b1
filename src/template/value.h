// The values a chat template computes with: Jinja's (Python's) dynamic types
// as the templates of real models use them.
//
// Contract:
//   - A Value is undefined, none, a bool, an int (int64), a float (double), a
//     string (UTF-8), a list, a dict (keys are strings, insertion order kept),
//     a namespace (a dict whose attributes templates may set) or a function
//     (a global, a macro, a bound method).
//   - A list may be a tuple (tuple literals, dict items, dictsort): the same
//     list, printed as (a, b) and unequal to a list.
//   - A string may be markup (Jinja's Markup: what |safe and |escape give):
//     the same string, except that `markup + str` HTML-escapes the plain side
//     (template/strings.h's html_escape). Any other operation on it gives a
//     plain string.
//   - Lists and dicts are shared by reference like Python's (a copy of the
//     Value is the same list); templates cannot change them except through
//     namespace attributes, as in Jinja's immutable sandbox.
//   - str() is Python's str() (True, None, 1.0, lists as repr), truthy()
//     Python's truth, equals() Python's ==, to_json() json.dumps with the
//     separators HF's tojson filter uses (", " and ": "; with indent, "," and
//     newlines), non-ASCII kept as is.
//   - Nesting is bounded, so that neither a request's values nor a template's
//     own (a namespace that holds itself) can exhaust the stack: past
//     kMaxValueDepth levels of lists and dicts, to_json(), compare() and
//     check_depth() are errors naming the limit, repr()/str() write "..."
//     for what lies deeper (as Python's repr does for a list holding itself)
//     and equals() compares identity there.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace minfer::tmpl {

// More than any request body may nest (serve/request_json.h's 64) plus what
// a template wraps around it.
inline constexpr int kMaxValueDepth = 128;

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order
// A function: positional arguments, then keyword arguments.
using Function = std::function<Result<Value>(std::vector<Value>& args, Dict& kwargs)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // undefined
  static Value none();
  Value(bool b);  // NOLINT: implicit like the literals they stand for
  Value(int64_t i);
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(double d);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  static Value markup(std::string s);  // a string |safe made
  Value(List l, bool is_tuple = false);
  Value(Dict d, bool is_namespace = false);
  Value(Function f);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kDict && namespace_; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_markup() const { return kind_ == Kind::kString && markup_; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kFloat ? static_cast<int64_t>(d_) : i_; }
  double as_float() const { return kind_ == Kind::kInt ? static_cast<double>(i_) : d_; }
  const std::string& as_string() const { return *s_; }
  const List& as_list() const { return *l_; }
  const Dict& as_dict() const { return *m_; }
  Dict& mutable_dict() const { return *m_; }  // namespaces only
  const Function& as_function() const { return *f_; }

  // The value under key (dicts), or undefined.
  Value get(const std::string& key) const;
  void set(const std::string& key, Value v) const;  // dicts and namespaces

  bool truthy() const;
  std::string str() const;   // Python str()
  std::string repr() const;  // Python repr() (strings quoted)
  bool equals(const Value& o) const;
  // -1, 0, 1; an error for values Python cannot order.
  Result<int> compare(const Value& o) const;
  // json.dumps; indent < 0: one line.
  Result<std::string> to_json(int indent = -1) const;
  const char* type_name() const;
  // An error when lists and dicts nest deeper than kMaxValueDepth here.
  Status check_depth() const;

 private:
  Status json_into(std::string& out, int indent, int depth) const;
  void repr_into(std::string& out, int depth) const;
  bool equals_at(const Value& o, int depth) const;
  Result<int> compare_at(const Value& o, int depth) const;
  Status check_depth_at(int depth) const;

  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool namespace_ = false;
  bool tuple_ = false;   // a list that prints as Python's tuple
  bool markup_ = false;  // a string that is Jinja's Markup
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<List> l_;
  std::shared_ptr<Dict> m_;
  std::shared_ptr<const Function> f_;
};

// Python's float repr (shortest round-trip, "1.0", "inf", "nan").
std::string float_repr(double d);

}  // namespace minfer::tmpl
