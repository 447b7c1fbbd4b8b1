// A GGUF metadata value: one of the thirteen GGUF value types, arrays included
// (arrays of strings, arrays of arrays).
//
// Contract: a Value owns its data (strings and array elements are copies, never
// views into a mapped file), so it outlives the File it came from. Integer
// scalars are stored widened to 64 bits, floats as double; the declared GGUF
// type is kept and written back unchanged. Conversions are checked: an integer
// converts to another integer type only when the value fits, otherwise the
// error names the value and the target type ("value 70000 does not fit in
// u16"); a type mismatch names both types ("expected string, found u32").
// Factories never fail: an array whose elements do not all have the declared
// element type is representable, and rejected by Writer when written.
//
// Memory: a Value is a few dozen bytes plus its string/array heap data, so a
// 150k-entry token array costs a few MB.
//
// Threading: immutable after construction; const access from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace minfer::gguf {

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

// "u8", "i32", "f32", "bool", "string", "array", ...; "type#N" for ids outside the enum.
std::string_view value_type_name(ValueType type);

// True for the raw ids 0..12.
bool is_valid_value_type(uint32_t raw);

// Bytes a scalar of this type takes on disk; 0 for STRING and ARRAY (variable).
size_t scalar_size(ValueType type);

bool is_integer_type(ValueType type);
bool is_float_type(ValueType type);

class Value {
 public:
  Value() = default;  // u8 0; exists so containers can default-construct

  static Value u8(uint8_t v) { return Value(ValueType::U8, static_cast<uint64_t>(v)); }
  static Value i8(int8_t v) { return signed_of(ValueType::I8, v); }
  static Value u16(uint16_t v) { return Value(ValueType::U16, static_cast<uint64_t>(v)); }
  static Value i16(int16_t v) { return signed_of(ValueType::I16, v); }
  static Value u32(uint32_t v) { return Value(ValueType::U32, static_cast<uint64_t>(v)); }
  static Value i32(int32_t v) { return signed_of(ValueType::I32, v); }
  static Value u64(uint64_t v) { return Value(ValueType::U64, v); }
  static Value i64(int64_t v) { return signed_of(ValueType::I64, v); }
  static Value f32(float v);
  static Value f64(double v);
  static Value boolean(bool v) { return Value(ValueType::BOOL, static_cast<uint64_t>(v)); }
  static Value string(std::string v);
  static Value array(ValueType elem, std::vector<Value> items);

  ValueType type() const { return type_; }
  // The declared element type; meaningful only when type() == ARRAY.
  ValueType array_type() const { return elem_; }
  // The elements; empty unless type() == ARRAY.
  const std::vector<Value>& array() const { return items_; }
  size_t array_size() const { return items_.size(); }

  Result<uint64_t> to_u64() const;
  Result<int64_t> to_i64() const;
  Result<double> to_f64() const;  // floats, and integers (possibly rounded)
  Result<bool> to_bool() const;
  // A view into this Value; valid while it lives.
  Result<std::string_view> to_string() const;

  // Converts to an integer of `target` type (U8..I64) when the value fits.
  // Returns the value as int64 bits for signed targets and uint64 for unsigned.
  Result<uint64_t> to_unsigned_checked(ValueType target) const;
  Result<int64_t> to_signed_checked(ValueType target) const;

  // Human-readable form: 42, -1.5, true, "text" (escaped), [1, 2, ... (N items)].
  std::string display(size_t max_array_items = 8) const;

  // Raw storage for the serializer: integer bits (signed values sign-extended).
  uint64_t raw_bits() const { return bits_; }
  double raw_float() const { return float_; }

  bool operator==(const Value& other) const;

 private:
  Value(ValueType type, uint64_t bits) : type_(type), bits_(bits) {}
  static Value signed_of(ValueType type, int64_t v) {
    return Value(type, static_cast<uint64_t>(v));
  }
  static bool is_signed(ValueType type);
  void display_into(std::string& out, size_t max_items) const;

  ValueType type_ = ValueType::U8;
  ValueType elem_ = ValueType::U8;
  uint64_t bits_ = 0;
  double float_ = 0.0;
  std::string str_;
  std::vector<Value> items_;
};

}  // namespace minfer::gguf
