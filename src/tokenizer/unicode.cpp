#include "tokenizer/unicode.h"

#include <array>

namespace minfer::tokenizer {

namespace {

// Printable bytes map to themselves; the other 68 are shifted to U+0100.. in
// byte order, which keeps every byte visible and whitespace-free.
std::array<uint32_t, 256> make_byte_codepoints() {
  std::array<uint32_t, 256> cps{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    cps[b] = printable ? b : next++;
  }
  return cps;
}

const std::array<uint32_t, 256>& byte_codepoints() {
  static const std::array<uint32_t, 256> table = make_byte_codepoints();
  return table;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    for (int i = 0; i < 256; ++i) append_utf8(t[i], byte_codepoints()[i]);
    return t;
  }();
  return table[b];
}

bool unicode_to_byte(uint32_t cp, uint8_t& out) {
  static const std::array<int16_t, 512> inverse = [] {
    std::array<int16_t, 512> t;
    t.fill(-1);
    for (int i = 0; i < 256; ++i) t[byte_codepoints()[i]] = static_cast<int16_t>(i);
    return t;
  }();
  if (cp >= inverse.size() || inverse[cp] < 0) return false;
  out = static_cast<uint8_t>(inverse[cp]);
  return true;
}

}  // namespace minfer::tokenizer
