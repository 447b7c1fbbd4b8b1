#include "quant/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace minfer::quant {
namespace {

static_assert(f16_to_f32(0x3c00) == 1.0f);
static_assert(f32_to_f16(1.0f) == 0x3c00);
static_assert(f32_to_f16(65504.0f) == 0x7bff);
static_assert(f32_to_f16(65520.0f) == 0x7c00);  // the tie above the largest finite rounds up
static_assert(f32_to_f16(0x1p-24f) == 0x0001);
static_assert(f32_to_f16(0x1p-25f) == 0x0000);  // tie with 0 rounds to even
static_assert(f32_to_f16(0x1.8p-24f) == 0x0002);
static_assert(f32_to_bf16(1.0f) == 0x3f80);
static_assert(bf16_to_f32(0xc000) == -2.0f);

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

TEST(Half, EveryF16SurvivesARoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    const bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
    if (nan) {
      ASSERT_TRUE(std::isnan(f)) << h;
      ASSERT_EQ(f32_to_f16(f), h | 0x200) << h;  // quieted, sign and payload kept
    } else {
      ASSERT_EQ(f32_to_f16(f), h) << h;
    }
  }
}

TEST(Half, F16ToF32MatchesExactValues) {
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x03ff), 1023.0f * std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(bits(f16_to_f32(0x8000)), 0x80000000u);
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(bits(f16_to_f32(0x7c01)), 0x7fc02000u);
}

// Every f32 halfway between two adjacent f16 values, and its neighbours one
// f32 ulp either side, must round as round-to-nearest-even says.
TEST(Half, F32ToF16RoundsHalfwayCasesToEven) {
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const double lo = f16_to_f32(static_cast<uint16_t>(h));
    const double hi = f16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact in f32
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    ASSERT_EQ(f32_to_f16(mid), even) << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 0.0f)), h) << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 1e9f)), h + 1) << h;
    ASSERT_EQ(f32_to_f16(-mid), even | 0x8000) << h;
  }
}

#if defined(__FLT16_MAX__)
// The compiler's _Float16 conversion (hardware or libgcc/compiler-rt) is an
// independent implementation of the same IEEE rounding.
TEST(Half, F32ToF16MatchesCompilerFloat16) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    const auto want = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    ASSERT_EQ(f32_to_f16(f), want) << std::hexfloat << f;
  }
}
#endif

TEST(Half, Bf16RoundsToNearestEvenAndKeepsNan) {
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  // A NaN whose payload lives only in the low 16 bits must not become inf.
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0xffc00000u)))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16_to_f32(static_cast<uint16_t>(b));
    if (!std::isnan(f)) ASSERT_EQ(f32_to_bf16(f), b);
  }
}

}  // namespace
}  // namespace minfer::quant
