// Device helpers shared by the CUDA kernels: warp reductions, the activation
// functions, RoPE angles and the dot product of one quantized weight row with
// an f32 activation row. One definition each, so that fused and unfused
// kernels compute the same numbers (the numerics are stated in ops.cu).
// Include only from .cu files.
#pragma once

#include <cstdint>

#include "backend/cuda/dequant.cuh"

namespace minfer::cuda {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float silu_f(float x) {
  return x / (1.0f + expf(-x));
}

__device__ __forceinline__ float gelu_f(float x) {
  constexpr float kA = 0.044715f;
  constexpr float kS = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + tanhf(kS * x * (1.0f + kA * x * x)));
}

// cos and sin of RoPE pair i's angle at `pos`: pos * base^(-2i/n_rot) /
// factor * freq_scale, in double, rounded to f32.
__device__ __forceinline__ void rope_cos_sin(int32_t pos, int64_t i, int64_t n_rot, float freq_base,
                                             float freq_scale, const float* freq_factors, float* c,
                                             float* s) {
  const double ff = freq_factors != nullptr ? static_cast<double>(freq_factors[i]) : 1.0;
  const double theta =
      static_cast<double>(pos) * pow(static_cast<double>(freq_base),
                                     -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
  const double angle = static_cast<double>(freq_scale) * (theta / ff);
  double sd, cd;
  sincos(angle, &sd, &cd);
  *c = static_cast<float>(cd);
  *s = static_cast<float>(sd);
}

// One lane's share of dot(W row, x): lane l takes chunks l, l+32, ... of the
// row (consecutive lanes read consecutive blocks). Sum over the warp with
// warp_sum for the row's value.
template <TensorType T>
__device__ __forceinline__ float row_dot_lane(const uint8_t* __restrict__ wr, int64_t n_chunks,
                                              const float* __restrict__ x, int lane) {
  float acc = 0.0f;
  for (int64_t c = lane; c < n_chunks; c += 32) {
    float v[kChunk];
    dequant_chunk<T>(wr, c, v);
    const float4* xv = reinterpret_cast<const float4*>(x + c * kChunk);
#pragma unroll
    for (int i = 0; i < kChunk / 4; ++i) {
      const float4 a = __ldg(xv + i);
      acc += v[4 * i] * a.x + v[4 * i + 1] * a.y + v[4 * i + 2] * a.z + v[4 * i + 3] * a.w;
    }
  }
  return acc;
}

// Bytes of one 32-chunk group of a row (32 blocks of the 32-element types,
// 4 super-blocks of the K-quants): the unit a warp stages at a time.
template <TensorType T>
inline constexpr int kGroupBytes =
    TypeInfo<T>::kBlock == 32 ? 32 * TypeInfo<T>::kBytes : 4 * TypeInfo<T>::kBytes;
// Per-warp staging space for row_dot_staged (the largest group: Q8_0's).
constexpr int kStageBytes = 32 * 34;

// Copies `bytes` bytes from global memory to a warp's staging buffer with the
// widest loads the alignment of both allows (16, 4, 2 or 1 bytes per lane).
__device__ __forceinline__ void warp_stage(const uint8_t* __restrict__ src, int bytes,
                                           uint8_t* __restrict__ dst, int lane) {
  const auto a = reinterpret_cast<uintptr_t>(src);
  if ((a & 15) == 0 && (bytes & 15) == 0) {
    for (int i = lane; i < bytes / 16; i += 32) {
      reinterpret_cast<uint4*>(dst)[i] = __ldg(reinterpret_cast<const uint4*>(src) + i);
    }
  } else if ((a & 3) == 0 && (bytes & 3) == 0) {
    for (int i = lane; i < bytes / 4; i += 32) {
      reinterpret_cast<uint32_t*>(dst)[i] = __ldg(reinterpret_cast<const uint32_t*>(src) + i);
    }
  } else if ((a & 1) == 0 && (bytes & 1) == 0) {
    for (int i = lane; i < bytes / 2; i += 32) {
      reinterpret_cast<uint16_t*>(dst)[i] = __ldg(reinterpret_cast<const uint16_t*>(src) + i);
    }
  } else {
    for (int i = lane; i < bytes; i += 32) dst[i] = __ldg(src + i);
  }
}

// As row_dot_lane, but the warp first copies each group of 32 chunks of the
// quantized row into `stage` (kStageBytes, 16-byte aligned, this warp's own)
// with wide coalesced loads, and lanes decode their chunk from there. Every
// lane of the warp must call it (it synchronizes the warp). F32/F16/BF16 rows
// are read directly (their loads are already wide).
template <TensorType T>
__device__ __forceinline__ float row_dot_staged(const uint8_t* __restrict__ wr, int64_t n_chunks,
                                                const float* __restrict__ x, uint8_t* stage,
                                                int lane) {
  if constexpr (T == TensorType::F32 || T == TensorType::F16 || T == TensorType::BF16) {
    return row_dot_lane<T>(wr, n_chunks, x, lane);
  } else {
    constexpr int kG = kGroupBytes<T>;
    static_assert(kG <= kStageBytes);
    float acc = 0.0f;
    for (int64_t c0 = 0; c0 < n_chunks; c0 += 32) {
      const int n = n_chunks - c0 < 32 ? static_cast<int>(n_chunks - c0) : 32;
      __syncwarp();
      warp_stage(wr + (c0 / 32) * kG, n * kG / 32, stage, lane);
      __syncwarp();
      if (lane < n) {
        float v[kChunk];
        dequant_chunk<T>(stage, lane, v);
        const float4* xv = reinterpret_cast<const float4*>(x + (c0 + lane) * kChunk);
#pragma unroll
        for (int i = 0; i < kChunk / 4; ++i) {
          const float4 a = __ldg(xv + i);
          acc += v[4 * i] * a.x + v[4 * i + 1] * a.y + v[4 * i + 2] * a.z + v[4 * i + 3] * a.w;
        }
      }
    }
    return acc;
  }
}

}  // namespace minfer::cuda
