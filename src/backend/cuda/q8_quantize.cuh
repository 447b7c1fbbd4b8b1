// An activation row's int8 form (launch_quantize_q8's layout: q, then d and
// the sums of each 32 values, then the sums of each 8), normalized first when
// asked: the one place that computes it, so that every kernel quantizing a
// token (the quantizer, the GEMVs' prologues, the one-token tensor-core
// kernel's prologue) writes the same bytes for it. quantize_activation is
// called by all kQuantThreads threads of a block (it holds barriers).
// Include only from .cu files (and their .cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/q8_units.cuh"

namespace minfer::cuda::q8act {

constexpr int kQuantWarps = 8;
constexpr int kQuantThreads = kQuantWarps * 32;  // the block size of every caller

__device__ __forceinline__ float4 scale4(float4 v, float s) {
  return make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
}

// Up to kCached float4s of x (and of the norm weight) per thread stay in
// registers between the sum-of-squares pass and the quantizing pass, and are
// all loaded before either pass uses them (fewer dependent round trips).
constexpr int kCached = 4;

// The largest |value| of the 256 values whose float4s threads t and t ^ 32
// hold (warps 2 m and 2 m + 1: a block's float4s i = k * kQuantThreads +
// thread, so each 64 consecutive threads hold a 256-value super-block),
// given each lane's amax over its 32-value unit. Called by every thread of
// the block (a barrier); `round` alternates between consecutive calls, so
// that a call's writes never meet the previous call's reads.
__device__ __forceinline__ float amax_256(float amax, int64_t round) {
  __shared__ float half[2][kQuantWarps];
  const int warp = threadIdx.x >> 5;
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 8));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 16));
  float* h = half[round & 1];
  if ((threadIdx.x & 31) == 0) h[warp] = amax;
  __syncthreads();
  return fmaxf(h[warp], h[warp ^ 1]);
}

// Writes the int8 form of the float4 at index i of an activation (held by
// every lane: a uniform call, the shuffles see whole warps; lanes past the
// end, i >= n4, take part without writing): per 32 values (8 lanes) d =
// amax / 127 and q = round(x * 127 / amax), the sums of each 8 and 32 q.
// per_256 (uniform across the block, in_dim a multiple of 256): amax is
// that of the value's 256-value super-block (amax_256; i / kQuantThreads
// is the call's round), so its eight units share one d.
__device__ __forceinline__ void emit_q8(int64_t i, int64_t n4, float4 v, Q8Smem xs,
                                        bool per_256 = false) {
  const int lane = threadIdx.x & 31;
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 4));
  if (per_256) amax = amax_256(amax, i / kQuantThreads);
  const float d = amax / 127.0f;
  const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
  const int q0 = __float2int_rn(v.x * id), q1 = __float2int_rn(v.y * id);
  const int q2 = __float2int_rn(v.z * id), q3 = __float2int_rn(v.w * id);
  const int s8 = q0 + q1 + q2 + q3 + __shfl_xor_sync(0xffffffffu, q0 + q1 + q2 + q3, 1);
  int s32 = s8 + __shfl_xor_sync(0xffffffffu, s8, 2);
  s32 += __shfl_xor_sync(0xffffffffu, s32, 4);
  if (i < n4) {
    reinterpret_cast<char4*>(xs.q)[i] =
        make_char4(static_cast<signed char>(q0), static_cast<signed char>(q1),
                   static_cast<signed char>(q2), static_cast<signed char>(q3));
    if ((lane & 1) == 0) xs.sum8[i / 2] = static_cast<int16_t>(s8);
    if ((lane & 7) == 0) {
      xs.d[i / 8] = d;
      xs.sum32[i / 8] = s32;
    }
  }
}

// Every thread of the block calls it (it holds barriers).
__device__ inline void quantize_activation(const Q8Input& in, Q8Smem xs) {
  const float* __restrict__ x = in.x;
  const int64_t in_dim = in.in_dim;
  __shared__ float red[kQuantWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  const auto* w4 = reinterpret_cast<const float4*>(in.norm_weight);
  const int64_t n4 = in_dim / 4;
  const int64_t iters = (n4 + kQuantThreads - 1) / kQuantThreads;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float4 xc[kCached], gc[kCached];
#pragma unroll
  for (int k = 0; k < kCached; ++k) {
    const int64_t i = k * kQuantThreads + threadIdx.x;
    xc[k] = i < n4 ? x4[i] : zero;
    gc[k] = in.rms_norm && w4 != nullptr && i < n4 ? w4[i] : zero;
  }
  float s = 1.0f;
  if (in.rms_norm) {
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      ss += xc[k].x * xc[k].x + xc[k].y * xc[k].y + xc[k].z * xc[k].z + xc[k].w * xc[k].w;
    }
    for (int64_t i = kCached * kQuantThreads + threadIdx.x; i < n4; i += kQuantThreads) {
      const float4 v = x4[i];
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    ss = warp_sum(ss);
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kQuantWarps; ++w) total += red[w];
    s = rsqrtf(total / static_cast<float>(in_dim) + in.eps);
  }
  // Quantizes the float4 at index i (held by every lane; a uniform call: the
  // shuffles see whole warps).
  const auto emit = [&](int64_t i, float4 v, float4 g) {
    if (in.rms_norm) {
      v = scale4(v, s);
      if (w4 != nullptr) v = make_float4(v.x * g.x, v.y * g.y, v.z * g.z, v.w * g.w);
    }
    emit_q8(i, n4, v, xs, in.scale_per_256);
  };
#pragma unroll
  for (int k = 0; k < kCached; ++k) {
    if (k < iters) emit(k * kQuantThreads + threadIdx.x, xc[k], gc[k]);
  }
  // Past the cached ones, kCached float4s at a time: all loaded before the
  // first is quantized (the down projection's 18944 values: 4 round trips
  // to L2 after the cached ones instead of 15).
  for (int64_t k0 = kCached; k0 < iters; k0 += kCached) {
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      const int64_t i = (k0 + k) * kQuantThreads + threadIdx.x;
      const bool ok = k0 + k < iters && i < n4;
      xc[k] = ok ? x4[i] : zero;
      gc[k] = in.rms_norm && w4 != nullptr && ok ? w4[i] : zero;
    }
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      if (k0 + k < iters) emit((k0 + k) * kQuantThreads + threadIdx.x, xc[k], gc[k]);
    }
  }
  __syncthreads();
}

// A quantized activation's parts laid out from `base` (shared or global).
__device__ __forceinline__ Q8Smem q8_at(int8_t* base, int64_t in_dim) {
  Q8Smem xs;
  xs.q = base;
  xs.d = reinterpret_cast<float*>(xs.q + in_dim);
  xs.sum32 = reinterpret_cast<int*>(xs.d + in_dim / 32);
  xs.sum8 = reinterpret_cast<int16_t*>(xs.sum32 + in_dim / 32);
  return xs;
}

}  // namespace minfer::cuda::q8act
