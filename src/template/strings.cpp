#include "template/strings.h"

namespace minfer::tmpl {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string strip(const std::string& s, const std::string* chars, bool left, bool right) {
  auto drop = [&](char c) {
    return chars != nullptr ? chars->find(c) != std::string::npos : is_space(c);
  };
  size_t a = 0, b = s.size();
  while (left && a < b && drop(s[a])) ++a;
  while (right && b > a && drop(s[b - 1])) --b;
  return s.substr(a, b - a);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}
std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return s;
}
std::string title(std::string s) {
  bool start = true;
  for (char& c : s) {
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (alpha) c = start ? upper(std::string(1, c))[0] : lower(std::string(1, c))[0];
    start = !alpha && !(c >= '0' && c <= '9');
  }
  return s;
}
std::string capitalize(const std::string& s) {
  if (s.empty()) return s;
  return upper(s.substr(0, 1)) + lower(s.substr(1));
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count) {
  if (from.empty()) return s;
  std::string out;
  size_t i = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t j = s.find(from, i);
    if (j == std::string::npos) break;
    out += s.substr(i, j - i) + to;
    i = j + from.size();
  }
  return out + s.substr(i);
}

List split(const std::string& s, const Value& sep, int64_t max_split) {
  List out;
  if (sep.is_none() || sep.is_undefined()) {  // runs of whitespace, ends dropped
    size_t i = 0;
    int64_t n = 0;
    while (i < s.size()) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (max_split >= 0 && n == max_split) {
        out.emplace_back(strip(s.substr(i), nullptr, false, true));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      out.emplace_back(s.substr(i, j - i));
      ++n;
      i = j;
    }
    return out;
  }
  const std::string d = sep.str();
  size_t i = 0;
  for (int64_t n = 0; max_split < 0 || n < max_split; ++n) {
    const size_t j = d.empty() ? std::string::npos : s.find(d, i);
    if (j == std::string::npos) break;
    out.emplace_back(s.substr(i, j - i));
    i = j + d.size();
  }
  out.emplace_back(s.substr(i));
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace minfer::tmpl
