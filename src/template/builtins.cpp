#include "template/builtins.h"

#include "template/strings.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <functional>
#include <string_view>
#include <unordered_map>

namespace minfer::tmpl {
namespace {

Status bad(const std::string& what) {
  return Status::invalid_argument(what);
}

Value arg(const std::vector<Value>& args, size_t i, const Dict& kwargs, const char* name) {
  for (const auto& [k, v] : kwargs) {
    if (k == name) return v;
  }
  return i < args.size() ? args[i] : Value();
}

// The attribute path "a.b" of v (map/selectattr/sort's attribute=).
Value path(const Value& v, const std::string& p) {
  Value cur = v;
  size_t i = 0;
  while (i <= p.size()) {
    const size_t j = std::min(p.find('.', i), p.size());
    cur = attribute(cur, p.substr(i, j - i));
    i = j + 1;
  }
  return cur;
}

Result<Value> sorted(const Value& v, std::vector<Value>& args, Dict& kwargs) {
  MINFER_ASSIGN_OR_RETURN(List items, items_of(v));
  const bool reverse = arg(args, 0, kwargs, "reverse").truthy();
  const bool case_sensitive = arg(args, 1, kwargs, "case_sensitive").truthy();
  const Value attr = arg(args, 2, kwargs, "attribute");
  auto key = [&](const Value& x) {
    Value k = attr.is_string() ? path(x, attr.as_string()) : x;
    if (!case_sensitive && k.is_string()) k = Value(lower(k.as_string()));
    return k;
  };
  Status err = Status::ok();
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    auto c = key(a).compare(key(b));
    if (!c) {
      err = c.status();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  MINFER_RETURN_IF_ERROR(err);
  return Value(std::move(items));
}

Result<Value> join(const Value& v, std::vector<Value>& args, Dict& kwargs) {
  MINFER_ASSIGN_OR_RETURN(List items, items_of(v));
  const Value sep = arg(args, 0, kwargs, "d");
  const Value attr = arg(args, 1, kwargs, "attribute");
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep.str();
    out += (attr.is_string() ? path(items[i], attr.as_string()) : items[i]).str();
  }
  return Value(std::move(out));
}

Result<Value> tojson(const Value& v, std::vector<Value>& args, Dict& kwargs) {
  const Value indent = arg(args, 0, kwargs, "indent");
  MINFER_ASSIGN_OR_RETURN(
      std::string s, v.to_json(indent.kind() == Value::Kind::kInt ? int(indent.as_int()) : -1));
  return Value(std::move(s));
}

Result<Value> indent(const Value& v, std::vector<Value>& args, Dict& kwargs) {
  const Value w = arg(args, 0, kwargs, "width");
  const std::string pad =
      w.is_string() ? w.as_string()
                    : std::string(static_cast<size_t>(w.is_number() ? w.as_int() : 4), ' ');
  const bool first = arg(args, 1, kwargs, "first").truthy();
  const bool blank = arg(args, 2, kwargs, "blank").truthy();
  const List lines = split(v.str(), Value("\n"), -1);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].as_string();
    if (i) out += '\n';
    if ((i > 0 || first) && (blank || !line.empty())) out += pad;
    out += line;
  }
  return Value(std::move(out));
}

// select/reject (test by name) and selectattr/rejectattr (test of an attribute).
// Like jinja2, select/reject/selectattr/rejectattr/map give nothing for a
// falsy input (none included: `tools | selectattr(...)` with tools = none).
Result<Value> select(const Value& v, std::vector<Value>& args, bool keep, bool by_attr) {
  if (!v.truthy()) return Value(List{});
  MINFER_ASSIGN_OR_RETURN(List items, items_of(v));
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (args.empty()) return bad("selectattr needs an attribute");
    attr = args[next++].str();
  }
  std::string test = next < args.size() ? args[next++].str() : "";
  std::vector<Value> rest(args.begin() + static_cast<std::ptrdiff_t>(std::min(next, args.size())),
                          args.end());
  List out;
  for (const Value& item : items) {
    const Value x = by_attr ? path(item, attr) : item;
    bool pass = x.truthy();
    if (!test.empty()) {
      MINFER_ASSIGN_OR_RETURN(pass, call_test(test, x, rest));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Result<Value> map(const Value& v, std::vector<Value>& args, Dict& kwargs) {
  if (!v.truthy()) return Value(List{});  // as select() above
  MINFER_ASSIGN_OR_RETURN(List items, items_of(v));
  const Value attr = arg({}, 0, kwargs, "attribute");
  List out;
  for (const Value& item : items) {
    if (attr.is_string()) {
      Value x = path(item, attr.as_string());
      if (x.is_undefined()) x = arg({}, 0, kwargs, "default");
      out.push_back(x);
      continue;
    }
    if (args.empty()) return bad("map needs a filter name or attribute=");
    std::vector<Value> rest(args.begin() + 1, args.end());
    Dict none;
    MINFER_ASSIGN_OR_RETURN(Value x, call_filter(args[0].str(), item, rest, none));
    out.push_back(std::move(x));
  }
  return Value(std::move(out));
}

Result<Value> minmax(const Value& v, bool want_max) {
  MINFER_ASSIGN_OR_RETURN(List items, items_of(v));
  if (items.empty()) return Value();
  Value best = items[0];
  for (const Value& x : items) {
    MINFER_ASSIGN_OR_RETURN(int c, x.compare(best));
    if (want_max ? c > 0 : c < 0) best = x;
  }
  return best;
}

using FilterFn = std::function<Result<Value>(const Value&, std::vector<Value>&, Dict&)>;

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> kTable = {
      {"trim",
       [](const Value& v, std::vector<Value>& a, Dict& k) -> Result<Value> {
         const Value chars = arg(a, 0, k, "chars");
         const std::string c = chars.is_string() ? chars.as_string() : "";
         return Value(strip(v.str(), chars.is_string() ? &c : nullptr, true, true));
       }},
      {"tojson", tojson},
      {"length",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         if (v.is_string()) return Value(static_cast<int64_t>(v.as_string().size()));
         MINFER_ASSIGN_OR_RETURN(List items, items_of(v));
         return Value(static_cast<int64_t>(items.size()));
       }},
      {"string",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> { return Value(v.str()); }},
      {"int",
       [](const Value& v, std::vector<Value>& a, Dict& k) -> Result<Value> {
         if (v.is_number()) return Value(v.as_int());
         if (v.kind() == Value::Kind::kBool) return Value(static_cast<int64_t>(v.as_bool()));
         char* end = nullptr;
         const std::string s = strip(v.str(), nullptr, true, true);
         const long long r = std::strtoll(s.c_str(), &end, 10);
         if (!s.empty() && end == s.c_str() + s.size()) return Value(static_cast<int64_t>(r));
         const Value d = arg(a, 0, k, "default");
         return d.is_undefined() ? Value(int64_t{0}) : d;
       }},
      {"float",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         if (v.is_number()) return Value(v.as_float());
         const std::string s = strip(v.str(), nullptr, true, true);
         char* end = nullptr;
         const double r = std::strtod(s.c_str(), &end);
         return Value(!s.empty() && end == s.c_str() + s.size() ? r : 0.0);
       }},
      {"lower",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         return Value(lower(v.str()));
       }},
      {"upper",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         return Value(upper(v.str()));
       }},
      {"title",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         return Value(title(v.str()));
       }},
      {"capitalize",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         return Value(capitalize(v.str()));
       }},
      {"join", join},
      {"default",
       [](const Value& v, std::vector<Value>& a, Dict& k) -> Result<Value> {
         const bool boolean = arg(a, 1, k, "boolean").truthy();
         if (v.is_undefined() || (boolean && !v.truthy())) {
           const Value d = arg(a, 0, k, "default_value");
           return d.is_undefined() ? Value("") : d;
         }
         return v;
       }},
      {"first",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         MINFER_ASSIGN_OR_RETURN(List items, items_of(v));
         return items.empty() ? Value() : items.front();
       }},
      {"last",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         MINFER_ASSIGN_OR_RETURN(List items, items_of(v));
         return items.empty() ? Value() : items.back();
       }},
      {"list",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         MINFER_ASSIGN_OR_RETURN(List items, items_of(v));
         return Value(std::move(items));
       }},
      {"reverse",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         if (v.is_string()) return Value(std::string(v.as_string().rbegin(), v.as_string().rend()));
         MINFER_ASSIGN_OR_RETURN(List items, items_of(v));
         std::reverse(items.begin(), items.end());
         return Value(std::move(items));
       }},
      {"sort", sorted},
      {"unique",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         MINFER_ASSIGN_OR_RETURN(List items, items_of(v));
         List out;
         for (const Value& x : items) {
           if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return y.equals(x); })) {
             out.push_back(x);
           }
         }
         return Value(std::move(out));
       }},
      {"map", map},
      {"select",
       [](const Value& v, std::vector<Value>& a, Dict&) { return select(v, a, true, false); }},
      {"reject",
       [](const Value& v, std::vector<Value>& a, Dict&) { return select(v, a, false, false); }},
      {"selectattr",
       [](const Value& v, std::vector<Value>& a, Dict&) { return select(v, a, true, true); }},
      {"rejectattr",
       [](const Value& v, std::vector<Value>& a, Dict&) { return select(v, a, false, true); }},
      {"replace",
       [](const Value& v, std::vector<Value>& a, Dict& k) -> Result<Value> {
         const Value count = arg(a, 2, k, "count");
         return Value(replace_all(v.str(), arg(a, 0, k, "old").str(), arg(a, 1, k, "new").str(),
                                  count.is_number() ? count.as_int() : -1));
       }},
      {"indent", indent},
      {"items",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         List out;
         if (v.is_dict()) {
           for (const auto& [key, val] : v.as_dict()) out.emplace_back(List{Value(key), val}, true);
         }
         return Value(std::move(out));
       }},
      {"dictsort",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         if (!v.is_dict()) return bad("dictsort needs a dict");
         Dict d = v.as_dict();
         std::stable_sort(d.begin(), d.end(), [](const auto& a, const auto& b) {
           return lower(a.first) < lower(b.first);
         });
         List out;
         for (const auto& [key, val] : d) out.emplace_back(List{Value(key), val}, true);
         return Value(std::move(out));
       }},
      {"safe",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         return Value::markup(v.str());
       }},
      {"escape",  // markup stays as it is: escaping is done once
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         return v.is_markup() ? v : Value::markup(html_escape(v.str()));
       }},
      {"abs",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         if (v.kind() == Value::Kind::kInt) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
         return Value(std::fabs(v.as_float()));
       }},
      {"round",
       [](const Value& v, std::vector<Value>& a, Dict& k) -> Result<Value> {
         const Value p = arg(a, 0, k, "precision");
         const double scale = std::pow(10.0, p.is_number() ? double(p.as_int()) : 0.0);
         return Value(std::nearbyint(v.as_float() * scale) / scale);
       }},
      {"sum",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         MINFER_ASSIGN_OR_RETURN(List items, items_of(v));
         Value total(int64_t{0});
         for (const Value& x : items) {
           total = total.kind() == Value::Kind::kInt && x.kind() == Value::Kind::kInt
                       ? Value(total.as_int() + x.as_int())
                       : Value(total.as_float() + x.as_float());
         }
         return total;
       }},
      {"wordcount",
       [](const Value& v, std::vector<Value>&, Dict&) -> Result<Value> {
         return Value(static_cast<int64_t>(split(v.str(), Value(), -1).size()));
       }},
      {"min", [](const Value& v, std::vector<Value>&, Dict&) { return minmax(v, false); }},
      {"max", [](const Value& v, std::vector<Value>&, Dict&) { return minmax(v, true); }},
  };
  return kTable;
}

// Python's `needle in hay`: a substring of a string (the needle a string too),
// an item of a list, a key of a dict; nothing is in undefined (it iterates as
// empty); anything else (none, a number) is an error, as jinja2's TypeError.
Result<bool> in(const Value& needle, const Value& hay) {
  if (hay.is_string()) {
    if (!needle.is_string()) {
      return bad(std::string("'in <string>' needs a string on the left, not a ") +
                 needle.type_name());
    }
    return hay.as_string().find(needle.as_string()) != std::string::npos;
  }
  if (hay.is_list()) {
    return std::any_of(hay.as_list().begin(), hay.as_list().end(),
                       [&](const Value& x) { return x.equals(needle); });
  }
  // Our dict keys are strings: a key of another kind is never among them.
  if (hay.is_dict()) return needle.is_string() && !hay.get(needle.as_string()).is_undefined();
  if (hay.is_undefined()) return false;
  return bad(std::string("'in' needs a string, list or dict on the right, not a ") +
             hay.type_name());
}

}  // namespace

Result<List> items_of(const Value& v) {
  if (v.is_list()) return v.as_list();
  List out;
  if (v.is_dict()) {
    for (const auto& [k, _] : v.as_dict()) out.emplace_back(k);
    return out;
  }
  if (v.is_string()) {
    const std::string& s = v.as_string();
    for (size_t i = 0; i < s.size();) {  // one UTF-8 sequence each
      const auto c = static_cast<unsigned char>(s[i]);
      const size_t n = c >= 0xf0 ? 4 : (c >= 0xe0 ? 3 : (c >= 0xc0 ? 2 : 1));
      out.emplace_back(s.substr(i, n));
      i += n;
    }
    return out;
  }
  if (v.is_undefined()) return out;
  return bad(std::string("a ") + v.type_name() + " is not iterable");
}

Result<Value> call_filter(const std::string& name, const Value& v, std::vector<Value>& args,
                          Dict& kwargs) {
  static const std::unordered_map<std::string, std::string> kAliases = {
      {"count", "length"}, {"d", "default"}, {"e", "escape"}};
  const auto alias = kAliases.find(name);
  const std::string& real = alias == kAliases.end() ? name : alias->second;
  const auto it = filters().find(real);
  if (it == filters().end()) return bad("unknown filter '" + name + "'");
  return it->second(v, args, kwargs);
}

Result<bool> call_test(const std::string& name, const Value& v, std::vector<Value>& args) {
  const Value a = args.empty() ? Value() : args[0];
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "true") return v.kind() == K::kBool && v.as_bool();
  if (name == "false") return v.kind() == K::kBool && !v.as_bool();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number() || v.kind() == K::kBool;  // Python's bool is a number
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "float") return v.kind() == K::kFloat;
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.is_function();
  if (name == "lower") return v.is_string() && lower(v.as_string()) == v.as_string();
  if (name == "upper") return v.is_string() && upper(v.as_string()) == v.as_string();
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.kind() != K::kInt) return bad("'" + name + "' needs an integer");
    if (name == "divisibleby") {
      if (a.kind() != K::kInt || a.as_int() == 0) return bad("divisibleby needs a nonzero integer");
      return v.as_int() % a.as_int() == 0;
    }
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "eq" || name == "equalto" || name == "==") return v.equals(a);
  if (name == "ne" || name == "!=") return !v.equals(a);
  if (name == "sameas") return v.kind() == a.kind() && v.equals(a);
  if (name == "in") return in(v, a);
  if (name == "lt" || name == "le" || name == "gt" || name == "ge" || name == "<" || name == "<=" ||
      name == ">" || name == ">=") {
    MINFER_ASSIGN_OR_RETURN(int c, v.compare(a));
    if (name == "lt" || name == "<") return c < 0;
    if (name == "le" || name == "<=") return c <= 0;
    if (name == "gt" || name == ">") return c > 0;
    return c >= 0;
  }
  return bad("unknown test '" + name + "'");
}

}  // namespace minfer::tmpl
