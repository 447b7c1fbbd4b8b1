#include "template/value.h"

#include "base/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace minfer::tmpl {

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value::Value(bool b) : kind_(Kind::kBool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
Value::Value(double d) : kind_(Kind::kFloat), d_(d) {}
Value::Value(std::string s)
    : kind_(Kind::kString), s_(std::make_shared<const std::string>(std::move(s))) {}
Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}
Value::Value(List l, bool is_tuple)
    : kind_(Kind::kList), tuple_(is_tuple), l_(std::make_shared<List>(std::move(l))) {}
Value::Value(Dict d, bool is_namespace)
    : kind_(Kind::kDict), namespace_(is_namespace), m_(std::make_shared<Dict>(std::move(d))) {}
Value::Value(Function f)
    : kind_(Kind::kFunction), f_(std::make_shared<const Function>(std::move(f))) {}

Value Value::get(const std::string& key) const {
  if (kind_ != Kind::kDict) return {};
  for (const auto& [k, v] : *m_) {
    if (k == key) return v;
  }
  return {};
}

void Value::set(const std::string& key, Value v) const {
  if (kind_ != Kind::kDict) return;
  for (auto& [k, old] : *m_) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  m_->emplace_back(key, std::move(v));
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return d_ != 0.0;
    case Kind::kString:
      return !s_->empty();
    case Kind::kList:
      return !l_->empty();
    case Kind::kDict:
      return !m_->empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, placed by Python's repr rule: positional
  // for decimal exponents -4 .. 15, else d.ddde+XX.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  const bool neg = !mant.empty() && mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." +
            digits.substr(static_cast<size_t>(exp + 1));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return neg ? "-" + out : out;
}

namespace {

std::string quote(const std::string& s) {
  // Python's repr of a str: single quotes unless the text has one and no double.
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(q)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + q;
}

}  // namespace

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return float_repr(d_);
    case Kind::kString:
      return *s_;
    default:
      return repr();
  }
}

namespace {

Status too_deep(const char* what) {
  return Status::invalid_argument(std::string(what) + ": lists and dicts nest deeper than " +
                                  std::to_string(kMaxValueDepth) + " levels");
}

}  // namespace

std::string Value::repr() const {
  std::string out;
  repr_into(out, 0);
  return out;
}

void Value::repr_into(std::string& out, int depth) const {
  const bool container = kind_ == Kind::kList || kind_ == Kind::kDict;
  if (container && depth >= kMaxValueDepth) {
    out += "...";
    return;
  }
  switch (kind_) {
    case Kind::kString:
      out += quote(*s_);
      return;
    case Kind::kList:
      out += tuple_ ? "(" : "[";
      for (size_t i = 0; i < l_->size(); ++i) {
        if (i) out += ", ";
        (*l_)[i].repr_into(out, depth + 1);
      }
      out += tuple_ ? (l_->size() == 1 ? ",)" : ")") : "]";
      return;
    case Kind::kDict:
      out += namespace_ ? "<Namespace {" : "{";
      for (size_t i = 0; i < m_->size(); ++i) {
        if (i) out += ", ";
        out += quote((*m_)[i].first) + ": ";
        (*m_)[i].second.repr_into(out, depth + 1);
      }
      out += namespace_ ? "}>" : "}";
      return;
    case Kind::kFunction:
      out += "<function>";
      return;
    default:
      out += str();
  }
}

bool Value::equals(const Value& o) const {
  return equals_at(o, 0);
}

bool Value::equals_at(const Value& o, int depth) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::kInt && o.kind_ == Kind::kInt) return i_ == o.i_;
    return as_float() == o.as_float();
  }
  if (kind_ == Kind::kBool && o.is_number()) return Value(static_cast<int64_t>(b_)).equals(o);
  if (is_number() && o.kind_ == Kind::kBool) return equals(Value(static_cast<int64_t>(o.b_)));
  if (kind_ != o.kind_) return false;
  if ((kind_ == Kind::kList || kind_ == Kind::kDict) && depth >= kMaxValueDepth) {
    return kind_ == Kind::kList ? l_ == o.l_ : m_ == o.m_;
  }
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return b_ == o.b_;
    case Kind::kString:
      return *s_ == *o.s_;
    case Kind::kList:
      if (tuple_ != o.tuple_ || l_->size() != o.l_->size()) return false;
      for (size_t i = 0; i < l_->size(); ++i) {
        if (!(*l_)[i].equals_at((*o.l_)[i], depth + 1)) return false;
      }
      return true;
    case Kind::kDict:
      if (m_->size() != o.m_->size()) return false;
      for (const auto& [k, v] : *m_) {
        if (!v.equals_at(o.get(k), depth + 1)) return false;
      }
      return true;
    case Kind::kFunction:
      return f_ == o.f_;
    default:
      return false;
  }
}

Result<int> Value::compare(const Value& o) const {
  return compare_at(o, 0);
}

Result<int> Value::compare_at(const Value& o, int depth) const {
  if ((is_number() || kind_ == Kind::kBool) && (o.is_number() || o.kind_ == Kind::kBool)) {
    const double a = kind_ == Kind::kBool ? b_ : as_float();
    const double b = o.kind_ == Kind::kBool ? o.b_ : o.as_float();
    if (kind_ == Kind::kInt && o.kind_ == Kind::kInt) return i_ < o.i_ ? -1 : (i_ > o.i_ ? 1 : 0);
    return a < b ? -1 : (a > b ? 1 : 0);
  }
  if (is_string() && o.is_string()) return s_->compare(*o.s_) < 0 ? -1 : (*s_ == *o.s_ ? 0 : 1);
  if (is_list() && o.is_list()) {
    if (depth >= kMaxValueDepth) return too_deep("cannot compare");
    for (size_t i = 0; i < l_->size() && i < o.l_->size(); ++i) {
      MINFER_ASSIGN_OR_RETURN(int c, (*l_)[i].compare_at((*o.l_)[i], depth + 1));
      if (c != 0) return c;
    }
    return l_->size() < o.l_->size() ? -1 : (l_->size() > o.l_->size() ? 1 : 0);
  }
  return Status::invalid_argument(std::string("cannot compare ") + type_name() + " with " +
                                  o.type_name());
}

Status Value::check_depth() const {
  return check_depth_at(0);
}

Status Value::check_depth_at(int depth) const {
  if (kind_ != Kind::kList && kind_ != Kind::kDict) return Status::ok();
  if (depth >= kMaxValueDepth) return too_deep("a value");
  if (kind_ == Kind::kList) {
    for (const Value& v : *l_) MINFER_RETURN_IF_ERROR(v.check_depth_at(depth + 1));
  } else {
    for (const auto& [k, v] : *m_) MINFER_RETURN_IF_ERROR(v.check_depth_at(depth + 1));
  }
  return Status::ok();
}

const char* Value::type_name() const {
  static constexpr const char* kNames[] = {"undefined", "none", "bool", "int",     "float",
                                           "string",    "list", "dict", "function"};
  return namespace_ ? "namespace" : kNames[static_cast<int>(kind_)];
}

namespace {

void json_string(std::string& out, const std::string& s) {
  out += json_quote(s);  // non-ASCII kept, as json.dumps(ensure_ascii=False)
}

void newline(std::string& out, int indent, int depth) {
  out += '\n';
  out.append(static_cast<size_t>(indent * depth), ' ');
}

}  // namespace

Result<std::string> Value::to_json(int indent) const {
  std::string out;
  MINFER_RETURN_IF_ERROR(json_into(out, indent, 0));
  return out;
}

Status Value::json_into(std::string& out, int indent, int depth) const {
  if ((kind_ == Kind::kList || kind_ == Kind::kDict) && depth >= kMaxValueDepth) {
    return too_deep("tojson");
  }
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      out += "null";
      return Status::ok();
    case Kind::kBool:
      out += b_ ? "true" : "false";
      return Status::ok();
    case Kind::kInt:
      out += std::to_string(i_);
      return Status::ok();
    case Kind::kFloat:
      if (std::isnan(d_)) {
        out += "NaN";
      } else if (std::isinf(d_)) {
        out += d_ > 0 ? "Infinity" : "-Infinity";
      } else {
        out += float_repr(d_);
      }
      return Status::ok();
    case Kind::kString:
      json_string(out, *s_);
      return Status::ok();
    case Kind::kList: {
      out += '[';
      for (size_t i = 0; i < l_->size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(out, indent, depth + 1);
        MINFER_RETURN_IF_ERROR((*l_)[i].json_into(out, indent, depth + 1));
      }
      if (indent >= 0 && !l_->empty()) newline(out, indent, depth);
      out += ']';
      return Status::ok();
    }
    case Kind::kDict: {
      out += '{';
      for (size_t i = 0; i < m_->size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(out, indent, depth + 1);
        json_string(out, (*m_)[i].first);
        out += ": ";
        MINFER_RETURN_IF_ERROR((*m_)[i].second.json_into(out, indent, depth + 1));
      }
      if (indent >= 0 && !m_->empty()) newline(out, indent, depth);
      out += '}';
      return Status::ok();
    }
    case Kind::kFunction:
      return Status::invalid_argument("a function is not JSON serializable");
  }
  return Status::ok();
}

}  // namespace minfer::tmpl
