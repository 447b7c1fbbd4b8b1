#include "template/lex.h"

#include <cctype>
#include <charconv>
#include <string>

#include "base/utf8.h"

namespace minfer::tmpl {
namespace {

bool space_or_tab(char c) {
  return c == ' ' || c == '\t';
}
bool any_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

int line_at(std::string_view s, size_t pos) {
  int n = 1;
  for (size_t i = 0; i < pos && i < s.size(); ++i) n += s[i] == '\n';
  return n;
}

// Where the tag that opened at `from` closes (index of its closer), skipping
// string literals; npos when it does not.
size_t tag_close(std::string_view s, size_t from, std::string_view closer) {
  char quote = 0;
  for (size_t i = from; i + 1 < s.size() + 1; ++i) {
    const char c = s[i];
    if (quote != 0) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      continue;
    }
    if (s.substr(i, closer.size()) == closer) return i;
  }
  return std::string_view::npos;
}

Status error_at(std::string_view s, size_t pos, const std::string& what) {
  return Status::invalid_argument("template line " + std::to_string(line_at(s, pos)) + ": " + what);
}

std::string trim_copy(std::string_view v) {
  size_t a = 0, b = v.size();
  while (a < b && any_space(v[a])) ++a;
  while (b > a && any_space(v[b - 1])) --b;
  return std::string(v.substr(a, b - a));
}

}  // namespace

Result<std::vector<Segment>> lex_segments(std::string_view s) {
  std::vector<Segment> out;
  std::string text;
  bool strip_next = false;    // a "-" closer: drop the next text's leading whitespace
  bool trim_newline = false;  // trim_blocks after a block or comment tag
  size_t i = 0;
  auto flush = [&](int line) {
    if (!text.empty()) out.push_back({Segment::Kind::kText, std::move(text), line});
    text.clear();
  };
  while (i < s.size()) {
    const size_t open = s.find('{', i);
    const bool tag = open != std::string_view::npos && open + 1 < s.size() &&
                     (s[open + 1] == '{' || s[open + 1] == '%' || s[open + 1] == '#');
    const size_t text_end = tag ? open : (open == std::string_view::npos ? s.size() : open + 1);
    std::string chunk(s.substr(i, text_end - i));
    if (strip_next) {
      size_t k = 0;
      while (k < chunk.size() && any_space(chunk[k])) ++k;
      chunk.erase(0, k);
      if (!chunk.empty() || tag) strip_next = false;
    }
    if (trim_newline && !chunk.empty()) {
      if (chunk[0] == '\n') {
        chunk.erase(0, 1);
      } else if (chunk.size() > 1 && chunk[0] == '\r' && chunk[1] == '\n') {
        chunk.erase(0, 2);
      }
    }
    if (!chunk.empty() || tag) trim_newline = false;
    text += chunk;
    if (!tag) {
      i = text_end;
      continue;
    }
    const char kind = s[open + 1];
    const bool block = kind != '{';
    size_t body = open + 2;
    if (body < s.size() && s[body] == '-') {
      while (!text.empty() && any_space(text.back())) text.pop_back();
      ++body;
    } else if (body < s.size() && s[body] == '+') {
      ++body;            // "{%+": no lstrip
    } else if (block) {  // lstrip_blocks: spaces and tabs since the line's start
      size_t k = open;
      while (k > 0 && space_or_tab(s[k - 1])) --k;
      if (k == 0 || s[k - 1] == '\n') {
        for (size_t m = open - k; m > 0 && !text.empty() && space_or_tab(text.back()); --m) {
          text.pop_back();
        }
      }
    }
    const std::string closer = kind == '{' ? "}}" : (kind == '%' ? "%}" : "#}");
    const size_t close = kind == '#' ? s.find(closer, body) : tag_close(s, body, closer);
    if (close == std::string_view::npos) {
      return error_at(s, open, "the tag opened here is not closed with '" + closer + "'");
    }
    size_t inner_end = close;
    const bool strip_right = close > body && s[close - 1] == '-';
    const bool keep_right = close > body && s[close - 1] == '+';  // "+%}": no trim_blocks
    if (strip_right || keep_right) --inner_end;
    const int line = line_at(s, open);
    flush(line);
    const std::string inner(s.substr(body, inner_end - body));
    i = close + 2;
    if (kind == '%') {
      const std::string word = trim_copy(inner);
      if (word == "raw") {  // everything up to {% endraw %} as text
        const size_t end = s.find("endraw", i);
        const size_t end_open = end == std::string_view::npos ? end : s.rfind("{%", end);
        const size_t end_close = end == std::string_view::npos ? end : s.find("%}", end);
        if (end_open == std::string_view::npos || end_close == std::string_view::npos) {
          return error_at(s, open, "raw block without {% endraw %}");
        }
        std::string raw(s.substr(i, end_open - i));
        if (s[end_open + 2] == '-') {
          while (!raw.empty() && any_space(raw.back())) raw.pop_back();
        }
        text += raw;
        i = end_close + 2;
        strip_next = s[end_close - 1] == '-';
        trim_newline = !strip_next;
        continue;
      }
      out.push_back({Segment::Kind::kStmt, inner, line});
    } else if (kind == '{') {
      out.push_back({Segment::Kind::kExpr, inner, line});
    }
    strip_next = strip_right;
    trim_newline = block && !strip_right && !keep_right;
  }
  flush(line_at(s, s.size()));
  return out;
}

namespace {

// One escape of a string literal at s[i] (after the backslash); appends it.
Status unescape(std::string_view s, size_t& i, std::string& out, int line) {
  const char c = s[i];
  switch (c) {
    case 'n':
      out += '\n';
      return Status::ok();
    case 't':
      out += '\t';
      return Status::ok();
    case 'r':
      out += '\r';
      return Status::ok();
    case '0':
      out += '\0';
      return Status::ok();
    case '\\':
    case '\'':
    case '"':
      out += c;
      return Status::ok();
    case 'x':
    case 'u': {
      const size_t n = c == 'x' ? 2 : 4;
      if (i + n >= s.size()) {
        return Status::invalid_argument("template line " + std::to_string(line) + ": a short \\" +
                                        std::string(1, c) + " escape");
      }
      uint32_t cp = 0;
      const auto* b = s.data() + i + 1;
      const auto [p, ec] = std::from_chars(b, b + n, cp, 16);
      if (ec != std::errc() || p != b + n) {
        return Status::invalid_argument("template line " + std::to_string(line) + ": a bad \\" +
                                        std::string(1, c) + " escape");
      }
      i += n;
      append_utf8(out, cp);
      return Status::ok();
    }
    default:  // Python keeps unknown escapes as they are
      out += '\\';
      out += c;
      return Status::ok();
  }
}

}  // namespace

Result<std::vector<Token>> lex_tokens(std::string_view s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  auto fail = [&](const std::string& what) {
    return Status::invalid_argument("template line " + std::to_string(line) + ": " + what);
  };
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n') ++line;
    if (any_space(c)) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::Kind::kName, std::string(s.substr(i, j - i)), line});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      std::string digits;
      for (size_t k = i; k < j; ++k) {
        if (s[k] != '_') digits += s[k];
      }
      out.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, digits, line});
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string value;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] == '\\' && j + 1 < s.size()) {
          ++j;
          MINFER_RETURN_IF_ERROR(unescape(s, j, value, line));
        } else {
          if (s[j] == '\n') ++line;
          value += s[j];
        }
      }
      if (j >= s.size()) return fail("a string is not closed");
      out.push_back({Token::Kind::kString, std::move(value), line});
      i = j + 1;
      continue;
    }
    static constexpr std::string_view kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                                "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                                "]",  "{",  "}",  ",",  ".",  ":",  "|"};
    bool matched = false;
    for (std::string_view op : kOps) {
      if (s.substr(i, op.size()) == op) {
        out.push_back({Token::Kind::kOp, std::string(op), line});
        i += op.size();
        matched = true;
        break;
      }
    }
    if (!matched) return fail("unexpected character '" + std::string(1, c) + "'");
  }
  out.push_back({Token::Kind::kEnd, "", line});
  return out;
}

}  // namespace minfer::tmpl
