#include "template/parse.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "template/lex.h"

namespace minfer::tmpl {
namespace {

// Recursive descent over one tag's tokens (Jinja's precedence, loosest first:
// a if b else c; or; and; not; comparisons and in; + -; ~; * / // %; **;
// unary - +; postfix . [] () then | filters and "is" tests).
class ExprParser {
 public:
  explicit ExprParser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool at_end() const { return peek().kind == Token::Kind::kEnd; }
  bool is_op(std::string_view op, size_t k = 0) const {
    return peek(k).kind == Token::Kind::kOp && peek(k).text == op;
  }
  bool is_name(std::string_view n, size_t k = 0) const {
    return peek(k).kind == Token::Kind::kName && peek(k).text == n;
  }
  Token next() { return t_[std::min(i_++, t_.size() - 1)]; }
  Status fail(const std::string& what) const {
    const Token& t = peek();
    return Status::invalid_argument(
        "template line " + std::to_string(t.line) + ": " + what +
        (t.kind == Token::Kind::kEnd ? " at the end of the tag" : ", found '" + t.text + "'"));
  }
  Status expect_op(std::string_view op) {
    if (!is_op(op)) return fail("expected '" + std::string(op) + "'");
    ++i_;
    return Status::ok();
  }
  Result<std::string> expect_name() {
    if (peek().kind != Token::Kind::kName) return fail("expected a name");
    return next().text;
  }

  Result<ExprPtr> expression() {  // a if b else c
    MINFER_ASSIGN_OR_RETURN(ExprPtr e, or_expr());
    while (is_name("if")) {
      ++i_;
      MINFER_ASSIGN_OR_RETURN(ExprPtr cond, or_expr());
      ExprPtr other;
      if (is_name("else")) {
        ++i_;
        MINFER_ASSIGN_OR_RETURN(other, expression());
      }
      auto c = make(Expr::Kind::kCond);
      c->items.push_back(std::move(e));
      c->items.push_back(std::move(cond));
      c->items.push_back(std::move(other));  // may be null: undefined
      e = std::move(c);
    }
    return e;
  }

  // Comma-separated expressions, as a tuple when there is a comma.
  Result<ExprPtr> tuple_or_expression() {
    MINFER_ASSIGN_OR_RETURN(ExprPtr first, expression());
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::kTuple);
    t->items.push_back(std::move(first));
    while (is_op(",")) {
      ++i_;
      if (at_end() || is_op(")")) break;
      MINFER_ASSIGN_OR_RETURN(ExprPtr e, expression());
      t->items.push_back(std::move(e));
    }
    return ExprPtr(std::move(t));
  }

  // Without the conditional (for's iterable, whose "if" is the loop filter).
  Result<ExprPtr> or_expression() { return or_expr(); }

  Result<std::vector<Arg>> call_args() {  // after "("
    std::vector<Arg> args;
    while (!is_op(")")) {
      Arg a;
      if (peek().kind == Token::Kind::kName && is_op("=", 1)) {
        a.name = next().text;
        ++i_;
      }
      MINFER_ASSIGN_OR_RETURN(a.value, expression());
      args.push_back(std::move(a));
      if (!is_op(",")) break;
      ++i_;
    }
    MINFER_RETURN_IF_ERROR(expect_op(")"));
    return args;
  }

 private:
  ExprPtr make(Expr::Kind k) const {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = peek().line;
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) const {
    auto e = make(Expr::Kind::kBinary);
    e->name = std::move(op);
    e->items.push_back(std::move(a));
    e->items.push_back(std::move(b));
    return e;
  }

  Result<ExprPtr> or_expr() {
    MINFER_ASSIGN_OR_RETURN(ExprPtr e, and_expr());
    while (is_name("or")) {
      ++i_;
      MINFER_ASSIGN_OR_RETURN(ExprPtr r, and_expr());
      e = binary("or", std::move(e), std::move(r));
    }
    return e;
  }
  Result<ExprPtr> and_expr() {
    MINFER_ASSIGN_OR_RETURN(ExprPtr e, not_expr());
    while (is_name("and")) {
      ++i_;
      MINFER_ASSIGN_OR_RETURN(ExprPtr r, not_expr());
      e = binary("and", std::move(e), std::move(r));
    }
    return e;
  }
  Result<ExprPtr> not_expr() {
    if (is_name("not")) {
      ++i_;
      MINFER_ASSIGN_OR_RETURN(ExprPtr operand, not_expr());
      auto e = make(Expr::Kind::kUnary);
      e->name = "not";
      e->items.push_back(std::move(operand));
      return ExprPtr(std::move(e));
    }
    return compare();
  }
  Result<ExprPtr> compare() {
    MINFER_ASSIGN_OR_RETURN(ExprPtr e, additive());
    for (;;) {
      std::string op;
      if (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">=")) {
        op = next().text;
      } else if (is_name("in")) {
        ++i_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        i_ += 2;
        op = "not in";
      } else {
        return e;
      }
      MINFER_ASSIGN_OR_RETURN(ExprPtr r, additive());
      e = binary(op, std::move(e), std::move(r));
    }
  }
  Result<ExprPtr> additive() {
    MINFER_ASSIGN_OR_RETURN(ExprPtr e, concat());
    while (is_op("+") || is_op("-")) {
      const std::string op = next().text;
      MINFER_ASSIGN_OR_RETURN(ExprPtr r, concat());
      e = binary(op, std::move(e), std::move(r));
    }
    return e;
  }
  Result<ExprPtr> concat() {
    MINFER_ASSIGN_OR_RETURN(ExprPtr e, multiplicative());
    while (is_op("~")) {
      ++i_;
      MINFER_ASSIGN_OR_RETURN(ExprPtr r, multiplicative());
      e = binary("~", std::move(e), std::move(r));
    }
    return e;
  }
  Result<ExprPtr> multiplicative() {
    MINFER_ASSIGN_OR_RETURN(ExprPtr e, power());
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = next().text;
      MINFER_ASSIGN_OR_RETURN(ExprPtr r, power());
      e = binary(op, std::move(e), std::move(r));
    }
    return e;
  }
  Result<ExprPtr> power() {
    MINFER_ASSIGN_OR_RETURN(ExprPtr e, unary());
    while (is_op("**")) {
      ++i_;
      MINFER_ASSIGN_OR_RETURN(ExprPtr r, unary());
      e = binary("**", std::move(e), std::move(r));
    }
    return e;
  }
  // Unary minus binds tighter than filters ("-3 | abs" is abs(-3)), as in
  // Jinja: the operand is parsed without them, the filters then apply.
  Result<ExprPtr> unary(bool with_filters = true) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const std::string op = next().text;
      MINFER_ASSIGN_OR_RETURN(ExprPtr operand, unary(false));
      e = make(Expr::Kind::kUnary);
      e->name = op;
      e->items.push_back(std::move(operand));
    } else {
      MINFER_ASSIGN_OR_RETURN(e, primary());
      MINFER_ASSIGN_OR_RETURN(e, postfix(std::move(e)));
    }
    if (!with_filters) return e;
    return filters_and_tests(std::move(e));
  }

  Result<ExprPtr> postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".")) {
        ++i_;
        auto a = make(Expr::Kind::kAttr);
        if (peek().kind == Token::Kind::kInt) {  // x.0 is x[0]
          a->kind = Expr::Kind::kIndex;
          auto idx = make(Expr::Kind::kLiteral);
          idx->value = Value(static_cast<int64_t>(std::strtoll(next().text.c_str(), nullptr, 10)));
          a->items.push_back(std::move(e));
          a->items.push_back(std::move(idx));
        } else {
          MINFER_ASSIGN_OR_RETURN(a->name, expect_name());
          a->items.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (is_op("[")) {
        ++i_;
        MINFER_ASSIGN_OR_RETURN(e, subscript(std::move(e)));
      } else if (is_op("(")) {
        ++i_;
        auto c = make(Expr::Kind::kCall);
        c->items.push_back(std::move(e));
        MINFER_ASSIGN_OR_RETURN(c->args, call_args());
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> subscript(ExprPtr target) {  // after "["
    ExprPtr parts[3];
    int n = 0;
    bool slice = false;
    for (;;) {
      if (is_op(":")) {
        slice = true;
        ++i_;
        if (++n > 2) return fail("a slice has at most three parts");
        continue;
      }
      if (is_op("]")) break;
      if (parts[n]) return fail("expected ':' or ']'");
      MINFER_ASSIGN_OR_RETURN(parts[n], expression());
    }
    ++i_;
    auto e = make(slice ? Expr::Kind::kSlice : Expr::Kind::kIndex);
    e->items.push_back(std::move(target));
    if (!slice && !parts[0]) return fail("an empty subscript");
    for (int k = 0; k < (slice ? 3 : 1); ++k) e->items.push_back(std::move(parts[k]));
    return ExprPtr(std::move(e));
  }

  Result<ExprPtr> filters_and_tests(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        ++i_;
        auto f = make(Expr::Kind::kFilter);
        MINFER_ASSIGN_OR_RETURN(f->name, expect_name());
        f->items.push_back(std::move(e));
        if (is_op("(")) {
          ++i_;
          MINFER_ASSIGN_OR_RETURN(f->args, call_args());
        }
        e = std::move(f);
      } else if (is_name("is")) {
        ++i_;
        auto t = make(Expr::Kind::kTest);
        if (is_name("not")) {
          ++i_;
          t->negated = true;
        }
        MINFER_ASSIGN_OR_RETURN(t->name, expect_name());
        t->items.push_back(std::move(e));
        if (is_op("(")) {
          ++i_;
          MINFER_ASSIGN_OR_RETURN(t->args, call_args());
        } else if (peek().kind == Token::Kind::kString || peek().kind == Token::Kind::kInt ||
                   peek().kind == Token::Kind::kFloat ||
                   (peek().kind == Token::Kind::kName && !is_name("and") && !is_name("or") &&
                    !is_name("if") && !is_name("else") && !is_name("is") && !is_name("in") &&
                    !is_name("not"))) {
          Arg a;  // "is divisibleby 3", "is sameas none"
          MINFER_ASSIGN_OR_RETURN(a.value, primary());
          t->args.push_back(std::move(a));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> primary() {
    const Token tok = peek();
    auto lit = make(Expr::Kind::kLiteral);
    switch (tok.kind) {
      case Token::Kind::kString: {
        std::string s;
        while (peek().kind == Token::Kind::kString) s += next().text;  // adjacent strings join
        lit->value = Value(std::move(s));
        return ExprPtr(std::move(lit));
      }
      case Token::Kind::kInt: {
        ++i_;
        int64_t v = 0;
        const auto r = std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), v);
        if (r.ec != std::errc()) return fail("the integer " + tok.text + " is out of range");
        lit->value = Value(v);
        return ExprPtr(std::move(lit));
      }
      case Token::Kind::kFloat:
        ++i_;
        lit->value = Value(std::strtod(tok.text.c_str(), nullptr));
        return ExprPtr(std::move(lit));
      case Token::Kind::kName: {
        ++i_;
        if (tok.text == "true" || tok.text == "True") {
          lit->value = Value(true);
        } else if (tok.text == "false" || tok.text == "False") {
          lit->value = Value(false);
        } else if (tok.text == "none" || tok.text == "None") {
          lit->value = Value::none();
        } else {
          auto n = make(Expr::Kind::kName);
          n->name = tok.text;
          return ExprPtr(std::move(n));
        }
        return ExprPtr(std::move(lit));
      }
      case Token::Kind::kOp:
        if (tok.text == "(") {
          ++i_;
          if (is_op(")")) {
            ++i_;
            return ExprPtr(make(Expr::Kind::kTuple));
          }
          MINFER_ASSIGN_OR_RETURN(ExprPtr e, tuple_or_expression());
          MINFER_RETURN_IF_ERROR(expect_op(")"));
          return e;
        }
        if (tok.text == "[") {
          ++i_;
          auto l = make(Expr::Kind::kList);
          while (!is_op("]")) {
            MINFER_ASSIGN_OR_RETURN(ExprPtr e, expression());
            l->items.push_back(std::move(e));
            if (!is_op(",")) break;
            ++i_;
          }
          MINFER_RETURN_IF_ERROR(expect_op("]"));
          return ExprPtr(std::move(l));
        }
        if (tok.text == "{") {
          ++i_;
          auto d = make(Expr::Kind::kDict);
          while (!is_op("}")) {
            MINFER_ASSIGN_OR_RETURN(ExprPtr k, expression());
            MINFER_RETURN_IF_ERROR(expect_op(":"));
            MINFER_ASSIGN_OR_RETURN(ExprPtr v, expression());
            d->items.push_back(std::move(k));
            d->items.push_back(std::move(v));
            if (!is_op(",")) break;
            ++i_;
          }
          MINFER_RETURN_IF_ERROR(expect_op("}"));
          return ExprPtr(std::move(d));
        }
        break;
      case Token::Kind::kEnd:
        break;
    }
    return fail("expected a value");
  }

  std::vector<Token> t_;
  size_t i_ = 0;
};

// --- statements ------------------------------------------------------------------

class Parser {
 public:
  explicit Parser(std::vector<Segment> segs) : s_(std::move(segs)) {}

  // A body up to one of the end words (consumed tag left in `ended`), or to
  // the end of the template when `ends` is empty.
  Result<Body> body(std::initializer_list<std::string_view> ends, std::string* ended,
                    ExprParser** tail) {
    Body out;
    while (i_ < s_.size()) {
      Segment& seg = s_[i_++];
      if (seg.kind == Segment::Kind::kText) {
        auto st = stmt(Stmt::Kind::kText, seg.line);
        st->text = std::move(seg.text);
        out.push_back(std::move(st));
        continue;
      }
      MINFER_ASSIGN_OR_RETURN(std::vector<Token> toks, lex_tokens(seg.text, seg.line));
      pending_ = std::make_unique<ExprParser>(std::move(toks));
      ExprParser& p = *pending_;
      if (seg.kind == Segment::Kind::kExpr) {
        auto st = stmt(Stmt::Kind::kOutput, seg.line);
        MINFER_ASSIGN_OR_RETURN(st->expr, p.tuple_or_expression());
        if (!p.at_end()) return p.fail("expected '}}'");
        out.push_back(std::move(st));
        continue;
      }
      MINFER_ASSIGN_OR_RETURN(std::string word, p.expect_name());
      for (std::string_view e : ends) {
        if (word == e) {
          *ended = word;
          *tail = pending_.get();
          return out;
        }
      }
      MINFER_ASSIGN_OR_RETURN(auto st, statement(word, p, seg.line));
      out.push_back(std::move(st));
    }
    if (ends.size() > 0) {
      std::string want;
      for (std::string_view e : ends) want += (want.empty() ? "" : " or ") + std::string(e);
      return Status::invalid_argument("template: the end of the template came before {% " + want +
                                      " %}");
    }
    return out;
  }

 private:
  static std::unique_ptr<Stmt> stmt(Stmt::Kind k, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = line;
    return s;
  }
  static Status done(ExprParser& p, const std::string& tag) {
    if (!p.at_end()) return p.fail("unexpected text in {% " + tag + " %}");
    return Status::ok();
  }

  Result<std::unique_ptr<Stmt>> statement(const std::string& word, ExprParser& p, int line) {
    if (word == "if") return if_stmt(p, line);
    if (word == "for") return for_stmt(p, line);
    if (word == "set") return set_stmt(p, line);
    if (word == "macro") return macro_stmt(p, line);
    if (word == "filter") return filter_stmt(p, line);
    if (word == "break" || word == "continue") {
      MINFER_RETURN_IF_ERROR(done(p, word));
      return stmt(word == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
    }
    if (word == "generation") {
      MINFER_RETURN_IF_ERROR(done(p, word));
      auto st = stmt(Stmt::Kind::kScope, line);
      std::string ended;
      ExprParser* tail = nullptr;
      MINFER_ASSIGN_OR_RETURN(Body b, body({"endgeneration"}, &ended, &tail));
      st->bodies.push_back(std::move(b));
      return st;
    }
    return Status::invalid_argument("template line " + std::to_string(line) + ": unknown tag {% " +
                                    word + " %}");
  }

  Result<std::unique_ptr<Stmt>> if_stmt(ExprParser& p, int line) {
    auto st = stmt(Stmt::Kind::kIf, line);
    MINFER_ASSIGN_OR_RETURN(ExprPtr cond, p.expression());
    MINFER_RETURN_IF_ERROR(done(p, "if"));
    st->conds.push_back(std::move(cond));
    for (;;) {
      std::string ended;
      ExprParser* tail = nullptr;
      MINFER_ASSIGN_OR_RETURN(Body b, body({"elif", "else", "endif"}, &ended, &tail));
      st->bodies.push_back(std::move(b));
      if (ended == "endif") {
        MINFER_RETURN_IF_ERROR(done(*tail, "endif"));
        return st;
      }
      if (ended == "elif") {
        MINFER_ASSIGN_OR_RETURN(ExprPtr c, tail->expression());
        MINFER_RETURN_IF_ERROR(done(*tail, "elif"));
        st->conds.push_back(std::move(c));
        continue;
      }
      MINFER_RETURN_IF_ERROR(done(*tail, "else"));
      MINFER_ASSIGN_OR_RETURN(Body e, body({"endif"}, &ended, &tail));
      MINFER_RETURN_IF_ERROR(done(*tail, "endif"));
      st->bodies.push_back(std::move(e));
      return st;
    }
  }

  Result<std::unique_ptr<Stmt>> for_stmt(ExprParser& p, int line) {
    auto st = stmt(Stmt::Kind::kFor, line);
    do {
      if (p.is_op("(")) p.next();
      MINFER_ASSIGN_OR_RETURN(std::string name, p.expect_name());
      st->targets.push_back(name);
      if (p.is_op(")")) p.next();
    } while (p.is_op(",") && (p.next(), true));
    if (!p.is_name("in")) return p.fail("expected 'in'");
    p.next();
    MINFER_ASSIGN_OR_RETURN(st->expr, p.or_expression());
    if (p.is_name("if")) {
      p.next();
      MINFER_ASSIGN_OR_RETURN(st->cond, p.or_expression());
    }
    if (p.is_name("recursive")) return p.fail("recursive loops are not supported");
    MINFER_RETURN_IF_ERROR(done(p, "for"));
    std::string ended;
    ExprParser* tail = nullptr;
    MINFER_ASSIGN_OR_RETURN(Body b, body({"else", "endfor"}, &ended, &tail));
    st->bodies.push_back(std::move(b));
    if (ended == "else") {
      MINFER_RETURN_IF_ERROR(done(*tail, "else"));
      MINFER_ASSIGN_OR_RETURN(Body e, body({"endfor"}, &ended, &tail));
      st->bodies.push_back(std::move(e));
    }
    MINFER_RETURN_IF_ERROR(done(*tail, "endfor"));
    return st;
  }

  Result<std::unique_ptr<Stmt>> set_stmt(ExprParser& p, int line) {
    auto st = stmt(Stmt::Kind::kSet, line);
    MINFER_ASSIGN_OR_RETURN(std::string name, p.expect_name());
    st->targets.push_back(name);
    if (p.is_op(".")) {
      p.next();
      MINFER_ASSIGN_OR_RETURN(std::string attr, p.expect_name());
      st->targets.push_back(attr);
      st->attr_target = true;
    } else {
      while (p.is_op(",")) {
        p.next();
        MINFER_ASSIGN_OR_RETURN(std::string more, p.expect_name());
        st->targets.push_back(more);
      }
    }
    if (p.at_end() && !st->attr_target && st->targets.size() == 1) {  // {% set x %}...{% endset %}
      st->kind = Stmt::Kind::kSetBlock;
      std::string ended;
      ExprParser* tail = nullptr;
      MINFER_ASSIGN_OR_RETURN(Body b, body({"endset"}, &ended, &tail));
      MINFER_RETURN_IF_ERROR(done(*tail, "endset"));
      st->bodies.push_back(std::move(b));
      return st;
    }
    MINFER_RETURN_IF_ERROR(p.expect_op("="));
    MINFER_ASSIGN_OR_RETURN(st->expr, p.tuple_or_expression());
    MINFER_RETURN_IF_ERROR(done(p, "set"));
    return st;
  }

  Result<std::unique_ptr<Stmt>> macro_stmt(ExprParser& p, int line) {
    auto st = stmt(Stmt::Kind::kMacro, line);
    MINFER_ASSIGN_OR_RETURN(st->name, p.expect_name());
    MINFER_RETURN_IF_ERROR(p.expect_op("("));
    while (!p.is_op(")")) {
      MINFER_ASSIGN_OR_RETURN(std::string param, p.expect_name());
      ExprPtr def;
      if (p.is_op("=")) {
        p.next();
        MINFER_ASSIGN_OR_RETURN(def, p.expression());
      }
      st->params.emplace_back(param, std::move(def));
      if (!p.is_op(",")) break;
      p.next();
    }
    MINFER_RETURN_IF_ERROR(p.expect_op(")"));
    MINFER_RETURN_IF_ERROR(done(p, "macro"));
    std::string ended;
    ExprParser* tail = nullptr;
    MINFER_ASSIGN_OR_RETURN(Body b, body({"endmacro"}, &ended, &tail));
    st->bodies.push_back(std::move(b));
    return st;
  }

  Result<std::unique_ptr<Stmt>> filter_stmt(ExprParser& p, int line) {
    auto st = stmt(Stmt::Kind::kFilterBlock, line);
    MINFER_ASSIGN_OR_RETURN(st->name, p.expect_name());
    if (p.is_op("(")) {
      p.next();
      MINFER_ASSIGN_OR_RETURN(st->args, p.call_args());
    }
    MINFER_RETURN_IF_ERROR(done(p, "filter"));
    std::string ended;
    ExprParser* tail = nullptr;
    MINFER_ASSIGN_OR_RETURN(Body b, body({"endfilter"}, &ended, &tail));
    st->bodies.push_back(std::move(b));
    return st;
  }

  std::vector<Segment> s_;
  size_t i_ = 0;
  std::unique_ptr<ExprParser> pending_;  // the parser of the tag just read
};

}  // namespace

Result<Body> parse_template(std::string_view source) {
  MINFER_ASSIGN_OR_RETURN(std::vector<Segment> segs, lex_segments(source));
  Parser p(std::move(segs));
  std::string ended;
  ExprParser* tail = nullptr;
  return p.body({}, &ended, &tail);
}

}  // namespace minfer::tmpl
