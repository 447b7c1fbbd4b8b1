// Device helpers of the int8 GEMVs (gemv_q8.cu, its only includer): the
// quantized activation's layout in shared memory (Q8Smem), the per-type dot
// of one 32-weight unit with it (unit_dot), and the Q6_K path that stages
// each warp's weights through shared memory (rows_dot_q6k_staged).
//
// Units: lane l of a warp takes units l, l + 32, ... of a row (gemv_q8.cu's
// rows_dot_q8); unit_dot reads its weights straight from global memory.
// Integer dot products per sub-block are scaled in f32; the weights' offsets
// are applied through the activation's integer sums.
//
// Staged Q6_K (one token, the kernels that need not be batch-invariant):
// a Q6_K super-block is 210 bytes, so super-blocks sit at every 2-byte
// alignment and unit_dot reads 4-byte words, ten to thirteen per 32 weights,
// each warp-wide load touching several 128-byte lines. rows_dot_q6k_staged
// instead has the warp copy kSb consecutive super-blocks of each of its R
// rows with 16-byte loads of the aligned words that cover them (each load
// instruction 512 contiguous bytes), into the warp's own stage in shared
// memory; the lanes then dot their units from the stage (q6k_unit<true>, the
// same arithmetic as unit_dot's). The next step's loads are issued before
// this step's products, so they are in flight while the lanes compute.
// Contract: the weight tensor starts 16-byte aligned and its allocation
// extends to its end rounded up to 16 bytes (the weight arena places every
// tensor at a 256-byte offset and pads it to 256: weights.cu), since the
// aligned words may start before a row and end after it (never outside the
// tensor's padded range).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/device_math.cuh"
#include "quant/tensor_type.h"

namespace minfer::cuda {

using quant::TensorType;

// Quantized activation of one token in shared memory, with the integer sums
// of its values that turn the weights' offsets (Q4_0's -8, Q6_K's -32, the
// minimums of Q4_K and Q5_K) into one multiply per group instead of a
// subtraction per weight.
struct Q8Smem {
  int8_t* q;      // [in_dim], 16-byte aligned
  float* d;       // [in_dim / 32] scales
  int* sum32;     // [in_dim / 32] sum of each 32-value block's q
  int16_t* sum8;  // [in_dim / 8] sum of each 8 values' q
};

// N 32-bit words from the 2-byte aligned address p (aligned loads realigned
// with funnel shifts; no byte past p + 4N is read).
template <int N>
__device__ __forceinline__ void load_words2(const uint8_t* p, uint32_t (&out)[N]) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto* base = reinterpret_cast<const uint32_t*>(a & ~static_cast<uintptr_t>(3));
  const bool odd = (a & 2) != 0;
  uint32_t w[N + 1];
#pragma unroll
  for (int i = 0; i < N; ++i) w[i] = __ldg(base + i);
  w[N] = odd ? __ldg(base + N) : 0u;
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = __funnelshift_r(w[i], w[i + 1], odd ? 16 : 0);
}

// The same words from a 2-byte aligned address in shared memory (a warp's
// weight stage): aligned 32-bit reads, realigned alike.
__device__ __forceinline__ void smem_words2(const uint8_t* p, uint32_t (&out)[2]) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto* base = reinterpret_cast<const uint32_t*>(a & ~static_cast<uintptr_t>(3));
  const bool odd = (a & 2) != 0;
  const uint32_t w0 = base[0], w1 = base[1], w2 = odd ? base[2] : 0u;
  out[0] = __funnelshift_r(w0, w1, odd ? 16 : 0);
  out[1] = __funnelshift_r(w1, w2, odd ? 16 : 0);
}

template <bool kShared>
__device__ __forceinline__ void words2(const uint8_t* p, uint32_t (&out)[2]) {
  if constexpr (kShared) {
    smem_words2(p, out);
  } else {
    load_words2(p, out);
  }
}

__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(*reinterpret_cast<const __half*>(p));
}

__device__ __forceinline__ int dot8(const uint32_t (&a)[4], const int4 lo, const int4 hi,
                                    const uint32_t (&b)[4]) {
  int s = 0;
  s = __dp4a(static_cast<int>(a[0]), lo.x, s);
  s = __dp4a(static_cast<int>(a[1]), lo.y, s);
  s = __dp4a(static_cast<int>(a[2]), lo.z, s);
  s = __dp4a(static_cast<int>(a[3]), lo.w, s);
  s = __dp4a(static_cast<int>(b[0]), hi.x, s);
  s = __dp4a(static_cast<int>(b[1]), hi.y, s);
  s = __dp4a(static_cast<int>(b[2]), hi.z, s);
  s = __dp4a(static_cast<int>(b[3]), hi.w, s);
  return s;
}

__device__ __forceinline__ int dot4(const uint32_t (&a)[4], const int4 x) {
  int s = __dp4a(static_cast<int>(a[0]), x.x, 0);
  s = __dp4a(static_cast<int>(a[1]), x.y, s);
  s = __dp4a(static_cast<int>(a[2]), x.z, s);
  return __dp4a(static_cast<int>(a[3]), x.w, s);
}

__device__ __forceinline__ int4 xq16(const Q8Smem& xs, int e) {  // 16 values from element e
  return *reinterpret_cast<const int4*>(xs.q + e);
}

// Sum of the 16 quantized values from element e (a multiple of 16).
__device__ __forceinline__ int xsum16(const Q8Smem& xs, int e) {
  const int pair = *reinterpret_cast<const int*>(xs.sum8 + e / 8);
  return static_cast<int16_t>(pair & 0xffff) + (pair >> 16);
}

// The 32-weight unit u of a row dotted with the activation: one per type.
// Weights are read as unsigned fields; their offsets are applied through the
// activation sums (dot(q - o, x) = dot(q, x) - o * sum(x), exact in integers).
template <TensorType T>
__device__ __forceinline__ float unit_dot(const uint8_t* __restrict__ row, int u, const Q8Smem& xs);

template <>
__device__ __forceinline__ float unit_dot<TensorType::Q4_0>(const uint8_t* __restrict__ row, int u,
                                                            const Q8Smem& xs) {
  const uint8_t* b = row + u * 18;
  uint32_t q[4];
  load_words2(b + 2, q);
  uint32_t lo[4], hi[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    lo[j] = q[j] & 0x0f0f0f0fu;         // elements 4j..4j+3
    hi[j] = (q[j] >> 4) & 0x0f0f0f0fu;  // 16 + 4j..
  }
  const int s = dot8(lo, xq16(xs, 32 * u), xq16(xs, 32 * u + 16), hi) - 8 * xs.sum32[u];
  return half_at(b) * xs.d[u] * static_cast<float>(s);
}

template <>
__device__ __forceinline__ float unit_dot<TensorType::Q8_0>(const uint8_t* __restrict__ row, int u,
                                                            const Q8Smem& xs) {
  const uint8_t* b = row + u * 34;
  uint32_t q[8];
  load_words2(b + 2, q);
  const uint32_t a[4] = {q[0], q[1], q[2], q[3]};
  const uint32_t c[4] = {q[4], q[5], q[6], q[7]};
  const int s = dot8(a, xq16(xs, 32 * u), xq16(xs, 32 * u + 16), c);
  return half_at(b) * xs.d[u] * static_cast<float>(s);
}

// Q4_K's and Q5_K's unit k (0..7) of super-block sb: 16 bytes of quants at
// b + kQs + 16k (the low nibbles of elements 64g + 16h .. +15 of sub-block
// 2g, the high ones of the same 16 of sub-block 2g + 1; g = k / 2, h = k % 2)
// and the 16-byte header (d, dmin, 12 bytes of scales). Q5_K (kFifth) adds
// the fifth bits: bit e / 32 of qh[e % 32], so the unit's 32 elements take
// qh[16h .. 16h + 15] (one more 16-byte load at b + 16 + 16h), bit 2g for the
// low nibbles and 2g + 1 for the high ones, ORed in as 0x10 (values 0..31).
// Super-blocks of 144 and 176 bytes: every load stays 16-byte aligned.
template <bool kFifth>
__device__ __forceinline__ float k4_unit(const uint8_t* __restrict__ b, int sb, int k,
                                         const Q8Smem& xs) {
  constexpr int kQs = kFifth ? 48 : 16;
  const int g = k >> 1, h = k & 1;
  const uint4 head = __ldg(reinterpret_cast<const uint4*>(b));
  const uint4 qv = __ldg(reinterpret_cast<const uint4*>(b + kQs + 16 * k));
  const uint32_t q[4] = {qv.x, qv.y, qv.z, qv.w};
  uint32_t lo[4], hi[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    lo[j] = q[j] & 0x0f0f0f0fu;
    hi[j] = (q[j] >> 4) & 0x0f0f0f0fu;
  }
  if constexpr (kFifth) {
    const uint4 hv = __ldg(reinterpret_cast<const uint4*>(b + 16 + 16 * h));
    const uint32_t qh[4] = {hv.x, hv.y, hv.z, hv.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      lo[j] |= ((qh[j] >> (2 * g)) & 0x01010101u) << 4;
      hi[j] |= ((qh[j] >> (2 * g + 1)) & 0x01010101u) << 4;
    }
  }
  const int e = 256 * sb + 64 * g + 16 * h;
  const int4 xlo = xq16(xs, e), xhi = xq16(xs, e + 32);
  // 6-bit scales and minimums of sub-blocks 2g, 2g + 1 (12 packed bytes: y =
  // bytes 0-3, z = 4-7, w = 8-11), both of a pair at once in bytes 0 and 1.
  const int sh = 16 * (g & 1);
  const uint32_t y = head.y >> sh, z = head.z >> sh, w = head.w >> sh;
  const bool low = g < 2;
  const uint32_t scp = low ? (y & 0x3f3fu) : ((w & 0x0f0fu) | ((y >> 2) & 0x3030u));
  const uint32_t mp = low ? (z & 0x3f3fu) : (((w >> 4) & 0x0f0fu) | ((z >> 2) & 0x3030u));
  const int sc0 = static_cast<int>(scp & 0xffu), sc1 = static_cast<int>(scp >> 8);
  const int m0 = static_cast<int>(mp & 0xffu), m1 = static_cast<int>(mp >> 8);
  const __half2 dm = *reinterpret_cast<const __half2*>(&head.x);
  const float d = __low2float(dm), dmin = __high2float(dm);
  const float* xd = xs.d + 8 * sb + 2 * g;
  const float r0 =
      d * static_cast<float>(sc0 * dot4(lo, xlo)) - dmin * static_cast<float>(m0 * xsum16(xs, e));
  const float r1 = d * static_cast<float>(sc1 * dot4(hi, xhi)) -
                   dmin * static_cast<float>(m1 * xsum16(xs, e + 32));
  return xd[0] * r0 + xd[1] * r1;
}

template <>
__device__ __forceinline__ float unit_dot<TensorType::Q4_K>(const uint8_t* __restrict__ row, int u,
                                                            const Q8Smem& xs) {
  return k4_unit<false>(row + (u >> 3) * 144, u >> 3, u & 7, xs);
}

template <>
__device__ __forceinline__ float unit_dot<TensorType::Q5_K>(const uint8_t* __restrict__ row, int u,
                                                            const Q8Smem& xs) {
  return k4_unit<true>(row + (u >> 3) * 176, u >> 3, u & 7, xs);
}

// Q6_K's 32 values of unit k (0..7) of super-block sb, whose 210 bytes start
// at b (global memory, or a warp's shared-memory stage when kShared): 8 bytes
// each of the low nibbles (twice) and high bits, 32 values of four sub-blocks.
template <bool kShared>
__device__ __forceinline__ float q6k_unit(const uint8_t* __restrict__ b, int sb, int k,
                                          const Q8Smem& xs) {
  const int n = k >> 2, l0 = 8 * (k & 3);
  uint32_t ql0[2], ql1[2], qh[2], sc2[2];
  words2<kShared>(b + 64 * n + l0, ql0);       // low nibbles: t = 0, high: t = 2
  words2<kShared>(b + 64 * n + 32 + l0, ql1);  // low nibbles: t = 1, high: t = 3
  words2<kShared>(b + 128 + 32 * n + l0, qh);
  words2<kShared>(b + 192 + 8 * n, sc2);
  const uint64_t sc = sc2[0] | (static_cast<uint64_t>(sc2[1]) << 32);  // 8 scale bytes
  const float d = half_at(b + 208);
  const int half = l0 / 16;
  const int e = 256 * sb + 128 * n + l0;
  float acc = 0.0f;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const uint32_t* ql = (t & 1) ? ql1 : ql0;
    const int lshift = 4 * (t / 2), hshift = 2 * t;
    const int2 xv = *reinterpret_cast<const int2*>(xs.q + e + 32 * t);
    const uint32_t v0 =
        ((ql[0] >> lshift) & 0x0f0f0f0fu) | (((qh[0] >> hshift) & 0x03030303u) << 4);
    const uint32_t v1 =
        ((ql[1] >> lshift) & 0x0f0f0f0fu) | (((qh[1] >> hshift) & 0x03030303u) << 4);
    const int s = __dp4a(static_cast<int>(v1), xv.y, __dp4a(static_cast<int>(v0), xv.x, 0)) -
                  32 * xs.sum8[(e + 32 * t) / 8];
    const int idx = 2 * t + half;  // scale byte 8n + 2t + half
    const int scale = static_cast<int8_t>((sc >> (8 * idx)) & 0xffu);
    acc += xs.d[8 * sb + 4 * n + t] * static_cast<float>(scale * s);
  }
  return d * acc;
}
template <>
__device__ __forceinline__ float unit_dot<TensorType::Q6_K>(const uint8_t* __restrict__ row, int u,
                                                            const Q8Smem& xs) {
  return q6k_unit<false>(row + (u >> 3) * 210, u >> 3, u & 7, xs);
}

// The stage of one warp for R rows: kSb super-blocks per row and step (eight
// for one row, four for more: 2-4 KiB of weights in flight per warp), kWords
// 16-byte words per row (the super-blocks plus up to 14 bytes of lead).
template <int R>
struct Q6Stage {
  static constexpr int kSb = R == 1 ? 8 : 4;
  static constexpr int kWords = (kSb * 210 + 14 + 15) / 16;
  static constexpr int kLoads = (kWords + 31) / 32;  // per lane and row
  static constexpr int kBytesPerWarp = R * kWords * 16;
};

// Row r's step `step`: the first byte of its super-blocks and how many exist.
__device__ __forceinline__ const uint8_t* q6_step_start(const uint8_t* row, int step, int sb) {
  return row + static_cast<int64_t>(step) * sb * 210;
}

// R rows' dot products with one token's activation xs, summed over the warp;
// `stage` is this warp's Q6Stage<R>::kBytesPerWarp bytes of shared memory.
// Every lane of the warp calls it (it holds __syncwarp).
template <int R>
__device__ __forceinline__ void rows_dot_q6k_staged(const uint8_t* const (&rows)[R], int n_units,
                                                    const Q8Smem& xs, uint4* stage,
                                                    float (&acc)[R]) {
  using St = Q6Stage<R>;
  constexpr int S = St::kSb, W = St::kWords, M = St::kLoads, J = S / 4;
  const int lane = threadIdx.x & 31;
  const int n_sb = n_units / 8;
  const int steps = (n_sb + S - 1) / S;
  uint4 v[R][M];
  const auto load = [&](int step) {
    const int have = min(S, n_sb - step * S);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const auto a = reinterpret_cast<uintptr_t>(q6_step_start(rows[r], step, S));
      const int lead = static_cast<int>(a & 15);
      const auto* base = reinterpret_cast<const uint4*>(a - static_cast<uintptr_t>(lead));
      const int n_words = (lead + have * 210 + 15) / 16;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const int i = lane + 32 * m;
        v[r][m] = i < n_words ? __ldg(base + i) : make_uint4(0u, 0u, 0u, 0u);
      }
    }
  };
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  if (steps > 0) load(0);
  for (int step = 0; step < steps; ++step) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const int i = lane + 32 * m;
        if (i < W) stage[r * W + i] = v[r][m];
      }
    }
    __syncwarp();
    if (step + 1 < steps) load(step + 1);
    const int have = min(S, n_sb - step * S);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const auto lead = reinterpret_cast<uintptr_t>(q6_step_start(rows[r], step, S)) & 15;
      const uint8_t* st = reinterpret_cast<const uint8_t*>(stage + r * W) + lead;
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const int su = lane + 32 * j, sbl = su >> 3;
        const int sbc = sbl < have ? sbl : 0;  // past the row: recompute the first, dropped
        const float p = q6k_unit<true>(st + sbc * 210, step * S + sbc, su & 7, xs);
        acc[r] += sbl < have ? p : 0.0f;
      }
    }
    __syncwarp();
  }
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = warp_sum(acc[r]);
}

}  // namespace minfer::cuda
