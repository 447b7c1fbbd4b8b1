#include "gguf/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "base/utf8.h"

namespace minfer::gguf {
namespace {

struct IntRange {
  int64_t min;
  uint64_t max;
};

IntRange int_range(ValueType t) {
  switch (t) {
    case ValueType::U8:
      return {0, 0xFF};
    case ValueType::I8:
      return {-128, 127};
    case ValueType::U16:
      return {0, 0xFFFF};
    case ValueType::I16:
      return {-32768, 32767};
    case ValueType::U32:
      return {0, 0xFFFFFFFFu};
    case ValueType::I32:
      return {std::numeric_limits<int32_t>::min(), 0x7FFFFFFF};
    case ValueType::U64:
      return {0, std::numeric_limits<uint64_t>::max()};
    default:
      return {std::numeric_limits<int64_t>::min(), 0x7FFFFFFFFFFFFFFFull};
  }
}

Status mismatch(std::string_view expected, ValueType found) {
  return Status::invalid_argument("expected " + std::string(expected) + ", found " +
                                  std::string(value_type_name(found)));
}

void append_double(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "nan";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-inf" : "inf";
    return;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, res.ptr);
}

void append_escaped(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {  // printable UTF-8 stays readable; the rest is escaped
      size_t end = i;
      while (end < s.size() && static_cast<unsigned char>(s[end]) >= 0x80) ++end;
      out += printable_text(s.substr(i, end - i));
      i = end - 1;
      continue;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

}  // namespace

std::string_view value_type_name(ValueType type) {
  static constexpr std::string_view kNames[] = {"u8",  "i8",  "u16",  "i16",    "u32",
                                                "i32", "f32", "bool", "string", "array",
                                                "u64", "i64", "f64"};
  const auto raw = static_cast<uint32_t>(type);
  if (raw < std::size(kNames)) return kNames[raw];
  return "unknown type";
}

bool is_valid_value_type(uint32_t raw) {
  return raw <= static_cast<uint32_t>(ValueType::F64);
}

size_t scalar_size(ValueType type) {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    default:
      return 0;
  }
}

bool is_integer_type(ValueType type) {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::U16:
    case ValueType::I16:
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::U64:
    case ValueType::I64:
      return true;
    default:
      return false;
  }
}

bool is_float_type(ValueType type) {
  return type == ValueType::F32 || type == ValueType::F64;
}

bool Value::is_signed(ValueType type) {
  return type == ValueType::I8 || type == ValueType::I16 || type == ValueType::I32 ||
         type == ValueType::I64;
}

Value Value::f32(float v) {
  Value out(ValueType::F32, 0);
  out.float_ = v;
  return out;
}

Value Value::f64(double v) {
  Value out(ValueType::F64, 0);
  out.float_ = v;
  return out;
}

Value Value::string(std::string v) {
  Value out(ValueType::STRING, 0);
  out.str_ = std::move(v);
  return out;
}

Value Value::array(ValueType elem, std::vector<Value> items) {
  Value out(ValueType::ARRAY, 0);
  out.elem_ = elem;
  out.items_ = std::move(items);
  return out;
}

Result<uint64_t> Value::to_unsigned_checked(ValueType target) const {
  if (!is_integer_type(type_)) return mismatch(value_type_name(target), type_);
  const IntRange r = int_range(target);
  const bool negative = is_signed(type_) && static_cast<int64_t>(bits_) < 0;
  if (negative || bits_ > r.max) {
    return Status::invalid_argument("value " + display() + " does not fit in " +
                                    std::string(value_type_name(target)));
  }
  return bits_;
}

Result<int64_t> Value::to_signed_checked(ValueType target) const {
  if (!is_integer_type(type_)) return mismatch(value_type_name(target), type_);
  const IntRange r = int_range(target);
  bool fits;
  if (is_signed(type_)) {
    const auto v = static_cast<int64_t>(bits_);
    fits = v >= r.min && (v < 0 || static_cast<uint64_t>(v) <= r.max);
  } else {
    fits = bits_ <= r.max;
  }
  if (!fits) {
    return Status::invalid_argument("value " + display() + " does not fit in " +
                                    std::string(value_type_name(target)));
  }
  return static_cast<int64_t>(bits_);
}

Result<uint64_t> Value::to_u64() const {
  return to_unsigned_checked(ValueType::U64);
}

Result<int64_t> Value::to_i64() const {
  return to_signed_checked(ValueType::I64);
}

Result<double> Value::to_f64() const {
  if (is_float_type(type_)) return float_;
  if (is_integer_type(type_)) {
    if (is_signed(type_)) return static_cast<double>(static_cast<int64_t>(bits_));
    return static_cast<double>(bits_);
  }
  return mismatch("f64", type_);
}

Result<bool> Value::to_bool() const {
  if (type_ != ValueType::BOOL) return mismatch("bool", type_);
  return bits_ != 0;
}

Result<std::string_view> Value::to_string() const {
  if (type_ != ValueType::STRING) return mismatch("string", type_);
  return std::string_view(str_);
}

void Value::display_into(std::string& out, size_t max_items) const {
  switch (type_) {
    case ValueType::STRING:
      append_escaped(out, str_);
      return;
    case ValueType::BOOL:
      out += bits_ ? "true" : "false";
      return;
    case ValueType::F32:
    case ValueType::F64:
      append_double(out, float_);
      return;
    case ValueType::ARRAY: {
      out += '[';
      const size_t shown = std::min(max_items, items_.size());
      for (size_t i = 0; i < shown; ++i) {
        if (i) out += ", ";
        items_[i].display_into(out, max_items);
      }
      if (shown < items_.size()) {
        out += shown ? ", ... (" : "... (";
        out += std::to_string(items_.size()) + " items)";
      }
      out += ']';
      return;
    }
    default:
      if (is_signed(type_)) {
        out += std::to_string(static_cast<int64_t>(bits_));
      } else {
        out += std::to_string(bits_);
      }
  }
}

std::string Value::display(size_t max_array_items) const {
  std::string out;
  display_into(out, max_array_items);
  return out;
}

bool Value::operator==(const Value& other) const {
  if (type_ != other.type_) return false;
  switch (type_) {
    case ValueType::STRING:
      return str_ == other.str_;
    case ValueType::ARRAY:
      return elem_ == other.elem_ && items_ == other.items_;
    case ValueType::F32:
    case ValueType::F64:
      // NaN equals NaN here so that a round trip of a NaN value compares equal.
      return std::signbit(float_) == std::signbit(other.float_) &&
             (float_ == other.float_ || (std::isnan(float_) && std::isnan(other.float_)));
    default:
      return bits_ == other.bits_;
  }
}

}  // namespace minfer::gguf
