// NEON dot kernels of the integer formats (Q4_0..Q8_0 and MXFP4 against Q8_0/Q8_1, the
// K-quants against Q8_K), written once for two ways of forming int8 dot
// products. Each includer supplies a policy `Dot` with
//   static int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b);
// which adds the 16 products a[i] * b[i] to acc, spread over its four lanes in
// any way (only the lane total is defined):
//   - vec_dot_neon.cpp: ARMv8.0 widening multiplies (every AArch64 CPU);
//   - vec_dot_neon_dotprod.cpp: the ARMv8.2 SDOT instruction, in a file built
//     with +dotprod that vec_dot.cpp calls only on CPUs reporting the feature.
// Everything here has internal linkage, so the two builds never share a
// function: no code compiled for +dotprod can be picked by the linker for
// the baseline file.
//
// Contract (as the AVX2 kernels): the integer sum of every block (or
// sub-block, times its integer scale) is exact and equals the scalar
// kernel's; only the float accumulation of the scaled sums differs (4-lane
// f32 FMA accumulators for the 32-element formats, one f32 per super-block
// for the K-quants). Quants may take any value their bit width allows, and
// activations any int8 value: no intermediate saturates.
// For those two .cpp files only; aarch64 only.
#pragma once

#if !defined(__aarch64__)
#error "vec_dot_neon_impl.h is for AArch64 builds only"
#endif

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "quant/kquant_layout.h"

namespace minfer::cpu::detail::neon {
namespace {

using quant::kQK;
using quant::kQK_K;

// f16 -> f32 is exact; AArch64 converts in one instruction.
inline float half_at(const uint8_t* p) {
  __fp16 h;
  std::memcpy(&h, p, sizeof(h));
  return static_cast<float>(h);
}

inline float float_at(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof(f));
  return f;
}

inline int8x16_t load_s8(const uint8_t* p) {
  return vld1q_s8(reinterpret_cast<const int8_t*>(p));
}

inline int8x16_t as_s8(uint8x16_t v) {
  return vreinterpretq_s8_u8(v);
}

// Byte i is 0xff where bit i of the low 16 bits of `bits` is set.
inline uint8x16_t expand_bits16(uint32_t bits) {
  static constexpr uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t v = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits & 0xff)),
                                   vdup_n_u8(static_cast<uint8_t>((bits >> 8) & 0xff)));
  return vtstq_u8(v, vld1q_u8(kBit));
}

// The 32 quants of a 32-element weight block as int8: elements 0..15 in lo,
// 16..31 in hi (Q4/Q5 keep element e and e + 16 in one byte's two nibbles).
struct Q4_0Format {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_0);
  static void quants(const uint8_t* pw, int8x16_t* lo, int8x16_t* hi) {
    const uint8x16_t q = vld1q_u8(pw + offsetof(quant::BlockQ4_0, qs));
    *lo = vsubq_s8(as_s8(vandq_u8(q, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
    *hi = vsubq_s8(as_s8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
  }
};

struct Q4_1Format {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_1);
  static constexpr size_t kMinOffset = offsetof(quant::BlockQ4_1, m);
  static void quants(const uint8_t* pw, int8x16_t* lo, int8x16_t* hi) {
    const uint8x16_t q = vld1q_u8(pw + offsetof(quant::BlockQ4_1, qs));
    *lo = as_s8(vandq_u8(q, vdupq_n_u8(0x0f)));
    *hi = as_s8(vshrq_n_u8(q, 4));
  }
};

// Q5_0/Q5_1: four low bits as in Q4, bit 4 of element e is bit e of qh.
inline void q5_quants(const uint8_t* qs, const uint8_t* qh_bytes, uint8x16_t* lo, uint8x16_t* hi) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof(qh));
  const uint8x16_t q = vld1q_u8(qs);
  const uint8x16_t bit4 = vdupq_n_u8(0x10);
  *lo = vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0f)), vandq_u8(expand_bits16(qh), bit4));
  *hi = vorrq_u8(vshrq_n_u8(q, 4), vandq_u8(expand_bits16(qh >> 16), bit4));
}

struct Q5_0Format {
  static constexpr size_t kBytes = sizeof(quant::BlockQ5_0);
  static void quants(const uint8_t* pw, int8x16_t* lo, int8x16_t* hi) {
    uint8x16_t ulo, uhi;
    q5_quants(pw + offsetof(quant::BlockQ5_0, qs), pw + offsetof(quant::BlockQ5_0, qh), &ulo, &uhi);
    *lo = vsubq_s8(as_s8(ulo), vdupq_n_s8(16));
    *hi = vsubq_s8(as_s8(uhi), vdupq_n_s8(16));
  }
};

struct Q5_1Format {
  static constexpr size_t kBytes = sizeof(quant::BlockQ5_1);
  static constexpr size_t kMinOffset = offsetof(quant::BlockQ5_1, m);
  static void quants(const uint8_t* pw, int8x16_t* lo, int8x16_t* hi) {
    uint8x16_t ulo, uhi;
    q5_quants(pw + offsetof(quant::BlockQ5_1, qs), pw + offsetof(quant::BlockQ5_1, qh), &ulo, &uhi);
    *lo = as_s8(ulo);
    *hi = as_s8(uhi);
  }
};

struct Q8_0Format {
  static constexpr size_t kBytes = sizeof(quant::BlockQ8_0);
  static void quants(const uint8_t* pw, int8x16_t* lo, int8x16_t* hi) {
    *lo = load_s8(pw + offsetof(quant::BlockQ8_0, qs));
    *hi = load_s8(pw + offsetof(quant::BlockQ8_0, qs) + 16);
  }
};

// MXFP4: each nibble looks up its doubled E2M1 value; the block's scale is
// the E8M0 byte's half scale instead of a leading f16.
struct Mxfp4Format {
  static constexpr size_t kBytes = sizeof(quant::BlockMxfp4);
  static float scale(const uint8_t* pw) { return quant::mxfp4_half_scale(pw[0]); }
  static void quants(const uint8_t* pw, int8x16_t* lo, int8x16_t* hi) {
    const int8x16_t table = vld1q_s8(quant::kMxfp4Values);
    const uint8x16_t q = vld1q_u8(pw + offsetof(quant::BlockMxfp4, qs));
    *lo = vqtbl1q_s8(table, vandq_u8(q, vdupq_n_u8(0x0f)));
    *hi = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
  }
};

// A weight block's scale: the leading f16 d, unless the format decodes its own.
template <class F>
inline float weight_scale(const uint8_t* pw) {
  if constexpr (requires { F::scale(pw); }) {
    return F::scale(pw);
  } else {
    return half_at(pw);
  }
}

// The exact integer dot of one weight block with the 32 quants at q8.
template <class Dot, class F>
inline int32x4_t block_sum(const uint8_t* pw, const uint8_t* q8) {
  int8x16_t lo, hi;
  F::quants(pw, &lo, &hi);
  return Dot::dot(Dot::dot(vdupq_n_s32(0), lo, load_s8(q8)), hi, load_s8(q8 + 16));
}

// acc + d_w * d_x * (block sum) for one weight block and its Q8_0/Q8_1
// activation block (both start with the f16 scale d; qs at `x_qs`).
template <class Dot, class F, size_t x_qs>
inline float32x4_t scaled_block(const uint8_t* bw, const uint8_t* bx, float32x4_t acc) {
  const int32x4_t s = block_sum<Dot, F>(bw, bx + x_qs);
  return vfmaq_n_f32(acc, vcvtq_f32_s32(s), weight_scale<F>(bw) * half_at(bx));
}

// Symmetric formats (Q4_0, Q5_0, Q8_0, MXFP4) against Q8_0: sum of d_w * d_x * block
// sum, in two 4-lane accumulators (even and odd blocks).
template <class Dot, class F>
float dot_q8_0_blocks(int64_t n, const void* w, const void* x) {
  constexpr size_t kX = sizeof(quant::BlockQ8_0);
  constexpr size_t kQs = offsetof(quant::BlockQ8_0, qs);
  const auto* pw = static_cast<const uint8_t*>(w);
  const auto* px = static_cast<const uint8_t*>(x);
  const int64_t nb = n / kQK;
  float32x4_t acc0 = vdupq_n_f32(0.0f);
  float32x4_t acc1 = vdupq_n_f32(0.0f);
  int64_t ib = 0;
  for (; ib + 2 <= nb; ib += 2) {
    acc0 = scaled_block<Dot, F, kQs>(pw + ib * F::kBytes, px + ib * kX, acc0);
    acc1 = scaled_block<Dot, F, kQs>(pw + (ib + 1) * F::kBytes, px + (ib + 1) * kX, acc1);
  }
  if (ib < nb) acc0 = scaled_block<Dot, F, kQs>(pw + ib * F::kBytes, px + ib * kX, acc0);
  return vaddvq_f32(vaddq_f32(acc0, acc1));
}

// Formats with an offset (Q4_1, Q5_1) against Q8_1: as above plus m_w * s_x
// per block, summed separately.
template <class Dot, class F>
float dot_q8_1_blocks(int64_t n, const void* w, const void* x) {
  using quant::BlockQ8_1;
  constexpr size_t kX = sizeof(BlockQ8_1);
  constexpr size_t kQs = offsetof(BlockQ8_1, qs);
  const auto* pw = static_cast<const uint8_t*>(w);
  const auto* px = static_cast<const uint8_t*>(x);
  const int64_t nb = n / kQK;
  float32x4_t acc0 = vdupq_n_f32(0.0f);
  float32x4_t acc1 = vdupq_n_f32(0.0f);
  float offsets = 0.0f;
  int64_t ib = 0;
  for (; ib + 2 <= nb; ib += 2) {
    acc0 = scaled_block<Dot, F, kQs>(pw + ib * F::kBytes, px + ib * kX, acc0);
    acc1 = scaled_block<Dot, F, kQs>(pw + (ib + 1) * F::kBytes, px + (ib + 1) * kX, acc1);
  }
  if (ib < nb) acc0 = scaled_block<Dot, F, kQs>(pw + ib * F::kBytes, px + ib * kX, acc0);
  for (ib = 0; ib < nb; ++ib) {
    offsets += half_at(pw + ib * F::kBytes + F::kMinOffset) *
               half_at(px + ib * kX + offsetof(BlockQ8_1, s));
  }
  return vaddvq_f32(vaddq_f32(acc0, acc1)) + offsets;
}

// Q4_K/Q5_K: the eight six-bit (scale, min) pairs, and sum_j min_j * (sum of
// the activation quants of sub-block j) from the Q8_K bsums.
inline int k4_scales(const uint8_t* packed, const uint8_t* bsums_bytes, int sc[8]) {
  int16_t bsums[kQK_K / 16];
  std::memcpy(bsums, bsums_bytes, sizeof(bsums));
  int summ = 0;
  for (int j = 0; j < 8; ++j) {
    int m;
    quant::detail::get_k4_scale_min(packed, j, &sc[j], &m);
    summ += m * (bsums[2 * j] + bsums[2 * j + 1]);
  }
  return summ;
}

// Q4_K (qh == nullptr) and Q5_K: sub-blocks 2j and 2j+1 are the low and high
// nibbles of qs[32j .. 32j+31]; Q5_K's bit 4 of sub-block k is bit k of qh.
template <class Dot>
inline int32_t k4_integer_sum(const uint8_t* qs, const uint8_t* qh, const int sc[8],
                              const uint8_t* q8) {
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
  const uint8x16_t one = vdupq_n_u8(1);
  uint8x16_t h[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
  if (qh != nullptr) {
    h[0] = vld1q_u8(qh);
    h[1] = vld1q_u8(qh + 16);
  }
  int32x4_t sumi = vdupq_n_s32(0);
  for (int j = 0; j < 4; ++j) {
    const uint8x16_t q[2] = {vld1q_u8(qs + 32 * j), vld1q_u8(qs + 32 * j + 16)};
    for (int nib = 0; nib < 2; ++nib) {  // sub-block 2j + nib
      int32x4_t p = vdupq_n_s32(0);
      for (int half = 0; half < 2; ++half) {
        uint8x16_t v = nib == 0 ? vandq_u8(q[half], low4) : vshrq_n_u8(q[half], 4);
        v = vorrq_u8(v, vshlq_n_u8(vandq_u8(h[half], one), 4));
        h[half] = vshrq_n_u8(h[half], 1);
        p = Dot::dot(p, as_s8(v), load_s8(q8 + 64 * j + 32 * nib + 16 * half));
      }
      sumi = vmlaq_n_s32(sumi, p, sc[2 * j + nib]);
    }
  }
  return vaddvq_s32(sumi);
}

template <class Dot, class Block>
float dot_k4(int64_t n, const void* w, const void* x) {
  using quant::BlockQ8_K;
  constexpr bool kHasHighBit = sizeof(Block) == sizeof(quant::BlockQ5_K);
  float sumf = 0.0f;
  float sum_min = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* pw = static_cast<const uint8_t*>(w) + i * sizeof(Block);
    const uint8_t* px = static_cast<const uint8_t*>(x) + i * sizeof(BlockQ8_K);
    int sc[8];
    const int summ = k4_scales(pw + offsetof(Block, scales), px + offsetof(BlockQ8_K, bsums), sc);
    const uint8_t* qh = nullptr;
    if constexpr (kHasHighBit) qh = pw + offsetof(quant::BlockQ5_K, qh);
    const int32_t sumi =
        k4_integer_sum<Dot>(pw + offsetof(Block, qs), qh, sc, px + offsetof(BlockQ8_K, qs));
    const float yd = float_at(px + offsetof(BlockQ8_K, d));
    sumf += half_at(pw + offsetof(Block, d)) * yd * static_cast<float>(sumi);
    sum_min += half_at(pw + offsetof(Block, dmin)) * yd * static_cast<float>(summ);
  }
  return sumf - sum_min;
}

// Q2_K: sum over the 16 sub-blocks of (scales[g] & 15) * (q . y); element l
// of sub-blocks 8h + 2s and 8h + 2s + 1 are bits 2s of qs[32h + l] and
// qs[32h + 16 + l].
template <class Dot>
float dot_q2_k(int64_t n, const void* w, const void* x) {
  using quant::BlockQ2_K;
  using quant::BlockQ8_K;
  const uint8x16_t two_bits = vdupq_n_u8(3);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* pw = static_cast<const uint8_t*>(w) + i * sizeof(BlockQ2_K);
    const uint8_t* px = static_cast<const uint8_t*>(x) + i * sizeof(BlockQ8_K);
    const uint8_t* scales = pw + offsetof(BlockQ2_K, scales);
    const uint8_t* q8 = px + offsetof(BlockQ8_K, qs);
    int16_t bsums[16];
    std::memcpy(bsums, px + offsetof(BlockQ8_K, bsums), sizeof(bsums));
    int summs = 0;
    for (int g = 0; g < 16; ++g) summs += bsums[g] * (scales[g] >> 4);
    int32x4_t sumi = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      uint8x16_t q[2] = {vld1q_u8(pw + offsetof(BlockQ2_K, qs) + 32 * h),
                         vld1q_u8(pw + offsetof(BlockQ2_K, qs) + 32 * h + 16)};
      for (int s = 0; s < 4; ++s) {
        for (int half = 0; half < 2; ++half) {
          const int g = 8 * h + 2 * s + half;
          const int8x16_t v = as_s8(vandq_u8(q[half], two_bits));
          q[half] = vshrq_n_u8(q[half], 2);
          const int32x4_t p = Dot::dot(vdupq_n_s32(0), v, load_s8(q8 + 16 * g));
          sumi = vmlaq_n_s32(sumi, p, scales[g] & 0x0f);
        }
      }
    }
    const float yd = float_at(px + offsetof(BlockQ8_K, d));
    const float dall = yd * half_at(pw + offsetof(BlockQ2_K, d));
    const float dmin = yd * half_at(pw + offsetof(BlockQ2_K, dmin));
    sumf += dall * static_cast<float>(vaddvq_s32(sumi)) - dmin * static_cast<float>(summs);
  }
  return sumf;
}

// Q3_K: q = low 2 bits (placed as in Q2_K) + 4 * (bit 4h + s of hmask[l]) - 4,
// times the signed six-bit scale of its 16-element sub-block.
template <class Dot>
float dot_q3_k(int64_t n, const void* w, const void* x) {
  using quant::BlockQ3_K;
  using quant::BlockQ8_K;
  const uint8x16_t two_bits = vdupq_n_u8(3);
  const uint8x16_t one = vdupq_n_u8(1);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* pw = static_cast<const uint8_t*>(w) + i * sizeof(BlockQ3_K);
    const uint8_t* px = static_cast<const uint8_t*>(x) + i * sizeof(BlockQ8_K);
    const uint8_t* packed = pw + offsetof(BlockQ3_K, scales);
    const uint8_t* q8 = px + offsetof(BlockQ8_K, qs);
    int sc[16];
    for (int j = 0; j < 16; ++j) {
      const int lo = (packed[j % 8] >> (4 * (j / 8))) & 0x0f;
      const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
      sc[j] = (lo | (hi << 4)) - 32;
    }
    uint8x16_t hmask[2] = {vld1q_u8(pw + offsetof(BlockQ3_K, hmask)),
                           vld1q_u8(pw + offsetof(BlockQ3_K, hmask) + 16)};
    int32x4_t sumi = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      uint8x16_t q[2] = {vld1q_u8(pw + offsetof(BlockQ3_K, qs) + 32 * h),
                         vld1q_u8(pw + offsetof(BlockQ3_K, qs) + 32 * h + 16)};
      for (int s = 0; s < 4; ++s) {
        for (int half = 0; half < 2; ++half) {
          const int g = 8 * h + 2 * s + half;
          const uint8x16_t biased =
              vorrq_u8(vandq_u8(q[half], two_bits), vshlq_n_u8(vandq_u8(hmask[half], one), 2));
          q[half] = vshrq_n_u8(q[half], 2);
          hmask[half] = vshrq_n_u8(hmask[half], 1);
          const int8x16_t v = vsubq_s8(as_s8(biased), vdupq_n_s8(4));
          const int32x4_t p = Dot::dot(vdupq_n_s32(0), v, load_s8(q8 + 16 * g));
          sumi = vmlaq_n_s32(sumi, p, sc[g]);
        }
      }
    }
    const float d = half_at(pw + offsetof(BlockQ3_K, d)) * float_at(px + offsetof(BlockQ8_K, d));
    sumf += d * static_cast<float>(vaddvq_s32(sumi));
  }
  return sumf;
}

// Q6_K: for half h and quarter k, element l (0..31) has low bits = nibble
// k / 2 of ql[64h + 32(k % 2) + l] and high bits = bits 2k of qh[32h + l];
// q - 32 times the scale of its 16-element sub-block.
template <class Dot>
float dot_q6_k(int64_t n, const void* w, const void* x) {
  using quant::BlockQ6_K;
  using quant::BlockQ8_K;
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
  const uint8x16_t two_bits = vdupq_n_u8(3);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* pw = static_cast<const uint8_t*>(w) + i * sizeof(BlockQ6_K);
    const uint8_t* px = static_cast<const uint8_t*>(x) + i * sizeof(BlockQ8_K);
    const auto* scales = reinterpret_cast<const int8_t*>(pw + offsetof(BlockQ6_K, scales));
    const uint8_t* q8 = px + offsetof(BlockQ8_K, qs);
    int32x4_t sumi = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = pw + offsetof(BlockQ6_K, ql) + 64 * h;
      uint8x16_t qh[2] = {vld1q_u8(pw + offsetof(BlockQ6_K, qh) + 32 * h),
                          vld1q_u8(pw + offsetof(BlockQ6_K, qh) + 32 * h + 16)};
      for (int k = 0; k < 4; ++k) {
        for (int half = 0; half < 2; ++half) {
          const uint8x16_t l = vld1q_u8(ql + 32 * (k % 2) + 16 * half);
          const uint8x16_t lo = k < 2 ? vandq_u8(l, low4) : vshrq_n_u8(l, 4);
          const uint8x16_t hi = vshlq_n_u8(vandq_u8(qh[half], two_bits), 4);
          qh[half] = vshrq_n_u8(qh[half], 2);
          const int8x16_t v = vsubq_s8(as_s8(vorrq_u8(lo, hi)), vdupq_n_s8(32));
          const int g = 8 * h + 2 * k + half;
          const int32x4_t p = Dot::dot(vdupq_n_s32(0), v, load_s8(q8 + 16 * g));
          sumi = vmlaq_n_s32(sumi, p, scales[g]);
        }
      }
    }
    const float d = half_at(pw + offsetof(BlockQ6_K, d)) * float_at(px + offsetof(BlockQ8_K, d));
    sumf += d * static_cast<float>(vaddvq_s32(sumi));
  }
  return sumf;
}

}  // namespace
}  // namespace minfer::cpu::detail::neon
