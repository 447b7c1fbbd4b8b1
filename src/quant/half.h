// IEEE binary16 (f16) and bfloat16 (bf16) <-> f32 conversions, bit-exact.
//
// Contract: every function is a pure, total function on bit patterns.
//   - f16_to_f32 / bf16_to_f32 are exact (every f16 and bf16 value is an f32);
//     f16_to_f32 quiets signalling NaNs, bf16_to_f32 is a plain bit shift.
//   - f32_to_f16 rounds to nearest, ties to even; overflow gives +-inf;
//     results below the f16 normal range become subnormals or signed zero.
//   - f32_to_bf16 rounds to nearest, ties to even; overflow gives +-inf.
//   - NaN stays NaN: the sign and the top payload bits are kept and the quiet
//     bit is set, which is what x86 F16C, ARM FCVT and ggml's bf16 helper do,
//     so kernels using the hardware instructions agree with this reference.
// The rounding never depends on the floating-point environment (integer
// arithmetic only). Threading: no state.
#pragma once

#include <bit>
#include <cstdint>

namespace minfer::quant {

constexpr float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {
    // Signalling NaNs come out quiet, as from F16C, ARM FCVT and ggml's
    // scalar path; inf has mant == 0 and stays inf.
    const uint32_t quiet = mant != 0 ? 0x00400000u : 0u;
    return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mant << 13));
  }
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  // Subnormal or zero: mant * 2^-24 is exact in f32.
  const float magnitude = static_cast<float>(mant) * 0x1p-24f;
  return sign ? -magnitude : magnitude;
}

constexpr uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) {  // NaN
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  if (ax >= 0x38800000u) {  // at least 2^-14, the smallest f16 normal (or inf)
    if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
    // Adding 0xfff plus the kept LSB rounds half to even; a carry out of the
    // mantissa correctly bumps the exponent, and past 65504 reaches inf.
    const uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);
    const uint32_t h = (rounded - (112u << 23)) >> 13;
    return static_cast<uint16_t>(sign | (h >= 0x7c00u ? 0x7c00u : h));
  }
  const uint32_t exp = ax >> 23;
  if (exp < 102) return sign;  // below half the smallest subnormal (2^-25): zero
  // The f16 subnormal count is value * 2^24 = mant * 2^(exp - 126).
  const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exp;  // 14..24
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // may become 0x400: smallest normal
  return static_cast<uint16_t>(sign | q);
}

constexpr float bf16_to_f32(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

constexpr uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncating could yield inf, so force quiet
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  }
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace minfer::quant
