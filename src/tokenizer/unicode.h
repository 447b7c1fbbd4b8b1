// UTF-8 helpers and the GPT-2 byte <-> unicode alphabet used by byte-level BPE.
//
// Contract: pure functions over byte strings; nothing allocates shared state
// except function-local constant tables (initialised once, thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/utf8.h"

namespace minfer::tokenizer {

using ::minfer::find_invalid_utf8;
using ::minfer::kUtf8Valid;

using ::minfer::append_utf8;
using ::minfer::decode_utf8;
using ::minfer::utf8_lead_length;
using ::minfer::utf8_sequence_status;

// GPT-2's reversible byte -> printable-codepoint mapping, as UTF-8.
const std::string& byte_to_unicode(uint8_t b);

// Inverse of byte_to_unicode for one codepoint; false if cp is not in the alphabet.
bool unicode_to_byte(uint32_t cp, uint8_t& out);

}  // namespace minfer::tokenizer
