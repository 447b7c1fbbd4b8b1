// The weight formats of the int8 tensor-core products (mmq.cu, their only
// includer): per type, how a warp lane loads its share of one block of two
// weight rows (rows g and g + 8 of a 16-row tile) and turns it into mma A
// fragments, and how each mma's integer sums are scaled into the f32 sums.
//
// Fragments (mma.sync m16n8k32 s8, row.col): lane (g = lane / 4, tig =
// lane % 4) holds A elements k = 4 tig .. + 3 ("lo") and 16 + 4 tig .. + 3
// ("hi") of rows g and g + 8, and B elements at the same k of token column
// g; C element i of the lane is (row g + 8 (i / 2), token 2 tig + i % 2).
// An integer dot does not depend on which k holds which value, so k is laid
// over the 32 values l of a unit as lo = l 8 tig .. + 3, hi = 8 tig + 4 ..
// + 7: a lane's B words are 8 contiguous bytes of its token (one load, one
// 32-byte sector a token), and its A words 8 contiguous weight bytes or
// nibbles. A unit is a weight block of Q4_0 / Q8_0, a sub-block of Q4_K /
// Q5_K, two 16-value sub-blocks of Q6_K (lanes tig 0, 1 hold the first,
// 2, 3 the second: one mma each, the other lanes' A words zero).
//
// The activations' scale d_x of each (token, unit) is loaded by the lanes
// of the token's row g (Q4_0 / Q8_0: four units at a time, lane (g, tig)
// taking unit u0 + tig, StepScales; the K-quants: the block's one d_x,
// Tokens::dx) and passed to the lanes whose C columns need it with warp
// shuffles.
//
// Scaling, in f32 with every rounding explicit (__fmul_rn / __fmaf_rn / ...:
// nothing left for the compiler to contract differently in one
// instantiation than in another), so that a token's result depends on
// nothing but its own activation:
//   Q4_0 / Q8_0, per unit:  acc = fma(d_w * d_x, s, acc)
// where s is the mma's exact integer sum. The K-quants take activations
// whose eight units of a super-block share one d_x (Q8Input::scale_per_256),
// so the sub-block scales are applied to the integer sums and the f32 step
// is paid once per block (a super-block; Q6_K: half of one), not per unit:
//   Q4_K / Q5_K: S = sum_j sc_j s_j, M = sum_j m_j sum_x,j   (q unsigned)
//                acc = fma(d_x, fma(d, S, -(dmin * M)), acc)
//   Q6_K:        S = sum_j sc_j s_j over the half's 16-value sub-blocks   (q - 32 signed)
//                acc = fma(d_x, d * S, acc)
// where sum_x,j is the integer sum of the token's unit j, which a second
// mma takes (A = m_j in every byte of the row), accumulating M exactly.
// Integers become floats by exact bit arithmetic (exact_float, small_float)
// or by one rounding of an exact fma (big_float), never by the conversion
// instruction: it issues at 16 lanes a clock per SM on the H200, an eighth
// of an FMA's rate. Each format reads its blocks' bytes once per warp and
// tile; the loads of a block are all issued before its products.
//
// Alignment: Q4_K and Q5_K rows start 16-byte aligned (super-blocks of 144
// and 176 bytes: every load here is aligned to its width); Q4_0, Q8_0 and
// Q6_K (210-byte super-blocks) only 2-byte aligned, read as 16-bit halves.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "quant/tensor_type.h"

namespace minfer::cuda::mmq {

using quant::TensorType;

__device__ __forceinline__ uint32_t u32_2aligned(const uint8_t* p) {
  const auto* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint32_t>(__ldg(h)) | (static_cast<uint32_t>(__ldg(h + 1)) << 16);
}

// v as a float, exactly, for |v| < 2^22 (every mma sum and activation sum
// here: at most 32 * 127 * 127): v added to the bits of 1.5 * 2^23, whose
// float spacing is 1, then 1.5 * 2^23 taken off.
__device__ __forceinline__ float exact_float(int v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23 = 0x4B400000
  return __fsub_rn(__int_as_float(0x4B400000 + v), kMagic);
}

// v as a float, rounded once (to nearest even, as __int2float_rn) for any
// int: its high half's exact float times 2^16 plus its low half's, one fma.
__device__ __forceinline__ float big_float(int v) {
  return __fmaf_rn(exact_float(v >> 16), 65536.0f, exact_float(v & 0xffff));
}

// Byte i (0..3) of w, an unsigned value below 2^8, as a float: the byte
// placed under the exponent of 2^23, then 2^23 taken off.
__device__ __forceinline__ float small_float(uint32_t w, int i) {
  return __fsub_rn(__uint_as_float(__byte_perm(w, 0x4B000000u, 0x7650u + i)), 8388608.0f);
}

// x - 8 in each byte for bytes 0..15 (Q4_0), x - 32 for bytes 0..63 (Q6_K):
// the bias added without carries, then the top bit flipped (two's complement).
__device__ __forceinline__ uint32_t minus8(uint32_t x) {
  return (x + 0x78787878u) ^ 0x80808080u;
}
__device__ __forceinline__ uint32_t minus32(uint32_t x) {
  return (x + 0x60606060u) ^ 0x80808080u;
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

// c += A B (the same fragments as mma_k32, c kept).
__device__ __forceinline__ void mma_k32_acc(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                            uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The quantized activations of a warp's 8 NJ tokens (launch_quantize_q8's
// layout per token: q [in_dim], d [units], sum [units]): the lane's token g
// of each n-tile.
template <int NJ>
struct Tokens {
  const int8_t* x[NJ];
  const float* d[NJ];
  int last_unit;  // units per row - 1

  // The B words of unit u, n-tile j.
  __device__ __forceinline__ void b(int j, int64_t u, int tig, uint32_t& b0, uint32_t& b1) const {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(x[j] + u * 32 + 8 * tig));
    b0 = v.x;
    b1 = v.y;
  }
  // d_x of unit u for this lane's C columns 2 tig + c of n-tile j (each
  // lane loads its own token's, the columns' owners hand them over).
  __device__ __forceinline__ void dx(int j, int64_t u, int tig, float (&out)[2]) const {
    const float mine = __ldg(d[j] + u);
    out[0] = __shfl_sync(0xffffffffu, mine, (2 * tig) * 4);
    out[1] = __shfl_sync(0xffffffffu, mine, (2 * tig + 1) * 4);
  }
};

// Byte i (0..3) of w as an unsigned / a signed int.
__device__ __forceinline__ int byte_u(uint32_t w, int i) {
  return static_cast<int>((w >> (8 * i)) & 0xffu);
}
__device__ __forceinline__ int byte_s(uint32_t w, int i) {
  return static_cast<int>(static_cast<int8_t>(w >> (8 * i)));
}

// d_x of a step's kQuads * 4 units from u0 (clamped to the row's last
// unit), as the lanes loaded them; dx hands column c of unit u0 + k (k < 4
// kQuads) to this lane.
template <int NJ, int kQuads>
struct StepScales {
  float d[NJ][kQuads];

  __device__ __forceinline__ void load(const Tokens<NJ>& t, int64_t u0, int tig) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
#pragma unroll
      for (int q = 0; q < kQuads; ++q) {
        const int64_t u = u0 + 4 * q + tig < t.last_unit ? u0 + 4 * q + tig : t.last_unit;
        d[j][q] = __ldg(t.d[j] + u);
      }
    }
  }
  __device__ __forceinline__ float dx(int j, int k, int tig, int c) const {
    return __shfl_sync(0xffffffffu, d[j][k >> 2], (2 * tig + c) * 4 + (k & 3));
  }
};

// What the formats that read their d_x once per block take instead (Tokens::dx).
template <int NJ>
struct NoStepScales {
  __device__ __forceinline__ void load(const Tokens<NJ>&, int64_t, int) {}
};

// --- Q4_0 and Q8_0: a block is one 32-value unit -----------------------------
// Q4_0: value l is nibble l / 16 of qs[l % 16], minus 8; Q8_0: qs[l].
template <TensorType T>
struct Legacy {
  static constexpr int kUnits = 1;           // 32-value units per block
  static constexpr int kAhead = 4;           // blocks a step (loaded before any is used)
  static constexpr int kPrefetch = 0;        // L2 prefetch distance, in steps
  static constexpr bool kUnitScales = true;  // d_x per unit (StepScales)
  static constexpr int kBytes = T == TensorType::Q4_0 ? 18 : 34;
  struct Row {
    uint32_t lo, hi;
    float d;
  };
  __device__ static void load(const uint8_t* row, int64_t b, int tig, Row& r) {
    const uint8_t* blk = row + b * kBytes;
    if constexpr (T == TensorType::Q4_0) {
      const uint8_t* q = blk + 2 + 8 * (tig & 1);
      const int sh = 4 * (tig >> 1);
      r.lo = minus8((u32_2aligned(q) >> sh) & 0x0f0f0f0fu);
      r.hi = minus8((u32_2aligned(q + 4) >> sh) & 0x0f0f0f0fu);
    } else {
      r.lo = u32_2aligned(blk + 2 + 8 * tig);
      r.hi = u32_2aligned(blk + 6 + 8 * tig);
    }
    r.d = half_at(blk);
  }
  // Block b, unit k of the step's scales.
  template <int NJ, class Sc>
  __device__ static void add(const Row& r0, const Row& r1, int64_t b, int k, const Tokens<NJ>& t,
                             const Sc& sc, int tig, float (&acc)[NJ][4]) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      uint32_t b0, b1;
      t.b(j, b, tig, b0, b1);
      int c[4];
      mma_k32(c, r0.lo, r1.lo, r0.hi, r1.hi, b0, b1);
      const float dx0 = sc.dx(j, k, tig, 0), dx1 = sc.dx(j, k, tig, 1);
      acc[j][0] = __fmaf_rn(__fmul_rn(r0.d, dx0), exact_float(c[0]), acc[j][0]);
      acc[j][1] = __fmaf_rn(__fmul_rn(r0.d, dx1), exact_float(c[1]), acc[j][1]);
      acc[j][2] = __fmaf_rn(__fmul_rn(r1.d, dx0), exact_float(c[2]), acc[j][2]);
      acc[j][3] = __fmaf_rn(__fmul_rn(r1.d, dx1), exact_float(c[3]), acc[j][3]);
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
  static constexpr bool kUnitScales = false;  // one d_x a super-block
  static constexpr int kBytes = kFifth ? 176 : 144;
  static constexpr int kQs = kFifth ? 48 : 16;
  struct Row {
    uint4 head;        // d, dmin (f16 pair), then the 12 scale bytes
    uint32_t q[4][2];  // chunk c (sub-blocks 2c, 2c + 1): bytes 8 tig .. + 3, + 4 .. + 7
    uint32_t qh[2];    // Q5_K's fifth bits, bytes 8 tig .. + 7
  };
  __device__ static void load(const uint8_t* row, int64_t b, int tig, Row& r) {
    const uint8_t* blk = row + b * kBytes;
    r.head = __ldg(reinterpret_cast<const uint4*>(blk));
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(blk + kQs + 32 * c + 8 * tig));
      r.q[c][0] = v.x;
      r.q[c][1] = v.y;
    }
    if constexpr (kFifth) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(blk + 16 + 8 * tig));
      r.qh[0] = v.x;
      r.qh[1] = v.y;
    } else {
      r.qh[0] = r.qh[1] = 0u;
    }
  }
  // The 6-bit scales and minima of the sub-blocks, byte j % 4 of word j / 4
  // (the 12 header bytes: y = 0-3, z = 4-7, w = 8-11).
  struct Scales {
    uint32_t sc[2], m[2];
    __device__ explicit Scales(const uint4& h) {
      sc[0] = h.y & 0x3f3f3f3fu;
      m[0] = h.z & 0x3f3f3f3fu;
      sc[1] = (h.w & 0x0f0f0f0fu) | ((h.y >> 2) & 0x30303030u);
      m[1] = ((h.w >> 4) & 0x0f0f0f0fu) | ((h.z >> 2) & 0x30303030u);
    }
  };
  __device__ static uint32_t unit_word(const Row& r, int j, int half) {
    uint32_t v = (r.q[j / 2][half] >> (4 * (j % 2))) & 0x0f0f0f0fu;
    if constexpr (kFifth) v |= ((r.qh[half] >> j) & 0x01010101u) << 4;
    return v;
  }
  template <int NJ, class Sc>
  __device__ static void add(const Row& r0, const Row& r1, int64_t b, int /*k0*/,
                             const Tokens<NJ>& t, const Sc& /*sc*/, int tig, float (&acc)[NJ][4]) {
    const Scales s0(r0.head), s1(r1.head);
    int sum[NJ][4], mins[NJ][4];  // S and M of the header comment, exact
#pragma unroll
    for (int n = 0; n < NJ; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) sum[n][i] = mins[n][i] = 0;
    }
#pragma unroll
    for (int j = 0; j < kUnits; ++j) {
      const int sc0 = byte_u(s0.sc[j / 4], j % 4), sc1 = byte_u(s1.sc[j / 4], j % 4);
      // m_j of each row in all four bytes: the mma then gives m_j sum_x,j.
      const uint32_t m0 = static_cast<uint32_t>(byte_u(s0.m[j / 4], j % 4)) * 0x01010101u;
      const uint32_t m1 = static_cast<uint32_t>(byte_u(s1.m[j / 4], j % 4)) * 0x01010101u;
      const uint32_t a0 = unit_word(r0, j, 0), a1 = unit_word(r1, j, 0);
      const uint32_t a2 = unit_word(r0, j, 1), a3 = unit_word(r1, j, 1);
      const int64_t u = b * kUnits + j;
#pragma unroll
      for (int n = 0; n < NJ; ++n) {
        uint32_t b0, b1;
        t.b(n, u, tig, b0, b1);
        int c[4];
        mma_k32(c, a0, a1, a2, a3, b0, b1);
        mma_k32_acc(mins[n], m0, m1, m0, m1, b0, b1);
        sum[n][0] += sc0 * c[0];
        sum[n][1] += sc0 * c[1];
        sum[n][2] += sc1 * c[2];
        sum[n][3] += sc1 * c[3];
      }
    }
    const __half2 dm0 = *reinterpret_cast<const __half2*>(&r0.head.x);
    const __half2 dm1 = *reinterpret_cast<const __half2*>(&r1.head.x);
    const float d[2] = {__low2float(dm0), __low2float(dm1)};
    const float dmin[2] = {__high2float(dm0), __high2float(dm1)};
#pragma unroll
    for (int n = 0; n < NJ; ++n) {
      float dx[2];
      t.dx(n, b * kUnits, tig, dx);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i >> 1;
        const float v =
            __fmaf_rn(d[r], big_float(sum[n][i]), -__fmul_rn(dmin[r], exact_float(mins[n][i])));
        acc[n][i] = __fmaf_rn(dx[i & 1], v, acc[n][i]);
      }
    }
  }
};

// --- Q6_K: a block is half a super-block (128 values, 4 units) ---------------
// Half h of super-block s, unit t (values 128 h + 32 t + l): low nibble
// t / 2 of ql[64 h + 32 (t % 2) + l], high bits 2 t of qh[32 h + l]; the
// unit's two sub-blocks (l < 16: lanes tig 0, 1; l >= 16: lanes 2, 3) have
// scales[8 h + 2 t] and scales[8 h + 2 t + 1]; d is the super-block's.
struct Q6K {
  static constexpr int kUnits = 4;
  static constexpr int kAhead = 1;
  static constexpr int kPrefetch = 2;
  static constexpr bool kUnitScales = false;  // one d_x a super-block
  static constexpr int kBytes = 105;          // a half's share of the row (prefetch distance only)
  struct Row {
    uint32_t ql[2][2];  // region t % 2: bytes 8 tig .. + 3, + 4 .. + 7
    uint32_t qh[2];
    uint32_t sc[2];  // the half's 8 scale bytes (signed)
    float d;
  };
  __device__ static void load(const uint8_t* row, int64_t b, int tig, Row& r) {
    const uint8_t* sb = row + (b >> 1) * 210;
    const int h = static_cast<int>(b & 1);
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      r.ql[p][0] = u32_2aligned(sb + 64 * h + 32 * p + 8 * tig);
      r.ql[p][1] = u32_2aligned(sb + 64 * h + 32 * p + 8 * tig + 4);
    }
    r.qh[0] = u32_2aligned(sb + 128 + 32 * h + 8 * tig);
    r.qh[1] = u32_2aligned(sb + 128 + 32 * h + 8 * tig + 4);
    r.sc[0] = u32_2aligned(sb + 192 + 8 * h);
    r.sc[1] = u32_2aligned(sb + 196 + 8 * h);
    r.d = half_at(sb + 208);
  }
  __device__ static uint32_t unit_word(const Row& r, int t, int half) {
    const uint32_t v = ((r.ql[t % 2][half] >> (4 * (t / 2))) & 0x0f0f0f0fu) |
                       (((r.qh[half] >> (2 * t)) & 0x03030303u) << 4);
    return minus32(v);
  }
  template <int NJ, class Sc>
  __device__ static void add(const Row& r0, const Row& r1, int64_t b, int /*k0*/,
                             const Tokens<NJ>& t, const Sc& /*sc*/, int tig, float (&acc)[NJ][4]) {
    const bool first = tig < 2;  // this lane's values are in the unit's first sub-block
    int sum[NJ][4];              // S of the header comment, exact
#pragma unroll
    for (int n = 0; n < NJ; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) sum[n][i] = 0;
    }
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
      const int sa[2] = {byte_s(r0.sc[k / 2], 2 * (k % 2)), byte_s(r1.sc[k / 2], 2 * (k % 2))};
      const int sb[2] = {byte_s(r0.sc[k / 2], 2 * (k % 2) + 1),
                         byte_s(r1.sc[k / 2], 2 * (k % 2) + 1)};
      const uint32_t w[4] = {unit_word(r0, k, 0), unit_word(r1, k, 0), unit_word(r0, k, 1),
                             unit_word(r1, k, 1)};
      uint32_t wa[4], wb[4];  // the A words of the first and the second sub-block's mma
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        wa[i] = first ? w[i] : 0u;
        wb[i] = first ? 0u : w[i];
      }
      const int64_t u = b * kUnits + k;
#pragma unroll
      for (int n = 0; n < NJ; ++n) {
        uint32_t b0, b1;
        t.b(n, u, tig, b0, b1);
        int ca[4], cb[4];
        mma_k32(ca, wa[0], wa[1], wa[2], wa[3], b0, b1);
        mma_k32(cb, wb[0], wb[1], wb[2], wb[3], b0, b1);
#pragma unroll
        for (int i = 0; i < 4; ++i) sum[n][i] += sa[i >> 1] * ca[i] + sb[i >> 1] * cb[i];
      }
    }
#pragma unroll
    for (int n = 0; n < NJ; ++n) {
      float dx[2];
      t.dx(n, b * kUnits, tig, dx);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float v = __fmul_rn(i < 2 ? r0.d : r1.d, big_float(sum[n][i]));
        acc[n][i] = __fmaf_rn(dx[i & 1], v, acc[n][i]);
      }
    }
  }
};

// --- MXFP4: a block is one 32-value unit, an E8M0 scale byte first ----------
// Value l is nibble l / 16 of qs[l % 16], an E2M1 code; the kernel multiplies
// twice its value (an integer, -12..12: e2m1_x2) and scales by half the block's
// power of two (dequant.cuh's e8m0_half), exactly the dequantized value. Blocks
// are 17 bytes: a lane's bytes are read as aligned words and shifted into place.
// Row and add are Q8_0's: a unit's integer sum times d_w d_x.
struct Mxfp4 : Legacy<TensorType::Q8_0> {
  static constexpr int kBytes = 17;
  // Bytes p .. p + 7 as two words, p of any alignment; the word after the
  // last one holding p + 7 is never read.
  __device__ static void load8(const uint8_t* p, uint32_t& lo, uint32_t& hi) {
    const auto at = reinterpret_cast<uintptr_t>(p);
    const auto* w = reinterpret_cast<const uint32_t*>(at & ~uintptr_t{3});
    const unsigned sh = 8u * static_cast<unsigned>(at & 3u);
    const uint32_t w0 = __ldg(w), w1 = __ldg(w + 1), w2 = sh != 0 ? __ldg(w + 2) : 0u;
    lo = __funnelshift_r(w0, w1, sh);
    hi = __funnelshift_r(w1, w2, sh);
  }
  // Four codes (the low nibble of each byte) as twice their values, one
  // signed byte each: the magnitude from a byte table, then the sign.
  __device__ static uint32_t e2m1_x2(uint32_t q) {
    const uint32_t idx = q & 0x07070707u;
    const uint32_t t = idx | (idx >> 4);
    const uint32_t sel = (t & 0xffu) | ((t >> 8) & 0xff00u);
    const uint32_t mag = __byte_perm(0x03020100u, 0x0C080604u, sel);  // 0 1 2 3 | 4 6 8 12
    const uint32_t neg = ((q >> 3) & 0x01010101u) * 0xffu;
    return __vsub4(mag ^ neg, neg);
  }
  __device__ static void load(const uint8_t* row, int64_t b, int tig, Row& r) {
    const uint8_t* blk = row + b * kBytes;
    uint32_t lo, hi;
    load8(blk + 1 + 8 * (tig & 1), lo, hi);
    const int sh = 4 * (tig >> 1);
    r.lo = e2m1_x2(lo >> sh);
    r.hi = e2m1_x2(hi >> sh);
    r.d = e8m0_half(__ldg(blk));
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
template <>
struct FormatOf<TensorType::MXFP4> {
  using F = Mxfp4;
};

}  // namespace minfer::cuda::mmq
