// A strict JSON (RFC 8259) reader and a small value tree.
//
// Contract: parse_json() accepts exactly one JSON value surrounded by optional
// whitespace. It is strict: no comments, trailing commas, NaN/Infinity, leading
// zeros, unescaped control characters, invalid UTF-8, lone surrogates in
// \uXXXX escapes, or duplicate object keys. Nesting deeper than
// JsonParseOptions::max_depth is rejected so that hostile input cannot exhaust
// the stack. Errors are values: the message names the 1-based line and column
// (column counted in bytes) where the problem was found.
//
// A JsonValue owns its children. Objects keep their members in document order.
// Numbers keep the double value and, when the literal is an integer that fits,
// the exact int64 as well (token ids must not go through a double round trip
// unchecked).
//
// Threading: plain values; parsing touches no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace minfer {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, JsonValue>;

  JsonValue() = default;  // null
  static JsonValue make_bool(bool b);
  static JsonValue make_number(double d, bool is_int, int64_t i);
  static JsonValue make_string(std::string s);
  static JsonValue make_array(std::vector<JsonValue> items);
  static JsonValue make_object(std::vector<Member> members);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_int() const { return kind_ == Kind::kNumber && is_int_; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // Accessors are valid only for the matching kind (asserted); check first.
  bool as_bool() const;
  double as_double() const;
  int64_t as_int() const;
  const std::string& as_string() const;
  const std::vector<JsonValue>& items() const;
  const std::vector<Member>& members() const;

  // Member lookup on an object (linear; nullptr when absent or not an object).
  const JsonValue* find(std::string_view key) const;

 private:
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  bool is_int_ = false;
  int64_t int_ = 0;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<Member> members_;
};

struct JsonParseOptions {
  int max_depth = 256;  // arrays/objects nested deeper than this are an error
};

Result<JsonValue> parse_json(std::string_view text, const JsonParseOptions& options = {});

// Serialises a string as a JSON string literal (quotes included); non-ASCII is
// written as UTF-8 (an ill-formed byte becomes U+FFFD, so the output is always
// valid JSON), control characters as escapes.
std::string json_quote(std::string_view s);

}  // namespace minfer
