// One token through the tensor-core products' arithmetic, without the
// tensor cores (mmq.cu, its only includer, launches it for one token of
// Q4_K and Q5_K rows cut in at most two slices).
//
// The engine's batch invariance asks that a token's outputs be the same bit
// for bit whatever its batch, so one token must round exactly as mmq_kernel
// rounds it in a batch of 70. That kernel's sums are fixed by the format's
// f32 steps (mmq_formats.cuh) on each unit's exact integer dot, summed in
// unit order within each of the row's S slices, the slices added in order.
// Any integer arithmetic gives the same dots, so here a lane owns one
// (row, slice): it reads its blocks whole (16-byte loads for Q4_K / Q5_K,
// the next block's loads in flight while it works on this one), takes each
// unit's dot with dp4a and applies the same f32 steps in the same order.
// The S lanes of a row sit side by side, and the first adds the others'
// sums in slice order with shuffles. At one token the tensor-core tile
// leaves 7 of its 8 token columns idle and decodes each unit's scales for
// that one token; here the decoding is a lane's own work. Its lanes read 32
// different rows at a time, so it pays only where each lane streams a long
// run of its row (docs/CUDA.md, "One token without the tensor cores").
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/mmq_formats.cuh"

namespace minfer::cuda::mmq_one {

using mmq::exact_float;
using mmq::small_float;

struct OneArgs {
  const uint8_t* w;
  size_t row_bytes;
  int64_t rows, n_blocks;  // weight rows, blocks (of the format) per row
  const int8_t* xq;        // the token, in launch_quantize_q8's layout
  int64_t n_units;
  int slices;  // S, as mmq_kernel cuts the same matrix
  const float* bias;
  const float* residual;
  float* y;
};

// The token's unit u: its 32 values as 8 words, d_x and sum_x as floats.
struct XUnit {
  int q[8];
  float d, s;
};

__device__ __forceinline__ XUnit x_unit(const OneArgs& a, int64_t u, bool sums) {
  XUnit o;
  const auto* p = reinterpret_cast<const int4*>(a.xq + 32 * u);
  const int4 lo = __ldg(p), hi = __ldg(p + 1);
  o.q[0] = lo.x, o.q[1] = lo.y, o.q[2] = lo.z, o.q[3] = lo.w;
  o.q[4] = hi.x, o.q[5] = hi.y, o.q[6] = hi.z, o.q[7] = hi.w;
  const auto* d = reinterpret_cast<const float*>(a.xq + 32 * a.n_units);
  o.d = __ldg(d + u);
  o.s = sums ? exact_float(__ldg(reinterpret_cast<const int*>(d + a.n_units) + u)) : 0.0f;
  return o;
}

// --- Q4_K and Q5_K: a block is a super-block, read as 16-byte words --------
template <bool kFifth>
struct KQuant4 {
  using Mma = mmq::KQuant4<kFifth>;
  static constexpr int kQuads = Mma::kBytes / 16;
  struct Block {
    uint4 v[kQuads];
    __device__ uint32_t word(int i) const {  // bytes 4 i .. 4 i + 3
      const uint4& q = v[i / 4];
      return i % 4 == 0 ? q.x : (i % 4 == 1 ? q.y : (i % 4 == 2 ? q.z : q.w));
    }
  };
  __device__ static void load(const uint8_t* row, int64_t b, Block& k) {
    const auto* p = reinterpret_cast<const uint4*>(row + b * Mma::kBytes);
#pragma unroll
    for (int i = 0; i < kQuads; ++i) k.v[i] = __ldg(p + i);
  }
  __device__ static void add(const OneArgs& a, const Block& k, int64_t b, float& acc) {
    const __half2 dm = *reinterpret_cast<const __half2*>(&k.v[0].x);
    const float d = __low2float(dm), dmin = __high2float(dm);
    const typename Mma::Scales s(k.v[0]);
#pragma unroll
    for (int j = 0; j < Mma::kUnits; ++j) {
      const XUnit x = x_unit(a, b * Mma::kUnits + j, true);
      int c = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) {  // values 4 i .. 4 i + 3 of sub-block j
        uint32_t w = (k.word(Mma::kQs / 4 + 8 * (j / 2) + i) >> (4 * (j % 2))) & 0x0f0f0f0fu;
        if constexpr (kFifth) w |= ((k.word(4 + i) >> j) & 0x01010101u) << 4;
        c = __dp4a(static_cast<int>(w), x.q[i], c);
      }
      const float dsc = __fmul_rn(d, small_float(s.sc[j / 4], j % 4));
      const float dmm = __fmul_rn(dmin, small_float(s.m[j / 4], j % 4));
      const float v = __fmaf_rn(dsc, exact_float(c), -__fmul_rn(dmm, x.s));
      acc = __fmaf_rn(x.d, v, acc);
    }
  }
};

template <quant::TensorType T>
struct OneFormatOf;
template <>
struct OneFormatOf<quant::TensorType::Q4_K> {
  using F = KQuant4<false>;
};
template <>
struct OneFormatOf<quant::TensorType::Q5_K> {
  using F = KQuant4<true>;
};

constexpr int kOneWarps = 4;  // warps a block

// Lane (r, s) of a warp: row 32 / S * warp + r, slice s (S = a.slices).
template <quant::TensorType T>
__global__ void __launch_bounds__(kOneWarps * 32) one_token_kernel(OneArgs a) {
  using F = typename OneFormatOf<T>::F;
  const int lane = threadIdx.x & 31;
  const int S = a.slices;
  const int s = lane & (S - 1);
  const int64_t row =
      (static_cast<int64_t>(blockIdx.x) * kOneWarps + (threadIdx.x >> 5)) * (32 / S) + lane / S;
  const int64_t per = (a.n_blocks + S - 1) / S;
  const int64_t b_begin = s * per < a.n_blocks ? s * per : a.n_blocks;
  const int64_t b_end = b_begin + per < a.n_blocks ? b_begin + per : a.n_blocks;
  const uint8_t* w = a.w + (row < a.rows ? row : a.rows - 1) * a.row_bytes;
  float acc = 0.0f;
  typename F::Block cur;
  if (b_begin < b_end) F::load(w, b_begin, cur);
  for (int64_t b = b_begin; b < b_end; ++b) {
    typename F::Block next;
    if (b + 1 < b_end) F::load(w, b + 1, next);  // in flight while this one is summed
    F::add(a, cur, b, acc);
    cur = next;
  }
  float v = acc;  // slices in order, as mmq.cu's finish adds them
  for (int t = 1; t < S; ++t) {
    const float o = __shfl_sync(0xffffffffu, acc, (lane + t) & 31);
    if (s == 0) v = __fadd_rn(v, o);
  }
  if (s == 0 && row < a.rows) {
    if (a.bias != nullptr) v = __fadd_rn(v, a.bias[row]);
    if (a.residual != nullptr) v = __fadd_rn(v, a.residual[row]);
    a.y[row] = v;  // y may alias residual
  }
}

}  // namespace minfer::cuda::mmq_one
