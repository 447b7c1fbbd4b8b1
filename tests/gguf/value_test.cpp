#include "gguf/value.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace minfer::gguf {
namespace {

TEST(GgufValue, TypeNames) {
  EXPECT_EQ(value_type_name(ValueType::U8), "u8");
  EXPECT_EQ(value_type_name(ValueType::STRING), "string");
  EXPECT_EQ(value_type_name(ValueType::ARRAY), "array");
  EXPECT_EQ(value_type_name(ValueType::F64), "f64");
  EXPECT_EQ(value_type_name(static_cast<ValueType>(13)), "unknown type");
  EXPECT_TRUE(is_valid_value_type(12));
  EXPECT_FALSE(is_valid_value_type(13));
}

TEST(GgufValue, CheckedIntegerConversions) {
  EXPECT_EQ(*Value::u8(7).to_u64(), 7u);
  EXPECT_EQ(*Value::i8(-7).to_i64(), -7);
  EXPECT_EQ(Value::i8(-7).to_u64().message(), "value -7 does not fit in u64");
  EXPECT_EQ(Value::u64(std::numeric_limits<uint64_t>::max()).to_i64().message(),
            "value 18446744073709551615 does not fit in i64");
  EXPECT_EQ(*Value::i64(std::numeric_limits<int64_t>::min()).to_i64(),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Value::u32(70000).to_unsigned_checked(ValueType::U16).message(),
            "value 70000 does not fit in u16");
  EXPECT_EQ(*Value::u32(65535).to_unsigned_checked(ValueType::U16), 65535u);
  EXPECT_EQ(Value::i32(-129).to_signed_checked(ValueType::I8).message(),
            "value -129 does not fit in i8");
  EXPECT_EQ(*Value::i32(-128).to_signed_checked(ValueType::I8), -128);
  EXPECT_EQ(Value::u32(2147483648u).to_signed_checked(ValueType::I32).message(),
            "value 2147483648 does not fit in i32");
  EXPECT_EQ(Value::string("x").to_u64().message(), "expected u64, found string");
  EXPECT_EQ(Value::f32(1.0f).to_i64().message(), "expected i64, found f32");
  EXPECT_EQ(Value::boolean(true).to_u64().message(), "expected u64, found bool");
}

TEST(GgufValue, OtherConversions) {
  EXPECT_EQ(*Value::f32(0.5f).to_f64(), 0.5);
  EXPECT_EQ(*Value::i32(-3).to_f64(), -3.0);
  EXPECT_EQ(*Value::boolean(true).to_bool(), true);
  EXPECT_EQ(Value::u8(1).to_bool().message(), "expected bool, found u8");
  EXPECT_EQ(*Value::string("abc").to_string(), "abc");
  EXPECT_EQ(Value::array(ValueType::U8, {}).to_string().message(), "expected string, found array");
  EXPECT_EQ(Value::string("a").to_f64().message(), "expected f64, found string");
}

TEST(GgufValue, Display) {
  EXPECT_EQ(Value::u32(42).display(), "42");
  EXPECT_EQ(Value::i64(-5).display(), "-5");
  EXPECT_EQ(Value::f32(1.5f).display(), "1.5");
  EXPECT_EQ(Value::f32(0.1f).display(), "0.10000000149011612");
  EXPECT_EQ(Value::boolean(false).display(), "false");
  EXPECT_EQ(Value::string("a\"b\\\n\x01").display(), "\"a\\\"b\\\\\\n\\x01\"");
  std::vector<Value> many;
  for (uint32_t i = 0; i < 150000; ++i) many.push_back(Value::u32(i + 1));
  const Value big = Value::array(ValueType::U32, std::move(many));
  EXPECT_EQ(big.display(3), "[1, 2, 3, ... (150000 items)]");
  EXPECT_EQ(big.array_size(), 150000u);
  EXPECT_EQ(Value::array(ValueType::U32, {}).display(), "[]");
  EXPECT_EQ(Value::array(ValueType::U32, {Value::u32(1)}).display(0), "[... (1 items)]");
  EXPECT_EQ(Value::array(ValueType::ARRAY, {Value::array(ValueType::STRING, {Value::string("x")})})
                .display(),
            "[[\"x\"]]");
}

TEST(GgufValue, Equality) {
  EXPECT_EQ(Value::u32(1), Value::u32(1));
  EXPECT_NE(Value::u32(1), Value::i32(1));
  EXPECT_NE(Value::string("a"), Value::string("b"));
  EXPECT_EQ(Value::f32(std::nanf("")), Value::f32(std::nanf("")));
  EXPECT_NE(Value::f32(0.0f), Value::f32(-0.0f));
  EXPECT_NE(Value::array(ValueType::U8, {}), Value::array(ValueType::I8, {}));
}

}  // namespace
}  // namespace minfer::gguf
