#include "base/utf8.h"

namespace minfer {

int utf8_sequence_status(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  int len;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  for (int i = 1; i < len; ++i) {
    // The second-byte checks below have already run for any longer prefix, so
    // a prefix that ends here could still become a valid sequence.
    if (static_cast<size_t>(i) >= s.size()) return -len;
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
    // Reject overlongs and surrogates as soon as the second byte shows them.
    if (i == 1 && len == 3 && (cp < 0x20 || (cp >= 0x360 && cp < 0x380))) return 0;
    if (i == 1 && len == 4 && (cp < 0x10 || cp > 0x10F)) return 0;
  }
  return len;
}

size_t find_invalid_utf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    const int n = utf8_sequence_status(s.substr(pos));
    if (n <= 0) return pos;
    pos += static_cast<size_t>(n);
  }
  return kUtf8Valid;
}

size_t utf8_lead_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t decode_utf8(std::string_view s, size_t& pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char c = p[pos];
  const size_t len = utf8_lead_length(c);
  uint32_t cp = len == 1 ? c : (c & (0x7F >> len));
  for (size_t i = 1; i < len && pos + i < s.size(); ++i) cp = (cp << 6) | (p[pos + i] & 0x3F);
  pos += len;
  return cp;
}

namespace {

// Code points a terminal or a bidi-aware viewer acts on: C1 controls (ESC's
// 8-bit forms among them), U+2028/U+2029, and the bidi embeddings, overrides
// and isolates that can make shown text differ from its bytes.
bool acts_on_terminal(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200E ||
         cp == 0x200F || cp == 0x061C;
}

void append_hex(std::string& out, const char* prefix, uint32_t v, int digits, const char* suffix) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += prefix;
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += kHex[(v >> shift) & 15];
  out += suffix;
}

}  // namespace

std::string printable_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    const auto c = static_cast<unsigned char>(s[pos]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n') || c == 0x7F) {
        append_hex(out, "\\x", c, 2, "");
      } else {
        out += static_cast<char>(c);
      }
      ++pos;
      continue;
    }
    const int len = utf8_sequence_status(s.substr(pos));
    if (len <= 0) {
      append_hex(out, "\\x", c, 2, "");
      ++pos;
      continue;
    }
    size_t next = pos;
    const uint32_t cp = decode_utf8(s, next);
    if (acts_on_terminal(cp)) {
      append_hex(out, "\\u{", cp, 4, "}");
    } else {
      out.append(s.substr(pos, next - pos));
    }
    pos = next;
  }
  return out;
}

}  // namespace minfer
