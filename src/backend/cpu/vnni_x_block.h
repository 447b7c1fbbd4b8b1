// The prepared activation super-block of the AVX-512 VNNI K-quant GEMV
// (backend/cpu/matmul_gemv_vnni.h: vnni_gemv_prepare_x's layout) and the
// per-super-block arithmetic of a Q4_K or Q6_K row against it, shared by the dense GEMV
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
#include "quant/blocks.h"

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

// A Q4_K row's f32 lanes, its minimums' 4 lanes kept apart.
struct Q4KRow {
  __m512 acc;
  __m128 acc_min;
};

// What q4k_block reads for every block: pick[c] the vpshufb controls of
// chunk c's scales, low4 = 0x0f bytes.
struct Q4KConsts {
  __m512i pick[4];
  __m512i low4;
};

MINFER_VNNI_INLINE Q4KConsts make_q4k_consts() {
  Q4KConsts k;
  for (int c = 0; c < 4; ++c) {
    k.pick[c] = pick_bytes((c & 1) + 4 * (c >> 1), (c & 1) + 4 * (c >> 1) + 2);
  }
  k.low4 = _mm512_set1_epi8(0x0f);
  return k;
}

// One super-block of one Q4_K row.
MINFER_VNNI_INLINE void q4k_block(const uint8_t* pb, const XBlock& x, const Q4KConsts& k,
                                  Q4KRow& row) {
  const __m128i head = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb));
  const __m128i sm = q4k_scales_mins(head);
  const __m512i sm4 = _mm512_broadcast_i32x4(sm);
  const __m512i q0 = _mm512_loadu_si512(pb + 16);
  const __m512i q1 = _mm512_loadu_si512(pb + 80);
  const __m512i z = _mm512_setzero_si512();
  const __m512i q[4] = {
      _mm512_and_si512(q0, k.low4), _mm512_and_si512(_mm512_srli_epi16(q0, 4), k.low4),
      _mm512_and_si512(q1, k.low4), _mm512_and_si512(_mm512_srli_epi16(q1, 4), k.low4)};
  __m512i s = z;
  for (int c = 0; c < 4; ++c) {
    s = _mm512_dpwssd_epi32(s, _mm512_dpbusd_epi32(z, q[c], x.q[c]),
                            _mm512_shuffle_epi8(sm4, k.pick[c]));
  }
  const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(head), _mm_set1_ps(x.d));  // d * d_x, dmin * d_x
  row.acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_broadcastss_ps(dd), row.acc);
  const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), x.pairs);
  row.acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_shuffle_ps(dd, dd, 0x55), row.acc_min);
}

// What q6k_block reads for every block: pick[c] the vpermw indices of
// chunk c's scales (pick_words(4 c)), low4 = 0x0f and bits45 = 0x30 bytes.
struct Q6KConsts {
  __m512i pick[4];
  __m512i low4;
  __m512i bits45;
};

MINFER_VNNI_INLINE Q6KConsts make_q6k_consts() {
  Q6KConsts k;
  for (int c = 0; c < 4; ++c) k.pick[c] = pick_words(4 * c);
  k.low4 = _mm512_set1_epi8(0x0f);
  k.bits45 = _mm512_set1_epi8(0x30);
  return k;
}

// One super-block of one Q6_K row; returns the row's f32 lanes plus it.
MINFER_VNNI_INLINE __m512 q6k_block(const uint8_t* pb, const XBlock& x, const Q6KConsts& k,
                                    __m512 acc) {
  const __m256i sc16 = _mm256_cvtepi8_epi16(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + offsetof(quant::BlockQ6_K, scales))));
  const __m512i scz = _mm512_zextsi256_si512(sc16);  // words 16..31 are zero
  const __m512i z = _mm512_setzero_si512();
  __m512i s = z;
  for (int h = 0; h < 2; ++h) {  // halves of 128 elements
    const __m512i ql = _mm512_loadu_si512(pb + 64 * h);
    const __m256i qh = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(pb + offsetof(quant::BlockQ6_K, qh) + 32 * h));
    // Bytes 0..31 for elements r and 64 + r, bytes 32..63 for 32 + r, 96 + r.
    const __m512i qhz = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
    const __m512i lo = _mm512_or_si512(_mm512_and_si512(ql, k.low4),
                                       _mm512_and_si512(_mm512_slli_epi16(qhz, 4), k.bits45));
    const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), k.low4),
                                       _mm512_and_si512(qhz, k.bits45));
    s = _mm512_dpwssd_epi32(s, _mm512_dpbusd_epi32(z, lo, x.q[2 * h]),
                            _mm512_permutexvar_epi16(k.pick[2 * h], scz));
    s = _mm512_dpwssd_epi32(s, _mm512_dpbusd_epi32(z, hi, x.q[2 * h + 1]),
                            _mm512_permutexvar_epi16(k.pick[2 * h + 1], scz));
  }
  // The -32 offset: 32 * sum over sub-blocks of scale * bsum.
  const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, x.sums), 5);
  s = _mm512_sub_epi32(s, _mm512_zextsi256_si512(off));
  uint16_t dh;
  std::memcpy(&dh, pb + offsetof(quant::BlockQ6_K, d), sizeof(dh));
  const float d = _cvtsh_ss(dh) * x.d;
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(d), acc);
}

}  // namespace minfer::cpu::vnni_x

#endif  // __x86_64__
