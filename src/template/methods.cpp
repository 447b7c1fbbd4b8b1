// Attributes and bound methods of values, and the templates' globals.
#include <ctime>
#include <string>

#include "template/builtins.h"
#include "template/strings.h"

namespace minfer::tmpl {
namespace {

Value arg_at(const std::vector<Value>& args, size_t i) {
  return i < args.size() ? args[i] : Value();
}

Value method(Function f) {
  return Value(std::move(f));
}

Value string_method(const std::string& s, const std::string& name) {
  using Args = std::vector<Value>;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return method([s, l, r](Args& a, Dict&) -> Result<Value> {
      const Value c = arg_at(a, 0);
      const std::string chars = c.is_string() ? c.as_string() : "";
      return Value(strip(s, c.is_string() ? &chars : nullptr, l, r));
    });
  }
  if (name == "split" || name == "rsplit") {
    return method([s](Args& a, Dict&) -> Result<Value> {
      const Value n = arg_at(a, 1);
      return Value(split(s, arg_at(a, 0), n.is_number() ? n.as_int() : -1));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool start = name == "startswith";
    return method([s, start](Args& a, Dict&) -> Result<Value> {
      const Value p = arg_at(a, 0);
      auto one = [&](const std::string& x) {
        return x.size() <= s.size() && (start ? s.compare(0, x.size(), x) == 0
                                              : s.compare(s.size() - x.size(), x.size(), x) == 0);
      };
      if (p.is_list()) {
        for (const Value& x : p.as_list()) {
          if (one(x.str())) return Value(true);
        }
        return Value(false);
      }
      return Value(one(p.str()));
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    return method([s, name](Args&, Dict&) -> Result<Value> {
      if (name == "upper") return Value(upper(s));
      if (name == "lower") return Value(lower(s));
      if (name == "title") return Value(title(s));
      return Value(capitalize(s));
    });
  }
  if (name == "replace") {
    return method([s](Args& a, Dict&) -> Result<Value> {
      const Value n = arg_at(a, 2);
      return Value(
          replace_all(s, arg_at(a, 0).str(), arg_at(a, 1).str(), n.is_number() ? n.as_int() : -1));
    });
  }
  if (name == "find" || name == "count") {
    const bool find = name == "find";
    return method([s, find](Args& a, Dict&) -> Result<Value> {
      const std::string x = arg_at(a, 0).str();
      if (find) {
        const size_t p = s.find(x);
        return Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(p));
      }
      int64_t n = 0;
      for (size_t p = s.find(x); !x.empty() && p != std::string::npos;
           p = s.find(x, p + x.size())) {
        ++n;
      }
      return Value(n);
    });
  }
  if (name == "join") {
    return method([s](Args& a, Dict&) -> Result<Value> {
      const Value items = arg_at(a, 0);
      std::string out;
      if (items.is_list()) {
        for (size_t i = 0; i < items.as_list().size(); ++i) {
          out += (i ? s : "") + items.as_list()[i].str();
        }
      }
      return Value(std::move(out));
    });
  }
  if (name == "format") {  // "{}" placeholders in order
    return method([s](Args& a, Dict&) -> Result<Value> {
      std::string out;
      size_t next = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '}') {
          out += arg_at(a, next++).str();
          ++i;
        } else {
          out += s[i];
        }
      }
      return Value(std::move(out));
    });
  }
  return {};
}

Value dict_method(const Value& d, const std::string& name) {
  using Args = std::vector<Value>;
  if (name == "items" || name == "keys" || name == "values") {
    return method([d, name](Args&, Dict&) -> Result<Value> {
      List out;
      for (const auto& [k, v] : d.as_dict()) {
        if (name == "items") {
          out.emplace_back(List{Value(k), v}, true);
        } else {
          out.push_back(name == "keys" ? Value(k) : v);
        }
      }
      return Value(std::move(out));
    });
  }
  if (name == "get") {
    return method([d](Args& a, Dict&) -> Result<Value> {
      const Value v = d.get(arg_at(a, 0).str());
      if (!v.is_undefined()) return v;
      const Value dflt = arg_at(a, 1);
      return dflt.is_undefined() ? Value::none() : dflt;
    });
  }
  return {};
}

Value list_method(const Value& l, const std::string& name) {
  using Args = std::vector<Value>;
  if (name == "index" || name == "count") {
    const bool index = name == "index";
    return method([l, index](Args& a, Dict&) -> Result<Value> {
      const Value x = arg_at(a, 0);
      int64_t n = 0;
      for (size_t i = 0; i < l.as_list().size(); ++i) {
        if (!l.as_list()[i].equals(x)) continue;
        if (index) return Value(static_cast<int64_t>(i));
        ++n;
      }
      if (index) return Status::invalid_argument(x.repr() + " is not in the list");
      return Value(n);
    });
  }
  return {};
}

}  // namespace

Value attribute(const Value& v, const std::string& name) {
  if (v.is_dict()) {
    const Value field = v.get(name);
    if (!field.is_undefined() || v.is_namespace()) return field;
    return dict_method(v, name);
  }
  if (v.is_string()) return string_method(v.as_string(), name);
  if (v.is_list()) return list_method(v, name);
  return {};
}

Dict globals() {
  using Args = std::vector<Value>;
  Dict g;
  g.emplace_back("range", method([](Args& a, Dict&) -> Result<Value> {
                   int64_t start = 0, stop = 0, step = 1;
                   if (a.size() == 1) {
                     stop = a[0].as_int();
                   } else if (a.size() >= 2) {
                     start = a[0].as_int();
                     stop = a[1].as_int();
                     if (a.size() > 2) step = a[2].as_int();
                   }
                   if (step == 0) return Status::invalid_argument("range() step cannot be zero");
                   List out;
                   for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                     if (out.size() >= 100000) {
                       return Status::invalid_argument("range() of more than 100000 items");
                     }
                     out.emplace_back(i);
                   }
                   return Value(std::move(out));
                 }));
  g.emplace_back("namespace", method([](Args&, Dict& kw) -> Result<Value> {
                   return Value(Dict(kw), /*is_namespace=*/true);
                 }));
  g.emplace_back("dict", method([](Args&, Dict& kw) -> Result<Value> { return Value(Dict(kw)); }));
  g.emplace_back("raise_exception", method([](Args& a, Dict&) -> Result<Value> {
                   return Status::invalid_argument(arg_at(a, 0).str());
                 }));
  g.emplace_back("strftime_now", method([](Args& a, Dict&) -> Result<Value> {
                   const std::time_t now = std::time(nullptr);
                   std::tm tm{};
                   localtime_r(&now, &tm);
                   char buf[256];
                   const size_t n =
                       std::strftime(buf, sizeof(buf), arg_at(a, 0).str().c_str(), &tm);
                   return Value(std::string(buf, n));
                 }));
  return g;
}

}  // namespace minfer::tmpl
