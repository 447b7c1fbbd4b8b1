// Template rendering: a walk over the syntax tree with a stack of scopes.
#include <cmath>
#include <string>

#include "template/builtins.h"
#include "template/parse.h"
#include "template/strings.h"
#include "template/template.h"

namespace minfer::tmpl {
namespace {

constexpr int kMaxDepth = 64;

Status error(int line, const std::string& what) {
  return Status::invalid_argument("template line " + std::to_string(line) + ": " + what);
}

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  explicit Renderer(const Dict& context) {
    scopes_.push_back(globals());
    for (const auto& [k, v] : context) set(k, v);
  }

  Status run(const Body& body, std::string& out) {
    Flow f = Flow::kNormal;
    return exec(body, out, f);
  }

 private:
  // --- scopes ---------------------------------------------------------------------
  Value lookup(const std::string& name) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
      for (const auto& [k, v] : *s) {
        if (k == name) return v;
      }
    }
    return {};
  }
  void set(const std::string& name, Value v) {
    Dict& top = scopes_.back();
    for (auto& [k, old] : top) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    top.emplace_back(name, std::move(v));
  }
  struct ScopeGuard {
    Renderer& r;
    explicit ScopeGuard(Renderer& rr) : r(rr) { r.scopes_.emplace_back(); }
    ~ScopeGuard() { r.scopes_.pop_back(); }
  };

  // --- statements ------------------------------------------------------------------
  Status exec(const Body& body, std::string& out, Flow& flow) {
    for (const auto& st : body) {
      MINFER_RETURN_IF_ERROR(exec(*st, out, flow));
      if (flow != Flow::kNormal) return Status::ok();
    }
    return Status::ok();
  }

  Status exec(const Stmt& st, std::string& out, Flow& flow) {
    switch (st.kind) {
      case Stmt::Kind::kText:
        out += st.text;
        return Status::ok();
      case Stmt::Kind::kOutput: {
        MINFER_ASSIGN_OR_RETURN(Value v, eval(*st.expr));
        out += v.str();
        return Status::ok();
      }
      case Stmt::Kind::kIf:
        for (size_t i = 0; i < st.conds.size(); ++i) {
          MINFER_ASSIGN_OR_RETURN(Value c, eval(*st.conds[i]));
          if (c.truthy()) return exec(st.bodies[i], out, flow);
        }
        if (st.bodies.size() > st.conds.size()) return exec(st.bodies.back(), out, flow);
        return Status::ok();
      case Stmt::Kind::kFor:
        return exec_for(st, out);
      case Stmt::Kind::kSet:
        return exec_set(st);
      case Stmt::Kind::kSetBlock: {
        std::string text;
        MINFER_RETURN_IF_ERROR(exec(st.bodies[0], text, flow));
        set(st.targets[0], Value(std::move(text)));
        return Status::ok();
      }
      case Stmt::Kind::kMacro:
        set(st.name, macro(st));
        return Status::ok();
      case Stmt::Kind::kBreak:
        flow = Flow::kBreak;
        return Status::ok();
      case Stmt::Kind::kContinue:
        flow = Flow::kContinue;
        return Status::ok();
      case Stmt::Kind::kFilterBlock: {
        std::string text;
        MINFER_RETURN_IF_ERROR(exec(st.bodies[0], text, flow));
        std::vector<Value> args;
        Dict kwargs;
        MINFER_RETURN_IF_ERROR(eval_args(st.args, args, kwargs));
        MINFER_ASSIGN_OR_RETURN(Value v,
                                call_filter(st.name, Value(std::move(text)), args, kwargs));
        out += v.str();
        return Status::ok();
      }
      case Stmt::Kind::kScope:
        return exec(st.bodies[0], out, flow);
    }
    return Status::ok();
  }

  Result<List> iterable(const Value& v, int line) {
    auto items = items_of(v);
    if (!items) return error(line, "cannot loop over it: " + items.message());
    return items;
  }

  Status bind(const std::vector<std::string>& names, const Value& item, int line) {
    if (names.size() == 1) {
      set(names[0], item);
      return Status::ok();
    }
    if (!item.is_list() || item.as_list().size() != names.size()) {
      return error(line, "cannot unpack " + item.repr() + " into " + std::to_string(names.size()) +
                             " names");
    }
    for (size_t i = 0; i < names.size(); ++i) set(names[i], item.as_list()[i]);
    return Status::ok();
  }

  Status exec_for(const Stmt& st, std::string& out) {
    MINFER_ASSIGN_OR_RETURN(Value seq, eval(*st.expr));
    MINFER_ASSIGN_OR_RETURN(List items, iterable(seq, st.line));
    ScopeGuard scope(*this);
    if (st.cond) {  // the loop filter: items it rejects are not in the loop at all
      List kept;
      for (const Value& item : items) {
        MINFER_RETURN_IF_ERROR(bind(st.targets, item, st.line));
        MINFER_ASSIGN_OR_RETURN(Value keep, eval(*st.cond));
        if (keep.truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      const Value& item = items[static_cast<size_t>(i)];
      MINFER_RETURN_IF_ERROR(bind(st.targets, item, st.line));
      set("loop", loop_value(items, i));
      Flow flow = Flow::kNormal;
      MINFER_RETURN_IF_ERROR(exec(st.bodies[0], out, flow));
      if (flow == Flow::kBreak) break;
    }
    if (n == 0 && st.bodies.size() > 1) {
      Flow flow = Flow::kNormal;
      return exec(st.bodies[1], out, flow);
    }
    return Status::ok();
  }

  static Value loop_value(const List& items, int64_t i) {
    const auto n = static_cast<int64_t>(items.size());
    Dict loop;
    loop.emplace_back("index", Value(i + 1));
    loop.emplace_back("index0", Value(i));
    loop.emplace_back("revindex", Value(n - i));
    loop.emplace_back("revindex0", Value(n - i - 1));
    loop.emplace_back("first", Value(i == 0));
    loop.emplace_back("last", Value(i == n - 1));
    loop.emplace_back("length", Value(n));
    loop.emplace_back("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value());
    loop.emplace_back("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value());
    loop.emplace_back("cycle",
                      Value(Function([i](std::vector<Value>& args, Dict&) -> Result<Value> {
                        if (args.empty())
                          return Status::invalid_argument("loop.cycle() of nothing");
                        return args[static_cast<size_t>(i) % args.size()];
                      })));
    return Value(std::move(loop));
  }

  Status exec_set(const Stmt& st) {
    MINFER_ASSIGN_OR_RETURN(Value v, eval(*st.expr));
    if (st.attr_target) {
      const Value ns = lookup(st.targets[0]);
      if (!ns.is_namespace()) {
        return error(st.line,
                     "'" + st.targets[0] + "' is not a namespace: cannot set ." + st.targets[1]);
      }
      ns.set(st.targets[1], std::move(v));
      return Status::ok();
    }
    return bind(st.targets, v, st.line);
  }

  Value macro(const Stmt& st) {
    const Stmt* def = &st;
    return Value(Function([this, def](std::vector<Value>& args, Dict& kwargs) -> Result<Value> {
      if (++depth_ > kMaxDepth) {
        --depth_;
        return error(def->line, "macro '" + def->name + "' nested too deep");
      }
      ScopeGuard scope(*this);
      for (size_t i = 0; i < def->params.size(); ++i) {
        const auto& [name, dflt] = def->params[i];
        Value v;
        bool given = false;
        for (const auto& [k, kv] : kwargs) {
          if (k == name) {
            v = kv;
            given = true;
          }
        }
        if (!given && i < args.size()) {
          v = args[i];
        } else if (!given && dflt) {
          auto d = eval(*dflt);
          if (!d) {
            --depth_;
            return d.status();
          }
          v = *d;
        }
        set(name, v);
      }
      std::string text;
      Flow flow = Flow::kNormal;
      const Status s = exec(def->bodies[0], text, flow);
      --depth_;
      if (!s) return s;
      return Value(std::move(text));
    }));
  }

  // --- expressions -----------------------------------------------------------------
  Status eval_args(const std::vector<Arg>& in, std::vector<Value>& args, Dict& kwargs) {
    for (const Arg& a : in) {
      MINFER_ASSIGN_OR_RETURN(Value v, eval(*a.value));
      if (a.name.empty()) {
        args.push_back(std::move(v));
      } else {
        kwargs.emplace_back(a.name, std::move(v));
      }
    }
    return Status::ok();
  }

  Result<Value> eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.value;
      case Expr::Kind::kName:
        return lookup(e.name);
      case Expr::Kind::kAttr: {
        MINFER_ASSIGN_OR_RETURN(Value base, eval(*e.items[0]));
        if (base.is_undefined()) return error(e.line, "'." + e.name + "' of an undefined value");
        return attribute(base, e.name);
      }
      case Expr::Kind::kIndex: {
        MINFER_ASSIGN_OR_RETURN(Value base, eval(*e.items[0]));
        MINFER_ASSIGN_OR_RETURN(Value key, eval(*e.items[1]));
        return index(base, key, e.line);
      }
      case Expr::Kind::kSlice:
        return slice(e);
      case Expr::Kind::kCall: {
        MINFER_ASSIGN_OR_RETURN(Value f, eval(*e.items[0]));
        if (!f.is_function())
          return error(e.line, std::string("a ") + f.type_name() + " is not callable");
        std::vector<Value> args;
        Dict kwargs;
        MINFER_RETURN_IF_ERROR(eval_args(e.args, args, kwargs));
        auto r = f.as_function()(args, kwargs);
        if (!r) return error(e.line, r.message());
        return r;
      }
      case Expr::Kind::kFilter: {
        MINFER_ASSIGN_OR_RETURN(Value v, eval(*e.items[0]));
        std::vector<Value> args;
        Dict kwargs;
        MINFER_RETURN_IF_ERROR(eval_args(e.args, args, kwargs));
        auto r = call_filter(e.name, v, args, kwargs);
        if (!r) return error(e.line, r.message());
        return r;
      }
      case Expr::Kind::kTest: {
        MINFER_ASSIGN_OR_RETURN(Value v, eval(*e.items[0]));
        std::vector<Value> args;
        Dict kwargs;
        MINFER_RETURN_IF_ERROR(eval_args(e.args, args, kwargs));
        auto r = call_test(e.name, v, args);
        if (!r) return error(e.line, r.message());
        return Value(*r != e.negated);
      }
      case Expr::Kind::kUnary:
        return unary(e);
      case Expr::Kind::kBinary:
        return binary(e);
      case Expr::Kind::kCond: {
        MINFER_ASSIGN_OR_RETURN(Value c, eval(*e.items[1]));
        if (c.truthy()) return eval(*e.items[0]);
        if (!e.items[2]) return Value();
        return eval(*e.items[2]);
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List l;
        for (const auto& item : e.items) {
          MINFER_ASSIGN_OR_RETURN(Value v, eval(*item));
          l.push_back(std::move(v));
        }
        return Value(std::move(l), e.kind == Expr::Kind::kTuple);
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          MINFER_ASSIGN_OR_RETURN(Value k, eval(*e.items[i]));
          MINFER_ASSIGN_OR_RETURN(Value v, eval(*e.items[i + 1]));
          bool found = false;  // a repeated key keeps its first place, takes the last value
          for (auto& [dk, dv] : d) {
            if (dk == k.str()) {
              dv = v;
              found = true;
            }
          }
          if (!found) d.emplace_back(k.str(), v);
        }
        return Value(std::move(d));
      }
    }
    return error(e.line, "unknown expression");
  }

  Result<Value> index(const Value& base, const Value& key, int line) {
    if (base.is_undefined()) return error(line, "a subscript of an undefined value");
    if (base.is_dict()) {
      if (key.is_string()) return base.get(key.as_string());
      return base.get(key.str());
    }
    if (base.is_list() || base.is_string()) {
      if (!key.is_number() || key.kind() != Value::Kind::kInt) {
        if (key.is_string()) return attribute(base, key.as_string());
        return error(line, std::string("a ") + base.type_name() + " index must be an integer");
      }
      const int64_t n = base.is_list() ? static_cast<int64_t>(base.as_list().size())
                                       : static_cast<int64_t>(base.as_string().size());
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      if (base.is_list()) return base.as_list()[static_cast<size_t>(i)];
      return Value(base.as_string().substr(static_cast<size_t>(i), 1));
    }
    return Value();
  }

  Result<Value> slice(const Expr& e) {
    MINFER_ASSIGN_OR_RETURN(Value base, eval(*e.items[0]));
    int64_t parts[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!e.items[static_cast<size_t>(k + 1)]) continue;
      MINFER_ASSIGN_OR_RETURN(Value v, eval(*e.items[static_cast<size_t>(k + 1)]));
      if (v.is_none()) continue;
      if (v.kind() != Value::Kind::kInt) return error(e.line, "slice bounds must be integers");
      parts[k] = v.as_int();
      given[k] = true;
    }
    const int64_t step = parts[2];
    if (step == 0) return error(e.line, "a slice step cannot be zero");
    List items;
    if (base.is_list()) {
      items = base.as_list();
    } else if (base.is_string()) {
      for (char c : base.as_string()) items.emplace_back(std::string(1, c));
    } else {
      return error(e.line, std::string("cannot slice a ") + base.type_name());
    }
    const auto n = static_cast<int64_t>(items.size());
    auto clamp = [&](int64_t v, bool is_given, int64_t dflt) {
      if (!is_given) return dflt;
      if (v < 0) v += n;
      if (step > 0) return v < 0 ? 0 : (v > n ? n : v);
      return v < -1 ? -1 : (v > n - 1 ? n - 1 : v);
    };
    const int64_t start = clamp(parts[0], given[0], step > 0 ? 0 : n - 1);
    const int64_t stop = clamp(parts[1], given[1], step > 0 ? n : -1);
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      out.push_back(items[static_cast<size_t>(i)]);
    }
    if (base.is_string()) {
      std::string s;
      for (const Value& c : out) s += c.as_string();
      return Value(std::move(s));
    }
    return Value(std::move(out));
  }

  Result<Value> unary(const Expr& e) {
    MINFER_ASSIGN_OR_RETURN(Value v, eval(*e.items[0]));
    if (e.name == "not") return Value(!v.truthy());
    if (!v.is_number()) return error(e.line, "unary " + e.name + " of a " + v.type_name());
    if (e.name == "+") return v;
    if (v.kind() == Value::Kind::kInt) return Value(-v.as_int());
    return Value(-v.as_float());
  }

  Result<Value> binary(const Expr& e);

  std::vector<Dict> scopes_;
  int depth_ = 0;
};

Result<Value> arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
  if (op == "~") return Value(a.str() + b.str());
  if (op == "+" && a.is_string() && b.is_string()) {
    if (!a.is_markup() && !b.is_markup()) return Value(a.as_string() + b.as_string());
    // Markup + str escapes the plain side, as Python's Markup.__add__/__radd__.
    auto side = [](const Value& v) { return v.is_markup() ? v.as_string() : html_escape(v.str()); };
    return Value::markup(side(a) + side(b));
  }
  if (op == "+" && a.is_list() && b.is_list()) {
    List l = a.as_list();
    l.insert(l.end(), b.as_list().begin(), b.as_list().end());
    return Value(std::move(l));
  }
  if (op == "*" && a.is_string() && b.kind() == Value::Kind::kInt) {
    const int64_t n = b.as_int() < 0 ? 0 : b.as_int();
    if (n > 0 && a.as_string().size() > (size_t{1} << 20) / static_cast<size_t>(n)) {
      return error(line, "a string repeated past 1 MiB");
    }
    std::string s;
    for (int64_t i = 0; i < n; ++i) s += a.as_string();
    return Value(std::move(s));
  }
  const bool num_a = a.is_number() || a.kind() == Value::Kind::kBool;
  const bool num_b = b.is_number() || b.kind() == Value::Kind::kBool;
  if (!num_a || !num_b) {
    return error(line, std::string("unsupported operand types for ") + op + ": " + a.type_name() +
                           " and " + b.type_name());
  }
  const bool ints = a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat;
  const auto ia = a.kind() == Value::Kind::kBool ? static_cast<int64_t>(a.as_bool()) : a.as_int();
  const auto ib = b.kind() == Value::Kind::kBool ? static_cast<int64_t>(b.as_bool()) : b.as_int();
  const double fa = a.kind() == Value::Kind::kBool ? double(a.as_bool()) : a.as_float();
  const double fb = b.kind() == Value::Kind::kBool ? double(b.as_bool()) : b.as_float();
  if (op == "+") return ints ? Value(ia + ib) : Value(fa + fb);
  if (op == "-") return ints ? Value(ia - ib) : Value(fa - fb);
  if (op == "*") return ints ? Value(ia * ib) : Value(fa * fb);
  if (op == "/") {
    if (fb == 0) return error(line, "division by zero");
    return Value(fa / fb);
  }
  if (op == "//" || op == "%") {
    if (fb == 0) return error(line, "division by zero");
    if (ints) {
      int64_t q = ia / ib, r = ia % ib;
      if (r != 0 && ((r < 0) != (ib < 0))) {  // Python floors
        --q;
        r += ib;
      }
      return op == "//" ? Value(q) : Value(r);
    }
    const double q = std::floor(fa / fb);
    return op == "//" ? Value(q) : Value(fa - q * fb);
  }
  if (op == "**") {
    if (ints && ib >= 0) {
      int64_t r = 1;
      for (int64_t i = 0; i < ib && i < 64; ++i) r *= ia;
      return Value(r);
    }
    return Value(std::pow(fa, fb));
  }
  return error(line, "unknown operator " + op);
}

Result<Value> Renderer::binary(const Expr& e) {
  const std::string& op = e.name;
  MINFER_ASSIGN_OR_RETURN(Value a, eval(*e.items[0]));
  if (op == "and") return a.truthy() ? eval(*e.items[1]) : Result<Value>(a);
  if (op == "or") return a.truthy() ? Result<Value>(a) : eval(*e.items[1]);
  MINFER_ASSIGN_OR_RETURN(Value b, eval(*e.items[1]));
  if (op == "==") return Value(a.equals(b));
  if (op == "!=") return Value(!a.equals(b));
  if (op == "in" || op == "not in") {
    std::vector<Value> args = {b};
    auto r = call_test("in", a, args);
    if (!r) return error(e.line, r.message());
    return Value(*r == (op == "in"));
  }
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    auto c = a.compare(b);
    if (!c) return error(e.line, c.message());
    if (op == "<") return Value(*c < 0);
    if (op == "<=") return Value(*c <= 0);
    if (op == ">") return Value(*c > 0);
    return Value(*c >= 0);
  }
  return arithmetic(op, a, b, e.line);
}

}  // namespace

Result<Template> Template::parse(std::string_view source) {
  MINFER_ASSIGN_OR_RETURN(Body body, parse_template(source));
  Template t;
  t.body_ = std::make_shared<const Body>(std::move(body));
  return t;
}

Result<std::string> Template::render(const Dict& context) const {
  // The context holds the request's values (messages, tools): refused here
  // when nested past the limit, whoever built it.
  for (const auto& [name, v] : context) {
    if (Status s = v.check_depth(); !s) return s.with_context("context '" + name + "'");
  }
  Renderer r(context);
  std::string out;
  MINFER_RETURN_IF_ERROR(r.run(*body_, out));
  return out;
}

}  // namespace minfer::tmpl
