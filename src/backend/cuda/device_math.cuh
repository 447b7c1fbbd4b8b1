// Device helpers shared by the CUDA kernels: warp reductions, the activation
// functions, RoPE angles and the dot product of one quantized weight row with
// an f32 activation row. One definition each, so that fused and unfused
// kernels compute the same numbers (the numerics are stated in ops.cu).
// Include only from .cu files.
#pragma once

#include <cstdint>
#include <type_traits>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"

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

// YaRN's angle for pair i from the plain one (interp = freq_scale *
// extrap) and the unscaled one: the ramp is ggml's, in f32 and in its order
// (clamped by comparisons, as the CPU's std::clamp), so that pairs below
// corr_low keep extrap and pairs from corr_high take interp exactly; the
// blend itself is in double like the rest of the angle.
__device__ __forceinline__ double yarn_angle(double interp, double extrap, int64_t i,
                                             const YarnArgs& yarn) {
  const float y =
      (static_cast<float>(i) - yarn.corr_low) / fmaxf(0.001f, yarn.corr_high - yarn.corr_low);
  const float ramp = 1.0f - (y < 0.0f ? 0.0f : (1.0f < y ? 1.0f : y));
  const double mix = static_cast<double>(ramp * yarn.ext_factor);
  return interp * (1.0 - mix) + extrap * mix;
}

// cos and sin of RoPE pair i's angle at `pos`: extrap = pos *
// base^(-2i/n_rot) / factor, the angle freq_scale * extrap, in double,
// rounded to f32. With YaRN (yarn.ext_factor != 0) the angle is yarn_angle's
// blend and the rounded cos and sin are multiplied by yarn.mscale in f32 (the
// CPU's order); ext_factor 0 computes exactly the plain angle.
__device__ __forceinline__ void rope_cos_sin(int32_t pos, int64_t i, int64_t n_rot, float freq_base,
                                             float freq_scale, const float* freq_factors,
                                             const YarnArgs& yarn, float* c, float* s) {
  const double ff = freq_factors != nullptr ? static_cast<double>(freq_factors[i]) : 1.0;
  const double theta =
      static_cast<double>(pos) * pow(static_cast<double>(freq_base),
                                     -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
  const double extrap = theta / ff;
  const double interp = static_cast<double>(freq_scale) * extrap;
  const bool yarn_on = yarn.ext_factor != 0.0f;
  const double angle = yarn_on ? yarn_angle(interp, extrap, i, yarn) : interp;
  double sd, cd;
  sincos(angle, &sd, &cd);
  *c = static_cast<float>(cd);
  *s = static_cast<float>(sd);
  if (yarn_on) {
    *c = *c * yarn.mscale;
    *s = *s * yarn.mscale;
  }
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

// One lane's share of R dot products at once: rows w, w + row_bytes, ... (the
// first n_rows of them valid) with the same activation row, over chunks
// c_begin, c_begin + c_step, ... The activation chunk is loaded once for all R
// rows, and the R rows' weight loads are independent, which keeps more of
// them in flight.
template <TensorType T, int R>
__device__ __forceinline__ void rows_dot_lane(const uint8_t* __restrict__ w, size_t row_bytes,
                                              int n_rows, int64_t n_chunks, int64_t c_begin,
                                              int64_t c_step, const float* __restrict__ x,
                                              float (&acc)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int64_t c = c_begin; c < n_chunks; c += c_step) {
    float xv[kChunk];
    const float4* xp = reinterpret_cast<const float4*>(x + c * kChunk);
#pragma unroll
    for (int i = 0; i < kChunk / 4; ++i) {
      const float4 a = __ldg(xp + i);
      xv[4 * i] = a.x;
      xv[4 * i + 1] = a.y;
      xv[4 * i + 2] = a.z;
      xv[4 * i + 3] = a.w;
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r < n_rows) {
        float v[kChunk];
        dequant_chunk<T>(w + r * row_bytes, c, v);
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < kChunk / 4; ++i) {
          s += v[4 * i] * xv[4 * i] + v[4 * i + 1] * xv[4 * i + 1] + v[4 * i + 2] * xv[4 * i + 2] +
               v[4 * i + 3] * xv[4 * i + 3];
        }
        acc[r] += s;
      }
    }
  }
}

// The GEMV work split of a block of kGemvBlockWarps warps: kSplit warps share
// each group of R rows, splitting its chunks (kSplit = 1: a warp owns its
// rows); a block covers R * (kGemvBlockWarps / kSplit) rows.
constexpr int kGemvBlockWarps = 4;

template <int R, int kSplit>
struct GemvSplit {
  static constexpr int kRowsPerBlock = R * (kGemvBlockWarps / kSplit);
  int lane, sub;  // lane, and the warp's index within its row group
  int64_t row0;   // first row of the warp's group
  __device__ GemvSplit(int64_t block) {
    const int warp = static_cast<int>(threadIdx.x >> 5);
    lane = static_cast<int>(threadIdx.x & 31);
    sub = warp % kSplit;
    row0 = block * kRowsPerBlock + static_cast<int64_t>(warp / kSplit) * R;
  }
  __device__ int rows_valid(int64_t rows) const {
    return row0 < rows ? static_cast<int>(rows - row0 < R ? rows - row0 : R) : 0;
  }
  __device__ int64_t c_begin() const { return lane + 32 * sub; }
  static constexpr int64_t kStep = 32 * kSplit;
  // Sums acc over the warp and the row group's warps; the group's first lane
  // (sub 0, lane 0) gets the totals in acc. Every thread of the block calls it.
  __device__ void reduce(float (&acc)[R], float (*part)[R]) const {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = warp_sum(acc[r]);
    if constexpr (kSplit > 1) {
      if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r) part[threadIdx.x >> 5][r] = acc[r];
      }
      __syncthreads();
      if (sub == 0 && lane == 0) {
        const int first = static_cast<int>(threadIdx.x >> 5);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float s = 0.0f;
          for (int k = 0; k < kSplit; ++k) s += part[first + k][r];
          acc[r] = s;
        }
      }
    }
  }
  __device__ bool writer() const {
    return sub == 0 && lane == 0;
  }
};

// Calls f(std::integral_constant R, std::integral_constant kSplit) with the
// split suited to `rows` rows of `n_chunks` chunks: long rows are shared by
// four warps; many rows are taken four per warp group.
template <typename F>
void choose_gemv_split(int64_t rows, int64_t n_chunks, int max_rows_per_group, F&& f) {
  const bool split = n_chunks >= 96;
  const int64_t groups = rows / (split ? 1 : kGemvBlockWarps);  // blocks if R = 1
  const bool many = max_rows_per_group > 1 && groups >= 4 * 1024;
  if (split) {
    if (many) {
      f(std::integral_constant<int, 2>{}, std::integral_constant<int, 4>{});
    } else {
      f(std::integral_constant<int, 1>{}, std::integral_constant<int, 4>{});
    }
  } else if (many) {
    f(std::integral_constant<int, 4>{}, std::integral_constant<int, 1>{});
  } else {
    f(std::integral_constant<int, 1>{}, std::integral_constant<int, 1>{});
  }
}

}  // namespace minfer::cuda
