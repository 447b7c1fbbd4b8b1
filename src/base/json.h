// Reading JSON text into nlohmann::json documents, strictly and within
// bounds, and the typed reads and string quoting every caller shares.
//
// nlohmann-json is minfer's one JSON library. Its parser already enforces RFC
// 8259 (no comments, trailing commas, NaN/Infinity, leading zeros, unescaped
// control characters, invalid UTF-8, lone surrogates or trailing text, and no
// number that overflows a double); this header adds what it does not:
//
// Contract:
//   - parse_json() / parse_ordered_json() accept exactly one JSON value
//     surrounded by optional whitespace (a UTF-8 byte order mark before it is
//     skipped, which RFC 8259 section 8.1 allows). ordered_json keeps object
//     members in document order; json sorts them by key.
//   - One pass builds the document as nlohmann's (iterative) SAX parser reads
//     the text, and refuses:
//       nesting past JsonParseOptions::max_depth arrays and objects (the
//         outermost is level 1), before any level past it is built, so that
//         nothing downstream that recurses (nlohmann's copies, comparisons
//         and dumps, our converters) can exhaust a thread's stack:
//         kOutOfRange, "JSON nests arrays and objects deeper than N levels";
//       an object that repeats a key, unless allow_duplicate_keys (then the
//         last one wins, as in nlohmann and Python): kInvalidArgument naming
//         the key;
//       text that is not JSON: kInvalidArgument, "JSON line L, column C:
//         <why>" (columns count bytes), including a raw NUL byte anywhere
//         (nlohmann alone stops reading at one and ignores the rest).
//     A failure returns only the error; no exception escapes. Cost: linear
//     in the text for both document types (nlohmann's own ordered_json parse
//     searches each object for every key it adds: quadratic).
//   - Numbers: an integer literal becomes an integer (is_number_integer());
//     1.0 and 1e3 are floats. Read exact integers with json_to_int(), which
//     refuses floats and out-of-range values instead of rounding or wrapping
//     (nlohmann's get<int>() does both silently).
//   - json_find() and the json_get_*() readers never throw; their errors are
//     kInvalidArgument and name the key, for the caller to wrap with the file
//     or request it came from (Status::with_context).
//   - json_quote() writes a JSON string literal: non-ASCII as UTF-8 (each
//     maximal ill-formed subsequence becomes one U+FFFD, as Python's
//     errors="replace" decodes, so the output is always valid JSON), control
//     characters as escapes, '/' and DEL as themselves: byte for byte what
//     Python's json.dumps(s, ensure_ascii=False) writes for the decoded text.
// Threading: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace minfer {

struct JsonParseOptions {
  int max_depth = 256;                // arrays/objects nested deeper than this are an error
  bool allow_duplicate_keys = false;  // true: a repeated key's last value wins
};

[[nodiscard]] Result<nlohmann::json> parse_json(std::string_view text,
                                                const JsonParseOptions& options = {});
[[nodiscard]] Result<nlohmann::ordered_json> parse_ordered_json(
    std::string_view text, const JsonParseOptions& options = {});

// The member `key` of `object`; nullptr when absent or when `object` is not an
// object. The pointer lives as long as `object` is not modified.
template <typename Json>
const Json* json_find(const Json& object, std::string_view key);

// `value` as an exact integer in [min, max]; otherwise kInvalidArgument,
// "<what>: expected an integer in [min, max]".
template <typename Json>
[[nodiscard]] Result<int64_t> json_to_int(const Json& value, std::string_view what,
                                          int64_t min = INT64_MIN, int64_t max = INT64_MAX);

// Required members of `object`, read as one type: kInvalidArgument when
// `object` is not an object, when the member is absent ("no \"key\"") or when
// it has another type ("\"key\" is not a string").
template <typename Json>
[[nodiscard]] Result<std::string> json_get_string(const Json& object, std::string_view key);
template <typename Json>
[[nodiscard]] Result<bool> json_get_bool(const Json& object, std::string_view key);
template <typename Json>
[[nodiscard]] Result<int64_t> json_get_int(const Json& object, std::string_view key,
                                           int64_t min = INT64_MIN, int64_t max = INT64_MAX);

// `s` as a JSON string literal, quotes included (see the contract).
std::string json_quote(std::string_view s);

}  // namespace minfer
