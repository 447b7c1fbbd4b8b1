// The weight formats of the int8 tensor-core products (mmq.cu, their only
// includer): per type, how a warp lane loads its share of one block of two
// weight rows (rows g and g + 8 of a 16-row tile) and turns it into mma A
// fragments, and how each mma's integer sums are scaled into the f32 sums.
//
// Fragments (mma.sync m16n8k32 s8, row.col): lane (g = lane / 4, tig =
// lane % 4) holds A elements k = 4 tig .. + 3 ("lo") and 16 + 4 tig .. + 3
// ("hi") of rows g and g + 8, and B elements k = 4 tig .. + 3 and
// 16 + 4 tig .. + 3 of token column g; C element i of the lane is (row g +
// 8 (i / 2), token 2 tig + i % 2). k runs over one 32-value unit of the
// row: a weight block of Q4_0 / Q8_0, a sub-block of Q4_K / Q5_K, two
// 16-value sub-blocks of Q6_K (one m16n8k16 mma each: the lo words are the
// first sub-block, the hi words the second).
//
// Scaling, per unit u and (row, token) in f32 with every rounding explicit
// (__fmul_rn / __fadd_rn / __fsub_rn: no contraction into FMAs), so that a
// token's result depends on nothing but its own activation:
//   Q4_0 / Q8_0: acc += (d_w * d_x) * s
//   Q4_K / Q5_K: acc += d_x * ((d * sc) * s - (dmin * m) * sum_x)   (q unsigned)
//   Q6_K:        acc += d_x * (d * (sc_lo * s_lo + sc_hi * s_hi))   (q - 32 signed)
// where s is the mma's exact integer sum and sum_x the activation block's
// integer sum (launch_quantize_q8 stores it beside d_x). Each format reads
// its blocks' bytes once per warp and tile; the loads of a block are all
// issued before its products.
//
// Alignment: Q4_K and Q5_K rows start 16-byte aligned (super-blocks of 144
// and 176 bytes: every load here is aligned to its width); Q4_0, Q8_0 and
// Q6_K (210-byte super-blocks) only 2-byte aligned, read as 16-bit halves.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "quant/tensor_type.h"

namespace minfer::cuda::mmq {

using quant::TensorType;

__device__ __forceinline__ uint32_t u32_2aligned(const uint8_t* p) {
  const auto* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint32_t>(__ldg(h)) | (static_cast<uint32_t>(__ldg(h + 1)) << 16);
}

__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(p))));
}

// A hint: the 128-byte line holding p into L2 (no fault, no result).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

__device__ __forceinline__ void mma_k32(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                        uint32_t a3, uint32_t b0, uint32_t b1) {
  c[0] = c[1] = c[2] = c[3] = 0;
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_k16(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  c[0] = c[1] = c[2] = c[3] = 0;
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

// The quantized activations of a warp's 8 NJ tokens (launch_quantize_q8's
// layout per token: q [in_dim], d [units], sum [units]).
template <int NJ>
struct Tokens {
  const int8_t* xb[NJ];    // the token of B column g of n-tile j
  const float* xd[NJ][2];  // d_x of C columns 2 tig and 2 tig + 1 of n-tile j
  int n_units;             // 32-value units per row

  __device__ __forceinline__ void b(int j, int64_t u, int tig, uint32_t& b0, uint32_t& b1) const {
    const auto* xw = reinterpret_cast<const uint32_t*>(xb[j] + u * 32);
    b0 = __ldg(xw + tig);
    b1 = __ldg(xw + 4 + tig);
  }
  __device__ __forceinline__ float d(int j, int c, int64_t u) const { return __ldg(xd[j][c] + u); }
  __device__ __forceinline__ int sum(int j, int c, int64_t u) const {
    return __ldg(reinterpret_cast<const int*>(xd[j][c] + n_units) + u);
  }
};

// --- Q4_0 and Q8_0: a block is one 32-value unit -----------------------------
template <TensorType T>
struct Legacy {
  static constexpr int kUnits = 1;     // 32-value units per block
  static constexpr int kAhead = 4;     // blocks loaded before any is used
  static constexpr int kPrefetch = 0;  // L2 prefetch distance, in steps of kAhead blocks
  static constexpr int kBytes = T == TensorType::Q4_0 ? 18 : 34;
  struct Row {
    uint32_t lo, hi;
    float d;
  };
  __device__ static void load(const uint8_t* row, int64_t b, int tig, Row& r) {
    const uint8_t* blk = row + b * kBytes;
    if constexpr (T == TensorType::Q4_0) {
      const uint32_t w = u32_2aligned(blk + 2 + 4 * tig);
      r.lo = __vsub4(w & 0x0f0f0f0fu, 0x08080808u);
      r.hi = __vsub4((w >> 4) & 0x0f0f0f0fu, 0x08080808u);
    } else {
      r.lo = u32_2aligned(blk + 2 + 4 * tig);
      r.hi = u32_2aligned(blk + 18 + 4 * tig);
    }
    r.d = half_at(blk);
  }
  template <int NJ>
  __device__ static void add(const Row& r0, const Row& r1, int64_t b, const Tokens<NJ>& t, int tig,
                             float (&acc)[NJ][4]) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      uint32_t b0, b1;
      t.b(j, b, tig, b0, b1);
      int c[4];
      mma_k32(c, r0.lo, r1.lo, r0.hi, r1.hi, b0, b1);
      const float dx0 = t.d(j, 0, b), dx1 = t.d(j, 1, b);
      acc[j][0] = __fadd_rn(acc[j][0], __fmul_rn(__fmul_rn(r0.d, dx0), __int2float_rn(c[0])));
      acc[j][1] = __fadd_rn(acc[j][1], __fmul_rn(__fmul_rn(r0.d, dx1), __int2float_rn(c[1])));
      acc[j][2] = __fadd_rn(acc[j][2], __fmul_rn(__fmul_rn(r1.d, dx0), __int2float_rn(c[2])));
      acc[j][3] = __fadd_rn(acc[j][3], __fmul_rn(__fmul_rn(r1.d, dx1), __int2float_rn(c[3])));
    }
  }
};

// --- Q4_K and Q5_K: a block is a 256-value super-block, 8 units --------------
// Sub-block j: nibble j % 2 of qs[32 (j / 2) + l] (Q5_K: plus bit j of qh[l]
// as 0x10), scale and minimum 6 bits each in the 12 header bytes.
template <bool kFifth>
struct KQuant4 {
  static constexpr int kUnits = 8;
  static constexpr int kAhead = 1;
  static constexpr int kPrefetch = 2;
  static constexpr int kBytes = kFifth ? 176 : 144;
  static constexpr int kQs = kFifth ? 48 : 16;
  struct Row {
    uint4 head;        // d, dmin (f16 pair), then the 12 scale bytes
    uint32_t q[4][2];  // chunk c (sub-blocks 2c, 2c + 1): lo and hi words
    uint32_t qh[2];    // Q5_K's fifth bits, bytes 4 tig .. and 16 + 4 tig ..
  };
  __device__ static void load(const uint8_t* row, int64_t b, int tig, Row& r) {
    const uint8_t* blk = row + b * kBytes;
    r.head = __ldg(reinterpret_cast<const uint4*>(blk));
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const auto* w = reinterpret_cast<const uint32_t*>(blk + kQs + 32 * c);
      r.q[c][0] = __ldg(w + tig);
      r.q[c][1] = __ldg(w + 4 + tig);
    }
    if constexpr (kFifth) {
      const auto* w = reinterpret_cast<const uint32_t*>(blk + 16);
      r.qh[0] = __ldg(w + tig);
      r.qh[1] = __ldg(w + 4 + tig);
    } else {
      r.qh[0] = r.qh[1] = 0u;
    }
  }
  // Sub-block j's 6-bit scale and minimum (the 12 bytes: y = 0-3, z = 4-7, w = 8-11).
  __device__ static void scale_min(const uint4& h, int j, int& sc, int& m) {
    if (j < 4) {
      sc = static_cast<int>((h.y >> (8 * j)) & 63u);
      m = static_cast<int>((h.z >> (8 * j)) & 63u);
    } else {
      const int s = 8 * (j - 4);
      sc = static_cast<int>(((h.w >> s) & 0x0fu) | (((h.y >> (s + 6)) & 3u) << 4));
      m = static_cast<int>(((h.w >> (s + 4)) & 0x0fu) | (((h.z >> (s + 6)) & 3u) << 4));
    }
  }
  __device__ static uint32_t unit_word(const Row& r, int j, int half) {
    uint32_t v = (r.q[j / 2][half] >> (4 * (j % 2))) & 0x0f0f0f0fu;
    if constexpr (kFifth) v |= ((r.qh[half] >> j) & 0x01010101u) << 4;
    return v;
  }
  template <int NJ>
  __device__ static void add(const Row& r0, const Row& r1, int64_t b, const Tokens<NJ>& t, int tig,
                             float (&acc)[NJ][4]) {
    const __half2 dm0 = *reinterpret_cast<const __half2*>(&r0.head.x);
    const __half2 dm1 = *reinterpret_cast<const __half2*>(&r1.head.x);
    const float d[2] = {__low2float(dm0), __low2float(dm1)};
    const float dmin[2] = {__high2float(dm0), __high2float(dm1)};
#pragma unroll
    for (int j = 0; j < kUnits; ++j) {
      int sc[2], m[2];
      scale_min(r0.head, j, sc[0], m[0]);
      scale_min(r1.head, j, sc[1], m[1]);
      // The rows' unit scale d * sc and minimum dmin * m, shared by every token.
      const float dsc[2] = {__fmul_rn(d[0], __int2float_rn(sc[0])),
                            __fmul_rn(d[1], __int2float_rn(sc[1]))};
      const float dm[2] = {__fmul_rn(dmin[0], __int2float_rn(m[0])),
                           __fmul_rn(dmin[1], __int2float_rn(m[1]))};
      const uint32_t a0 = unit_word(r0, j, 0), a1 = unit_word(r1, j, 0);
      const uint32_t a2 = unit_word(r0, j, 1), a3 = unit_word(r1, j, 1);
      const int64_t u = b * kUnits + j;
#pragma unroll
      for (int n = 0; n < NJ; ++n) {
        uint32_t b0, b1;
        t.b(n, u, tig, b0, b1);
        int c[4];
        mma_k32(c, a0, a1, a2, a3, b0, b1);
        const float dx[2] = {t.d(n, 0, u), t.d(n, 1, u)};
        const float sx[2] = {__int2float_rn(t.sum(n, 0, u)), __int2float_rn(t.sum(n, 1, u))};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = i >> 1, col = i & 1;
          const float v =
              __fsub_rn(__fmul_rn(dsc[r], __int2float_rn(c[i])), __fmul_rn(dm[r], sx[col]));
          acc[n][i] = __fadd_rn(acc[n][i], __fmul_rn(dx[col], v));
        }
      }
    }
  }
};

// --- Q6_K: a block is half a super-block (128 values, 4 units) ---------------
// Half h of super-block s, unit t (values 128 h + 32 t + l): low nibble
// t / 2 of ql[64 h + 32 (t % 2) + l], high bits 2 t of qh[32 h + l]; the
// unit's two sub-blocks (l < 16, l >= 16) have scales[8 h + 2 t] and
// scales[8 h + 2 t + 1]; d is the super-block's.
struct Q6K {
  static constexpr int kUnits = 4;
  static constexpr int kAhead = 1;
  static constexpr int kPrefetch = 2;
  static constexpr int kBytes = 105;  // a half's share of the row (prefetch distance only)
  struct Row {
    uint32_t ql[2][2];  // region t % 2: lo and hi words
    uint32_t qh[2];
    uint32_t sc[2];  // the half's 8 scale bytes
    float d;
  };
  __device__ static void load(const uint8_t* row, int64_t b, int tig, Row& r) {
    const uint8_t* sb = row + (b >> 1) * 210;
    const int h = static_cast<int>(b & 1);
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      r.ql[p][0] = u32_2aligned(sb + 64 * h + 32 * p + 4 * tig);
      r.ql[p][1] = u32_2aligned(sb + 64 * h + 32 * p + 16 + 4 * tig);
    }
    r.qh[0] = u32_2aligned(sb + 128 + 32 * h + 4 * tig);
    r.qh[1] = u32_2aligned(sb + 128 + 32 * h + 16 + 4 * tig);
    r.sc[0] = u32_2aligned(sb + 192 + 8 * h);
    r.sc[1] = u32_2aligned(sb + 196 + 8 * h);
    r.d = half_at(sb + 208);
  }
  __device__ static uint32_t unit_word(const Row& r, int t, int half) {
    const uint32_t v = ((r.ql[t % 2][half] >> (4 * (t / 2))) & 0x0f0f0f0fu) |
                       (((r.qh[half] >> (2 * t)) & 0x03030303u) << 4);
    return __vsub4(v, 0x20202020u);
  }
  __device__ static int scale(const Row& r, int idx) {  // signed scale byte idx (0..7)
    return static_cast<int>(static_cast<int8_t>((r.sc[idx / 4] >> (8 * (idx % 4))) & 0xffu));
  }
  template <int NJ>
  __device__ static void add(const Row& r0, const Row& r1, int64_t b, const Tokens<NJ>& t, int tig,
                             float (&acc)[NJ][4]) {
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
      const int sc_lo[2] = {scale(r0, 2 * k), scale(r1, 2 * k)};
      const int sc_hi[2] = {scale(r0, 2 * k + 1), scale(r1, 2 * k + 1)};
      const float d[2] = {r0.d, r1.d};
      const uint32_t a_lo0 = unit_word(r0, k, 0), a_lo1 = unit_word(r1, k, 0);
      const uint32_t a_hi0 = unit_word(r0, k, 1), a_hi1 = unit_word(r1, k, 1);
      const int64_t u = b * kUnits + k;
#pragma unroll
      for (int n = 0; n < NJ; ++n) {
        uint32_t b0, b1;
        t.b(n, u, tig, b0, b1);
        int lo[4], hi[4];
        mma_k16(lo, a_lo0, a_lo1, b0);
        mma_k16(hi, a_hi0, a_hi1, b1);
        const float dx[2] = {t.d(n, 0, u), t.d(n, 1, u)};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = i >> 1;
          const int s = sc_lo[r] * lo[i] + sc_hi[r] * hi[i];
          acc[n][i] =
              __fadd_rn(acc[n][i], __fmul_rn(dx[i & 1], __fmul_rn(d[r], __int2float_rn(s))));
        }
      }
    }
  }
};

// The format of each type the kernels take.
template <TensorType T>
struct FormatOf;
template <>
struct FormatOf<TensorType::Q4_0> {
  using F = Legacy<TensorType::Q4_0>;
};
template <>
struct FormatOf<TensorType::Q8_0> {
  using F = Legacy<TensorType::Q8_0>;
};
template <>
struct FormatOf<TensorType::Q4_K> {
  using F = KQuant4<false>;
};
template <>
struct FormatOf<TensorType::Q5_K> {
  using F = KQuant4<true>;
};
template <>
struct FormatOf<TensorType::Q6_K> {
  using F = Q6K;
};

}  // namespace minfer::cuda::mmq
