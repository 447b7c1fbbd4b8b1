// The prepared activation super-block of the AVX-512 VNNI K-quant GEMV
// (backend/cpu/matmul_gemv_vnni.h: vnni_gemv_prepare_x's layout) and the
// helpers that load it and decode Q4_K scales, shared by the dense GEMV
// (matmul_gemv_vnni.cpp) and the expert products (moe_kquant_vnni.cpp).
// The layout on every target; the helpers x86-64 only: every function carries the VNNI target
// attribute (vnni_target.h), so an includer builds for the baseline ISA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace minfer::cpu::vnni_x {

// Byte offsets within one prepared super-block of kXBlock bytes: the Q8_K
// scale d (f32), 8 i16 sums of 32 quants, 16 i16 sums of 16 quants, then
// the 256 quants in the weight type's order.
constexpr size_t kXBlock = 320;
constexpr size_t kXPairSums = 16;
constexpr size_t kXSums = 32;
constexpr size_t kXQuants = 64;

}  // namespace minfer::cpu::vnni_x

#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/vnni_target.h"

namespace minfer::cpu::vnni_x {

// One super-block of activations, loaded once per pass.
struct XBlock {
  __m512i q[4];   // 64 quants each, in the weight type's order
  __m128i pairs;  // 8 i16 sums of 32 quants
  __m256i sums;   // 16 i16 sums of 16 quants (the Q8_K bsums)
  float d;
};

MINFER_VNNI_INLINE XBlock load_x(const uint8_t* xb) {
  XBlock x;
  for (int k = 0; k < 4; ++k) x.q[k] = _mm512_loadu_si512(xb + kXQuants + 64 * k);
  x.pairs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + kXPairSums));
  x.sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + kXSums));
  std::memcpy(&x.d, xb, sizeof(float));
  return x;
}

// i32 lanes 0-7 pick byte a of each 128-bit lane zero-extended, lanes 8-15
// byte b (a vpshufb control; 0xff bytes give zero).
MINFER_VNNI_INLINE __m512i pick_bytes(int a, int b) {
  const int ia = static_cast<int>(0xffffff00u | static_cast<unsigned>(a));
  const int ib = static_cast<int>(0xffffff00u | static_cast<unsigned>(b));
  return _mm512_set_epi32(ib, ib, ib, ib, ib, ib, ib, ib, ia, ia, ia, ia, ia, ia, ia, ia);
}

// i32 lane l picks word base + l / 4 in its low half and word 16 (zero) in
// its high half (a vpermw index).
MINFER_VNNI_INLINE __m512i pick_words(int base) {
  alignas(64) int32_t idx[16];
  for (int l = 0; l < 16; ++l) idx[l] = (16 << 16) | (base + l / 4);
  return _mm512_load_si512(idx);
}

// Q4_K's first 16 bytes {d, dmin, 12 packed scale bytes s} -> bytes
// [scale 0..7, min 0..7]: j < 4 take the low 6 bits of s[j] and s[j + 4];
// j >= 4 take a nibble of s[j + 4] and the top 2 bits of s[j - 4] / s[j].
MINFER_VNNI_INLINE __m128i q4k_scales_mins(__m128i head) {
  const __m128i x = _mm_shuffle_epi8(
      head, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15));
  const __m128i y = _mm_shuffle_epi8(
      head, _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11));
  const __m128i x2 = _mm_mask_blend_epi8(0xf000, x, _mm_srli_epi16(x, 4));
  const __m128i lo = _mm_and_si128(
      x2, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
  const __m128i hi = _mm_and_si128(
      _mm_srli_epi16(y, 2), _mm_setr_epi8(0, 0, 0, 0, 48, 48, 48, 48, 0, 0, 0, 0, 48, 48, 48, 48));
  return _mm_or_si128(lo, hi);
}

}  // namespace minfer::cpu::vnni_x

#endif  // __x86_64__
