#include "base/json.h"

#include "base/utf8.h"

#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <unordered_set>

namespace minfer {

JsonValue JsonValue::make_bool(bool b) {
  JsonValue v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}

JsonValue JsonValue::make_number(double d, bool is_int, int64_t i) {
  JsonValue v;
  v.kind_ = Kind::kNumber;
  v.number_ = d;
  v.is_int_ = is_int;
  v.int_ = i;
  return v;
}

JsonValue JsonValue::make_string(std::string s) {
  JsonValue v;
  v.kind_ = Kind::kString;
  v.string_ = std::move(s);
  return v;
}

JsonValue JsonValue::make_array(std::vector<JsonValue> items) {
  JsonValue v;
  v.kind_ = Kind::kArray;
  v.items_ = std::move(items);
  return v;
}

JsonValue JsonValue::make_object(std::vector<Member> members) {
  JsonValue v;
  v.kind_ = Kind::kObject;
  v.members_ = std::move(members);
  return v;
}

bool JsonValue::as_bool() const {
  assert(is_bool());
  return bool_;
}
double JsonValue::as_double() const {
  assert(is_number());
  return number_;
}
int64_t JsonValue::as_int() const {
  assert(is_int());
  return int_;
}
const std::string& JsonValue::as_string() const {
  assert(is_string());
  return string_;
}
const std::vector<JsonValue>& JsonValue::items() const {
  assert(is_array());
  return items_;
}
const std::vector<JsonValue::Member>& JsonValue::members() const {
  assert(is_object());
  return members_;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const Member& m : members_) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

namespace {

// Length of the well-formed UTF-8 sequence at s[0..n), or 0 if ill-formed
// (overlongs, surrogates and values above U+10FFFF are ill-formed).
size_t utf8_sequence_length(const unsigned char* s, size_t n) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t min;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) {
    len = 2, min = 0x80, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, min = 0x800, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

class Parser {
 public:
  Parser(std::string_view text, const JsonParseOptions& options) : text_(text), options_(options) {}

  Result<JsonValue> parse_document() {
    skip_ws();
    MINFER_ASSIGN_OR_RETURN(JsonValue v, parse_value(0));
    skip_ws();
    if (pos_ != text_.size()) return error("unexpected trailing characters");
    return v;
  }

 private:
  Status error(const std::string& what) const { return error_at(pos_, what); }

  Status error_at(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return Status::invalid_argument("JSON line " + std::to_string(line) + ", column " +
                                    std::to_string(col) + ": " + what);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
      ++pos_;
    }
  }

  Result<JsonValue> parse_value(int depth) {
    if (at_end()) return error("unexpected end of input, expected a value");
    switch (peek()) {
      case '{':
        return parse_object(depth + 1);
      case '[':
        return parse_array(depth + 1);
      case '"': {
        MINFER_ASSIGN_OR_RETURN(std::string s, parse_string());
        return JsonValue::make_string(std::move(s));
      }
      case 't':
        return parse_literal("true", JsonValue::make_bool(true));
      case 'f':
        return parse_literal("false", JsonValue::make_bool(false));
      case 'n':
        return parse_literal("null", JsonValue());
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        return error(std::string("unexpected character '") + printable(peek()) + "'");
    }
  }

  static std::string printable(char c) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) return std::string(1, c);
    static const char* kHex = "0123456789ABCDEF";
    return std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
  }

  Result<JsonValue> parse_literal(std::string_view word, JsonValue value) {
    if (text_.substr(pos_, word.size()) != word) return error("invalid literal");
    pos_ += word.size();
    return value;
  }

  Result<JsonValue> parse_number();
  Result<std::string> parse_string();
  Status parse_escape(std::string& out);
  Result<uint32_t> parse_hex4();
  Result<JsonValue> parse_array(int depth);
  Result<JsonValue> parse_object(int depth);

  std::string_view text_;
  const JsonParseOptions& options_;
  size_t pos_ = 0;
};

Result<JsonValue> Parser::parse_number() {
  const size_t start = pos_;
  auto digit = [&] { return !at_end() && peek() >= '0' && peek() <= '9'; };
  if (peek() == '-') ++pos_;
  if (!digit()) return error("expected a digit");
  if (peek() == '0') {
    ++pos_;
    if (digit()) return error_at(start, "leading zeros are not allowed");
  } else {
    while (digit()) ++pos_;
  }
  bool is_int = true;
  if (!at_end() && peek() == '.') {
    is_int = false;
    ++pos_;
    if (!digit()) return error("expected a digit after '.'");
    while (digit()) ++pos_;
  }
  if (!at_end() && (peek() == 'e' || peek() == 'E')) {
    is_int = false;
    ++pos_;
    if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
    if (!digit()) return error("expected a digit in the exponent");
    while (digit()) ++pos_;
  }
  const std::string literal(text_.substr(start, pos_ - start));
  const double d = std::strtod(literal.c_str(), nullptr);
  int64_t i = 0;
  if (is_int) {
    errno = 0;
    const long long ll = std::strtoll(literal.c_str(), nullptr, 10);
    if (errno == ERANGE) {
      is_int = false;  // still a valid number, just not an exact int64
    } else {
      i = ll;
    }
  }
  return JsonValue::make_number(d, is_int, i);
}

Result<uint32_t> Parser::parse_hex4() {
  if (text_.size() - pos_ < 4) return error("truncated \\u escape");
  uint32_t v = 0;
  for (int k = 0; k < 4; ++k) {
    const char c = text_[pos_];
    v <<= 4;
    if (c >= '0' && c <= '9') {
      v |= static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v |= static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      v |= static_cast<uint32_t>(c - 'A' + 10);
    } else {
      return error("invalid hex digit in \\u escape");
    }
    ++pos_;
  }
  return v;
}

// Called with pos_ on the character after the backslash.
Status Parser::parse_escape(std::string& out) {
  if (at_end()) return error("unterminated escape");
  const size_t esc_start = pos_ - 1;
  const char c = text_[pos_++];
  switch (c) {
    case '"':
      out += '"';
      return Status::ok();
    case '\\':
      out += '\\';
      return Status::ok();
    case '/':
      out += '/';
      return Status::ok();
    case 'b':
      out += '\b';
      return Status::ok();
    case 'f':
      out += '\f';
      return Status::ok();
    case 'n':
      out += '\n';
      return Status::ok();
    case 'r':
      out += '\r';
      return Status::ok();
    case 't':
      out += '\t';
      return Status::ok();
    case 'u':
      break;
    default:
      return error_at(esc_start, std::string("invalid escape '\\") + printable(c) + "'");
  }
  MINFER_ASSIGN_OR_RETURN(uint32_t cp, parse_hex4());
  if (cp >= 0xDC00 && cp <= 0xDFFF) return error_at(esc_start, "lone low surrogate");
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    if (text_.substr(pos_, 2) != "\\u") return error_at(esc_start, "lone high surrogate");
    pos_ += 2;
    MINFER_ASSIGN_OR_RETURN(uint32_t lo, parse_hex4());
    if (lo < 0xDC00 || lo > 0xDFFF) {
      return error_at(esc_start, "high surrogate not followed by a low surrogate");
    }
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
  }
  append_utf8(out, cp);
  return Status::ok();
}

Result<std::string> Parser::parse_string() {
  const size_t start = pos_;
  ++pos_;  // opening quote
  std::string out;
  while (true) {
    if (at_end()) return error_at(start, "unterminated string");
    const unsigned char c = static_cast<unsigned char>(peek());
    if (c == '"') {
      ++pos_;
      return out;
    }
    if (c == '\\') {
      ++pos_;
      MINFER_RETURN_IF_ERROR(parse_escape(out));
      continue;
    }
    if (c < 0x20) return error("unescaped control character in string");
    const size_t len = utf8_sequence_length(
        reinterpret_cast<const unsigned char*>(text_.data()) + pos_, text_.size() - pos_);
    if (len == 0) return error("invalid UTF-8 in string");
    out.append(text_.substr(pos_, len));
    pos_ += len;
  }
}

Result<JsonValue> Parser::parse_array(int depth) {
  if (depth > options_.max_depth) {
    return error("nesting deeper than " + std::to_string(options_.max_depth));
  }
  ++pos_;  // '['
  std::vector<JsonValue> items;
  skip_ws();
  if (!at_end() && peek() == ']') {
    ++pos_;
    return JsonValue::make_array(std::move(items));
  }
  while (true) {
    skip_ws();
    MINFER_ASSIGN_OR_RETURN(JsonValue v, parse_value(depth));
    items.push_back(std::move(v));
    skip_ws();
    if (at_end()) return error("unterminated array");
    if (peek() == ',') {
      ++pos_;
      continue;
    }
    if (peek() == ']') {
      ++pos_;
      return JsonValue::make_array(std::move(items));
    }
    return error("expected ',' or ']' in array");
  }
}

Result<JsonValue> Parser::parse_object(int depth) {
  if (depth > options_.max_depth) {
    return error("nesting deeper than " + std::to_string(options_.max_depth));
  }
  ++pos_;  // '{'
  std::vector<JsonValue::Member> members;
  std::unordered_set<std::string> seen;
  skip_ws();
  if (!at_end() && peek() == '}') {
    ++pos_;
    return JsonValue::make_object(std::move(members));
  }
  while (true) {
    skip_ws();
    if (at_end() || peek() != '"') return error("expected a string key");
    const size_t key_pos = pos_;
    MINFER_ASSIGN_OR_RETURN(std::string key, parse_string());
    if (!seen.insert(key).second) return error_at(key_pos, "duplicate key \"" + key + "\"");
    skip_ws();
    if (at_end() || peek() != ':') return error("expected ':' after object key");
    ++pos_;
    skip_ws();
    MINFER_ASSIGN_OR_RETURN(JsonValue v, parse_value(depth));
    members.emplace_back(std::move(key), std::move(v));
    skip_ws();
    if (at_end()) return error("unterminated object");
    if (peek() == ',') {
      ++pos_;
      continue;
    }
    if (peek() == '}') {
      ++pos_;
      return JsonValue::make_object(std::move(members));
    }
    return error("expected ',' or '}' in object");
  }
}

}  // namespace

Result<JsonValue> parse_json(std::string_view text, const JsonParseOptions& options) {
  Parser parser(text, options);
  return parser.parse_document();
}

std::string json_quote(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 0x80) {  // JSON text is UTF-8: an ill-formed byte becomes U+FFFD
      const int n = utf8_sequence_status(s.substr(i));
      if (n > 0) {
        out.append(s.substr(i, static_cast<size_t>(n)));
        i += static_cast<size_t>(n) - 1;
      } else {
        out += "\xEF\xBF\xBD";
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace minfer
