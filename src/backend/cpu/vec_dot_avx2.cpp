// AVX2 + FMA + F16C dot kernels. Every function carries the target attribute
// instead of the file being built with -mavx2, so nothing here (inline
// helpers included) can leak AVX2 code into paths that run on older CPUs;
// vec_dot.cpp only calls these after checking the CPU.
//
// The quantized kernels form the same exact integer block sums as the scalar
// ones and differ only in how the scaled block sums are added up (8-lane f32
// FMA accumulators). F32/F16 follow ggml's AVX2 reduction tree exactly; BF16
// uses the same tree.
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "backend/cpu/vec_dot_internal.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/kquant_layout.h"

#define MINFER_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace minfer::cpu::detail {
namespace {

using quant::f16_to_f32;
using quant::kQK;
using quant::kQK_K;

MINFER_AVX2 inline float hsum_ps(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// ggml's GGML_F32x8_REDUCE: pairwise over the four accumulators, then the
// two 128-bit halves, then two horizontal adds.
MINFER_AVX2 inline float reduce4(__m256 s[4]) {
  s[0] = _mm256_add_ps(s[0], s[2]);
  s[1] = _mm256_add_ps(s[1], s[3]);
  s[0] = _mm256_add_ps(s[0], s[1]);
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s[0]), _mm256_extractf128_ps(s[0], 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

// Eight int32 lanes of sum(x[i] * y[i]) over adjacent groups of four signed
// bytes. maddubs needs an unsigned operand, so x's sign moves onto y; |x| <= 127
// keeps every 16-bit pair sum below saturation.
MINFER_AVX2 inline __m256i dot_i8(__m256i x, __m256i y) {
  const __m256i ax = _mm256_sign_epi8(x, x);
  const __m256i sy = _mm256_sign_epi8(y, x);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
}

// The 32 nibbles of a 16-byte Q4 block in element order (low nibbles are
// elements 0..15, high nibbles 16..31).
MINFER_AVX2 inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(lo, 4), lo);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// Byte i = 0xff where bit i of `bits` is set.
MINFER_AVX2 inline __m256i expand_bits(uint32_t bits) {
  const __m256i v = _mm256_set1_epi32(static_cast<int>(bits));
  const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i mask = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i bytes = _mm256_and_si256(_mm256_shuffle_epi8(v, pick), mask);
  return _mm256_cmpeq_epi8(bytes, mask);
}

// The scales are f16; F16C converts them exactly, like quant::f16_to_f32 but
// without its branches.
MINFER_AVX2 inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

MINFER_AVX2 inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

}  // namespace

MINFER_AVX2 float dot_f32_avx2(int64_t n, const void* w, const void* x) {
  const float* a = static_cast<const float*>(w);
  const float* b = static_cast<const float*>(x);
  const int64_t np = n & ~int64_t{31};
  __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t i = 0; i < np; i += 32) {
    for (int j = 0; j < 4; ++j) {
      sum[j] =
          _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * j), _mm256_loadu_ps(b + i + 8 * j), sum[j]);
    }
  }
  float sumf = reduce4(sum);
  for (int64_t i = np; i < n; ++i) sumf += a[i] * b[i];
  return sumf;
}

MINFER_AVX2 float dot_f16_avx2(int64_t n, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  const int64_t np = n & ~int64_t{31};
  __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t i = 0; i < np; i += 32) {
    for (int j = 0; j < 4; ++j) {
      const __m256 va =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i + 8 * j)));
      const __m256 vb =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i + 8 * j)));
      sum[j] = _mm256_fmadd_ps(va, vb, sum[j]);
    }
  }
  double sumf = reduce4(sum);
  for (int64_t i = np; i < n; ++i) {
    sumf += static_cast<double>(f16_to_f32(a[i]) * f16_to_f32(b[i]));
  }
  return static_cast<float>(sumf);
}

// acc + d_w * d_x * (integer dot of one 32-element block), for each format.
MINFER_AVX2 inline __m256 q4_0_block(const uint8_t* pw, const uint8_t* px, __m256 acc) {
  const __m256i q = _mm256_sub_epi8(unpack_nibbles(pw + 2), _mm256_set1_epi8(8));
  const __m256 s = _mm256_cvtepi32_ps(dot_i8(q, load256(px + 2)));
  return _mm256_fmadd_ps(_mm256_set1_ps(half_at(pw) * half_at(px)), s, acc);
}

MINFER_AVX2 inline __m256 q5_0_block(const uint8_t* pw, const uint8_t* px, __m256 acc) {
  uint32_t qh;
  std::memcpy(&qh, pw + 2, 4);
  const __m256i hi = _mm256_and_si256(expand_bits(qh), _mm256_set1_epi8(0x10));
  const __m256i q =
      _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles(pw + 6), hi), _mm256_set1_epi8(16));
  const __m256 s = _mm256_cvtepi32_ps(dot_i8(q, load256(px + 2)));
  return _mm256_fmadd_ps(_mm256_set1_ps(half_at(pw) * half_at(px)), s, acc);
}

MINFER_AVX2 inline __m256 q8_0_block(const uint8_t* pw, const uint8_t* px, __m256 acc) {
  const __m256 s = _mm256_cvtepi32_ps(dot_i8(load256(pw + 2), load256(px + 2)));
  return _mm256_fmadd_ps(_mm256_set1_ps(half_at(pw) * half_at(px)), s, acc);
}

// MXFP4: each nibble looks up its doubled E2M1 value (|v| <= 12, so dot_i8's
// pair sums stay far from saturation); the scale is f16(d_x) times half the
// E8M0 scale, the scalar kernel's product.
MINFER_AVX2 inline __m256 mxfp4_block(const uint8_t* pw, const uint8_t* px, __m256 acc) {
  const __m256i table = _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kMxfp4Values)));
  const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles(pw + 1));
  const __m256 s = _mm256_cvtepi32_ps(dot_i8(q, load256(px + 2)));
  const float d = half_at(px) * quant::mxfp4_half_scale(pw[0]);
  return _mm256_fmadd_ps(_mm256_set1_ps(d), s, acc);
}

// Sums the blocks of a 32-element format against Q8_0 in one accumulator, in
// block order, as ggml's AVX2 kernels do; the multi-row decode path of
// backend/cpu/matmul_gemm.h adds in the same order, so the two agree bit for bit.
template <size_t kWeightBlock, __m256 (*kBlock)(const uint8_t*, const uint8_t*, __m256)>
MINFER_AVX2 inline float sum_q8_0_blocks(int64_t n, const void* w, const void* x) {
  const auto* pw = static_cast<const uint8_t*>(w);
  const auto* px = static_cast<const uint8_t*>(x);
  constexpr size_t kXBlock = sizeof(quant::BlockQ8_0);
  const int64_t nb = n / kQK;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < nb; ++ib) acc = kBlock(pw + ib * kWeightBlock, px + ib * kXBlock, acc);
  return hsum_ps(acc);
}

MINFER_AVX2 float dot_q4_0_avx2(int64_t n, const void* w, const void* x) {
  return sum_q8_0_blocks<sizeof(quant::BlockQ4_0), q4_0_block>(n, w, x);
}

MINFER_AVX2 float dot_q5_0_avx2(int64_t n, const void* w, const void* x) {
  return sum_q8_0_blocks<sizeof(quant::BlockQ5_0), q5_0_block>(n, w, x);
}

MINFER_AVX2 float dot_q8_0_avx2(int64_t n, const void* w, const void* x) {
  return sum_q8_0_blocks<sizeof(quant::BlockQ8_0), q8_0_block>(n, w, x);
}

MINFER_AVX2 float dot_mxfp4_avx2(int64_t n, const void* w, const void* x) {
  return sum_q8_0_blocks<sizeof(quant::BlockMxfp4), mxfp4_block>(n, w, x);
}

// The even and the odd elements of 16 bf16 values as eight f32 each (a bf16
// is the upper half of an f32, so no shuffles are needed).
MINFER_AVX2 inline __m256 bf16_even(__m256i v) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
MINFER_AVX2 inline __m256 bf16_odd(__m256i v) {
  return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}

// Four 8-lane FMA accumulators as dot_f16_avx2, reduced the same way, but each
// takes the even or the odd elements of 16; then the tail in double.
MINFER_AVX2 float dot_bf16_avx2(int64_t n, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  const int64_t np = n & ~int64_t{31};
  __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t i = 0; i < np; i += 32) {
    for (int j = 0; j < 2; ++j) {
      const __m256i va = load256(a + i + 16 * j);
      const __m256i vb = load256(b + i + 16 * j);
      sum[2 * j] = _mm256_fmadd_ps(bf16_even(va), bf16_even(vb), sum[2 * j]);
      sum[2 * j + 1] = _mm256_fmadd_ps(bf16_odd(va), bf16_odd(vb), sum[2 * j + 1]);
    }
  }
  double sumf = reduce4(sum);
  for (int64_t i = np; i < n; ++i) {
    uint16_t wa, xb;
    std::memcpy(&wa, a + i, 2);
    std::memcpy(&xb, b + i, 2);
    sumf += static_cast<double>(quant::bf16_to_f32(wa) * quant::bf16_to_f32(xb));
  }
  return static_cast<float>(sumf);
}

// Eight int32 lanes of sum(q[i] * y[i]) over adjacent groups of four bytes,
// q unsigned and below 32, y signed (-128 included): maddubs' 16-bit pair
// sums stay within 2 * 31 * 128, so nothing saturates.
MINFER_AVX2 inline __m256i dot_u8_i8(__m256i q, __m256i y) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), _mm256_set1_epi16(1));
}

// The two f16 values at p in lanes 0 and 1 (Q4_1/Q5_1: d, m; Q8_1: d, s).
MINFER_AVX2 inline __m128 two_halves(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(v));
}

// Q4_1/Q5_1 against Q8_1 (d, s = d * sum(q) as f16, then the quants): acc +
// d_w * d_x * (integer dot of one block) from lane 0 of d_m = (d_w * d_x,
// m_w * s_x), and *summs + d_m, whose lane 1 sums the offsets.
MINFER_AVX2 inline __m256 q8_1_scaled(const uint8_t* pw, const uint8_t* px, __m256i sumi,
                                      __m256 acc, __m128* summs) {
  const __m128 d_m = _mm_mul_ps(two_halves(pw), two_halves(px));
  *summs = _mm_add_ps(*summs, d_m);
  return _mm256_fmadd_ps(_mm256_broadcastss_ps(d_m), _mm256_cvtepi32_ps(sumi), acc);
}

MINFER_AVX2 inline __m256 q4_1_block(const uint8_t* pw, const uint8_t* px, __m256 acc,
                                     __m128* summs) {
  const __m256i sumi = dot_u8_i8(unpack_nibbles(pw + 4), load256(px + 4));
  return q8_1_scaled(pw, px, sumi, acc, summs);
}

MINFER_AVX2 inline __m256 q5_1_block(const uint8_t* pw, const uint8_t* px, __m256 acc,
                                     __m128* summs) {
  uint32_t qh;
  std::memcpy(&qh, pw + 4, 4);
  const __m256i hi = _mm256_and_si256(expand_bits(qh), _mm256_set1_epi8(0x10));
  const __m256i q = _mm256_or_si256(unpack_nibbles(pw + 8), hi);
  return q8_1_scaled(pw, px, dot_u8_i8(q, load256(px + 4)), acc, summs);
}

// The blocks of a Q4_1/Q5_1 row in one accumulator, in block order, with the
// offsets summed apart in f32 and added at the end (as ggml's AVX2 code).
template <size_t kWeightBlock, __m256 (*kBlock)(const uint8_t*, const uint8_t*, __m256, __m128*)>
MINFER_AVX2 inline float sum_q8_1_blocks(int64_t n, const void* w, const void* x) {
  const auto* pw = static_cast<const uint8_t*>(w);
  const auto* px = static_cast<const uint8_t*>(x);
  constexpr size_t kXBlock = sizeof(quant::BlockQ8_1);
  const int64_t nb = n / kQK;
  __m256 acc = _mm256_setzero_ps();
  __m128 summs = _mm_setzero_ps();
  for (int64_t ib = 0; ib < nb; ++ib) {
    acc = kBlock(pw + ib * kWeightBlock, px + ib * kXBlock, acc, &summs);
  }
  return hsum_ps(acc) + _mm_cvtss_f32(_mm_movehdup_ps(summs));
}

MINFER_AVX2 float dot_q4_1_avx2(int64_t n, const void* w, const void* x) {
  return sum_q8_1_blocks<sizeof(quant::BlockQ4_1), q4_1_block>(n, w, x);
}

MINFER_AVX2 float dot_q5_1_avx2(int64_t n, const void* w, const void* x) {
  return sum_q8_1_blocks<sizeof(quant::BlockQ5_1), q5_1_block>(n, w, x);
}

// Q4_K's eight (scale, min) pairs, and the sum over sub-blocks of
// min * (sum of the activation quants), from the Q8_K block's bsums.
MINFER_AVX2 inline int q4k_scales(const uint8_t* packed, const uint8_t* bsums, int16_t sc[8]) {
  int summ = 0;
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    quant::detail::get_k4_scale_min(packed, j, &scale, &min);
    int16_t b[2];
    std::memcpy(b, bsums + 4 * j, 4);
    sc[j] = static_cast<int16_t>(scale);
    summ += min * (b[0] + b[1]);
  }
  return summ;
}

MINFER_AVX2 float dot_q4_k_avx2(int64_t n, const void* w, const void* x) {
  using quant::BlockQ4_K;
  using quant::BlockQ8_K;
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0.0f;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* pw = static_cast<const uint8_t*>(w) + i * sizeof(BlockQ4_K);
    const uint8_t* px = static_cast<const uint8_t*>(x) + i * sizeof(BlockQ8_K);
    const uint8_t* qs = pw + offsetof(BlockQ4_K, qs);
    const uint8_t* q8 = px + offsetof(BlockQ8_K, qs);
    float yd;
    std::memcpy(&yd, px + offsetof(BlockQ8_K, d), 4);
    int16_t sc[8];
    const int summ =
        q4k_scales(pw + offsetof(BlockQ4_K, scales), px + offsetof(BlockQ8_K, bsums), sc);
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {  // 32 bytes of qs hold sub-blocks 2j (low) and 2j+1 (high)
      const __m256i q4 = load256(qs + 32 * j);
      const __m256i lo = _mm256_and_si256(q4, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4);
      const __m256i plo = _mm256_maddubs_epi16(lo, load256(q8 + 64 * j));
      const __m256i phi = _mm256_maddubs_epi16(hi, load256(q8 + 64 * j + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, _mm256_set1_epi16(sc[2 * j])));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, _mm256_set1_epi16(sc[2 * j + 1])));
    }
    const float d = half_at(pw + offsetof(BlockQ4_K, d)) * yd;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    acc_min += half_at(pw + offsetof(BlockQ4_K, dmin)) * yd * static_cast<float>(summ);
  }
  return hsum_ps(acc) - acc_min;
}

// The 6-bit quants of quarter k (elements 32k..32k+31) of a 128-element half.
MINFER_AVX2 inline __m256i q6_quarter(__m256i ql0, __m256i ql1, __m256i qh, int k) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i two_bits = _mm256_set1_epi8(3);
  const __m256i ql = k % 2 == 0 ? ql0 : ql1;
  const __m256i lo =
      k < 2 ? _mm256_and_si256(ql, low4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4);
  __m256i hi = qh;
  if (k == 1) hi = _mm256_srli_epi16(qh, 2);
  if (k == 2) hi = _mm256_srli_epi16(qh, 4);
  if (k == 3) hi = _mm256_srli_epi16(qh, 6);
  return _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hi, two_bits), 4));
}

MINFER_AVX2 float dot_q6_k_avx2(int64_t n, const void* w, const void* x) {
  using quant::BlockQ6_K;
  using quant::BlockQ8_K;
  __m256 acc = _mm256_setzero_ps();
  const __m256i k32 = _mm256_set1_epi8(32);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* pw = static_cast<const uint8_t*>(w) + i * sizeof(BlockQ6_K);
    const uint8_t* px = static_cast<const uint8_t*>(x) + i * sizeof(BlockQ8_K);
    const auto* scales = reinterpret_cast<const int8_t*>(pw + offsetof(BlockQ6_K, scales));
    const uint8_t* q8 = px + offsetof(BlockQ8_K, qs);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {  // two halves of 128 elements
      const __m256i ql0 = load256(pw + offsetof(BlockQ6_K, ql) + 64 * h);
      const __m256i ql1 = load256(pw + offsetof(BlockQ6_K, ql) + 64 * h + 32);
      const __m256i qh = load256(pw + offsetof(BlockQ6_K, qh) + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i y = load256(q8 + 128 * h + 32 * k);
        // (q - 32) * y as q * y - 32 * y keeps maddubs' unsigned operand unsigned.
        const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q6_quarter(ql0, ql1, qh, k), y),
                                           _mm256_maddubs_epi16(k32, y));
        const int j = 8 * h + 2 * k;  // the scales of elements 0..15 and 16..31 of the quarter
        const __m256i s =
            _mm256_set_m128i(_mm_set1_epi16(scales[j + 1]), _mm_set1_epi16(scales[j]));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s));
      }
    }
    float yd;
    std::memcpy(&yd, px + offsetof(BlockQ8_K, d), 4);
    const float d = half_at(pw + offsetof(BlockQ6_K, d)) * yd;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc);
}

// 0xff in byte l where bit `bit` of byte l of `bytes` is set.
MINFER_AVX2 inline __m256i bit_set(__m256i bytes, int bit) {
  const __m256i mask = _mm256_set1_epi8(static_cast<char>(1 << bit));
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, mask), mask);
}

// 0x10 in byte l where bit `bit` of qh[l] is set: the fifth bit of Q5_K quants.
MINFER_AVX2 inline __m256i high_bit16(__m256i qh, int bit) {
  return _mm256_and_si256(bit_set(qh, bit), _mm256_set1_epi8(0x10));
}

MINFER_AVX2 float dot_q5_k_avx2(int64_t n, const void* w, const void* x) {
  using quant::BlockQ5_K;
  using quant::BlockQ8_K;
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0.0f;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* pw = static_cast<const uint8_t*>(w) + i * sizeof(BlockQ5_K);
    const uint8_t* px = static_cast<const uint8_t*>(x) + i * sizeof(BlockQ8_K);
    const uint8_t* qs = pw + offsetof(BlockQ5_K, qs);
    const uint8_t* q8 = px + offsetof(BlockQ8_K, qs);
    const __m256i qh = load256(pw + offsetof(BlockQ5_K, qh));
    float yd;
    std::memcpy(&yd, px + offsetof(BlockQ8_K, d), 4);
    int16_t sc[8];
    const int summ =
        q4k_scales(pw + offsetof(BlockQ5_K, scales), px + offsetof(BlockQ8_K, bsums), sc);
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i q4 = load256(qs + 32 * j);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(q4, low4), high_bit16(qh, 2 * j));
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4, 4), low4),
                                         high_bit16(qh, 2 * j + 1));
      const __m256i plo = _mm256_maddubs_epi16(lo, load256(q8 + 64 * j));
      const __m256i phi = _mm256_maddubs_epi16(hi, load256(q8 + 64 * j + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, _mm256_set1_epi16(sc[2 * j])));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, _mm256_set1_epi16(sc[2 * j + 1])));
    }
    const float d = half_at(pw + offsetof(BlockQ5_K, d)) * yd;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    acc_min += half_at(pw + offsetof(BlockQ5_K, dmin)) * yd * static_cast<float>(summ);
  }
  return hsum_ps(acc) - acc_min;
}

// Sum over the 32 elements of one (half, shift) slice of a Q2_K/Q3_K block:
// q (unsigned, 2-3 bits) times y, each 16-element half weighted by its scale.
MINFER_AVX2 inline __m256i scaled_slice(__m256i q, __m256i y, int16_t scale_lo, int16_t scale_hi) {
  const __m256i s = _mm256_set_m128i(_mm_set1_epi16(scale_hi), _mm_set1_epi16(scale_lo));
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), s);
}

MINFER_AVX2 float dot_q2_k_avx2(int64_t n, const void* w, const void* x) {
  using quant::BlockQ2_K;
  using quant::BlockQ8_K;
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0.0f;
  const __m256i two_bits = _mm256_set1_epi8(3);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* pw = static_cast<const uint8_t*>(w) + i * sizeof(BlockQ2_K);
    const uint8_t* px = static_cast<const uint8_t*>(x) + i * sizeof(BlockQ8_K);
    const uint8_t* scales = pw + offsetof(BlockQ2_K, scales);
    int16_t bsums[16];
    std::memcpy(bsums, px + offsetof(BlockQ8_K, bsums), sizeof(bsums));
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += bsums[j] * (scales[j] >> 4);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q2 = load256(pw + offsetof(BlockQ2_K, qs) + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * k), two_bits);
        const __m256i y = load256(px + offsetof(BlockQ8_K, qs) + 128 * h + 32 * k);
        const int g = 8 * h + 2 * k;
        sumi = _mm256_add_epi32(sumi, scaled_slice(q, y, scales[g] & 0x0f, scales[g + 1] & 0x0f));
      }
    }
    float yd;
    std::memcpy(&yd, px + offsetof(BlockQ8_K, d), 4);
    const float dall = yd * half_at(pw + offsetof(BlockQ2_K, d));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dall), _mm256_cvtepi32_ps(sumi), acc);
    acc_min += yd * half_at(pw + offsetof(BlockQ2_K, dmin)) * static_cast<float>(summs);
  }
  return hsum_ps(acc) - acc_min;
}

MINFER_AVX2 float dot_q3_k_avx2(int64_t n, const void* w, const void* x) {
  using quant::BlockQ3_K;
  using quant::BlockQ8_K;
  __m256 acc = _mm256_setzero_ps();
  const __m256i two_bits = _mm256_set1_epi8(3);
  const __m256i four = _mm256_set1_epi8(4);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* pw = static_cast<const uint8_t*>(w) + i * sizeof(BlockQ3_K);
    const uint8_t* px = static_cast<const uint8_t*>(x) + i * sizeof(BlockQ8_K);
    const uint8_t* packed = pw + offsetof(BlockQ3_K, scales);
    int16_t sc[16];
    for (int j = 0; j < 16; ++j) {
      const int lo = (packed[j % 8] >> (4 * (j / 8))) & 0x0f;
      const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
      sc[j] = static_cast<int16_t>((lo | (hi << 4)) - 32);
    }
    const __m256i hmask = load256(pw + offsetof(BlockQ3_K, hmask));
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q2 = load256(pw + offsetof(BlockQ3_K, qs) + 32 * h);
      for (int k = 0; k < 4; ++k) {
        // q + 4 = low bits + 4 * high bit is unsigned; the 4 * y term is taken back below.
        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * k), two_bits);
        const __m256i biased =
            _mm256_or_si256(lo, _mm256_and_si256(bit_set(hmask, 4 * h + k), four));
        const __m256i y = load256(px + offsetof(BlockQ8_K, qs) + 128 * h + 32 * k);
        const int g = 8 * h + 2 * k;
        const __m256i s = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
        const __m256i p =
            _mm256_sub_epi16(_mm256_maddubs_epi16(biased, y), _mm256_maddubs_epi16(four, y));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s));
      }
    }
    float yd;
    std::memcpy(&yd, px + offsetof(BlockQ8_K, d), 4);
    const float d = half_at(pw + offsetof(BlockQ3_K, d)) * yd;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc);
}

}  // namespace minfer::cpu::detail

#endif  // x86
