// UTF-8 primitives shared by the JSON reader/writer, the tokenizers and the
// CLI: sequence validation, encoding and decoding of one code point.
//
// Contract: pure functions over byte strings; no allocation beyond the output
// string; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace minfer {

inline constexpr size_t kUtf8Valid = static_cast<size_t>(-1);

// Byte offset of the first byte that does not start a well-formed UTF-8
// sequence (overlongs, surrogates, > U+10FFFF and truncation are ill-formed),
// or kUtf8Valid.
size_t find_invalid_utf8(std::string_view s);

// Length of the well-formed sequence starting at s[0] (s non-empty): 1..4, or
// 0 when ill-formed, or -needed when s is a valid but truncated prefix of a
// longer sequence (needed = total length of that sequence).
int utf8_sequence_status(std::string_view s);

// Sequence length announced by a lead byte (1 for continuation/invalid bytes),
// mirroring how a tolerant splitter walks text.
size_t utf8_lead_length(unsigned char lead);

void append_utf8(std::string& out, uint32_t cp);

// Decodes the codepoint at s[pos] (must be well-formed) and advances pos.
uint32_t decode_utf8(std::string_view s, size_t& pos);

// `s` made safe to show on a terminal: printable UTF-8 passes through (so
// names in any script stay readable), '\n' stays a line break, and everything
// a terminal could act on is escaped: C0 controls and DEL as \xNN, C1
// controls, line/paragraph separators and bidirectional overrides as \u{NNNN},
// bytes that are not well-formed UTF-8 as \xNN. Used for every message that
// can carry text from a file (architecture names, token text, paths).
std::string printable_text(std::string_view s);

}  // namespace minfer
