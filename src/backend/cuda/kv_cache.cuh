// Device-side access to KV cache rows: the one place that knows how an F32,
// F16 or Q8_0 cache row is laid out on the GPU (the CPU backend's layout:
// row p of a region starts at p * row_bytes; Q8_0 rows are quant/blocks.h
// BlockQ8_0 blocks of 34 bytes, an f16 scale d then 32 int8, and need a row
// length that is a multiple of 32).
//
// Store, kv_store_element<T>(cache, pos, row_len, i, x, err): writes element i
// of row `pos` (a row of row_len elements).
//   - F32: a copy. F16: round to nearest even (__float2half_rn, the same value
//     as quant::f32_to_f16).
//   - Q8_0: quant::quantize_row's values, bit for bit: d = amax / 127 and
//     id = 1 / d (0 when d is 0) in IEEE f32, q = round-half-away(x * id)
//     clamped to [-127, 127], d stored rounded to f16. Each warp quantizes one
//     block: the call must be made by all 32 lanes of a converged warp with
//     i = 32 * b + lane (lane = threadIdx.x % 32), so callers run it in loops
//     whose bounds are uniform per warp (row_len a multiple of 32). A
//     non-finite element, which the CPU store refuses, is reported through
//     err (kErrNonFiniteKv, err[1] = pos; first error wins) and the block is
//     written anyway.
// Load, kv_load<T>(cache, pos, row_len, i): element i of row `pos` as f32
// (f16 widened; Q8_0 as quant::dequantize_row: float(q) * float(d)).
// kv_load4<T>(..., i): elements i .. i + 3 (i a multiple of 4; F32 rows
// 16-byte aligned at i, F16 rows 8-byte aligned, Q8_0 rows 2-byte aligned).
// dispatch_kv_type(t, f) calls f(std::integral_constant<TensorType, T>{})
// for the compile-time T of t and returns true, or returns false for a type
// without a device layout here.
// Include only from .cu files.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/kernels.h"
#include "quant/tensor_type.h"

namespace minfer::cuda {

using quant::TensorType;

// Bytes of one Q8_0 block and its 32 elements.
constexpr int kKvQ8Block = 34;
constexpr int kKvQ8Elems = 32;

template <TensorType T>
constexpr bool kv_type_supported =
    T == TensorType::F32 || T == TensorType::F16 || T == TensorType::Q8_0;

template <typename F>
bool dispatch_kv_type(TensorType t, F&& f) {
  switch (t) {
    case TensorType::F32:
      f(std::integral_constant<TensorType, TensorType::F32>{});
      return true;
    case TensorType::F16:
      f(std::integral_constant<TensorType, TensorType::F16>{});
      return true;
    case TensorType::Q8_0:
      f(std::integral_constant<TensorType, TensorType::Q8_0>{});
      return true;
    default:
      return false;
  }
}

// Byte offset of the Q8_0 block holding element i of row `pos`.
__device__ __forceinline__ int64_t kv_q8_block(int64_t pos, int64_t row_len, int64_t i) {
  return (pos * (row_len / kKvQ8Elems) + i / kKvQ8Elems) * kKvQ8Block;
}

template <TensorType T>
__device__ __forceinline__ void kv_store_element(void* cache, int64_t pos, int64_t row_len,
                                                 int64_t i, float x, int* err) {
  static_assert(kv_type_supported<T>);
  if constexpr (T == TensorType::F32) {
    static_cast<float*>(cache)[pos * row_len + i] = x;
  } else if constexpr (T == TensorType::F16) {
    static_cast<__half*>(cache)[pos * row_len + i] = __float2half_rn(x);
  } else {
    const bool finite = isfinite(x);
    float amax = fabsf(x);
    const bool all_finite = __all_sync(0xffffffffu, finite) != 0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    const float r = roundf(__fmul_rn(x, id));  // half away from zero, as std::round
    const int q = r < -127.0f ? -127 : (r > 127.0f ? 127 : static_cast<int>(r));
    uint8_t* block = static_cast<uint8_t*>(cache) + kv_q8_block(pos, row_len, i);
    const int lane = static_cast<int>(i % kKvQ8Elems);
    block[2 + lane] = static_cast<uint8_t>(static_cast<int8_t>(q));
    if (lane == 0) {
      *reinterpret_cast<__half*>(block) = __float2half_rn(d);
      if (!all_finite && atomicCAS(err, kErrNone, kErrNonFiniteKv) == kErrNone) {
        err[1] = static_cast<int>(pos);
      }
    }
  }
}

template <TensorType T>
__device__ __forceinline__ float kv_load(const void* cache, int64_t pos, int64_t row_len,
                                         int64_t i) {
  static_assert(kv_type_supported<T>);
  if constexpr (T == TensorType::F32) {
    return static_cast<const float*>(cache)[pos * row_len + i];
  } else if constexpr (T == TensorType::F16) {
    return __half2float(static_cast<const __half*>(cache)[pos * row_len + i]);
  } else {
    const uint8_t* block = static_cast<const uint8_t*>(cache) + kv_q8_block(pos, row_len, i);
    const float d = __half2float(*reinterpret_cast<const __half*>(block));
    return static_cast<float>(static_cast<int8_t>(block[2 + i % kKvQ8Elems])) * d;
  }
}

template <TensorType T>
__device__ __forceinline__ float4 kv_load4(const void* cache, int64_t pos, int64_t row_len,
                                           int64_t i) {
  static_assert(kv_type_supported<T>);
  if constexpr (T == TensorType::F32) {
    return *reinterpret_cast<const float4*>(static_cast<const float*>(cache) + pos * row_len + i);
  } else if constexpr (T == TensorType::F16) {
    const uint2 u =
        *reinterpret_cast<const uint2*>(static_cast<const __half*>(cache) + pos * row_len + i);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
    return make_float4(a.x, a.y, b.x, b.y);
  } else {
    const uint8_t* block = static_cast<const uint8_t*>(cache) + kv_q8_block(pos, row_len, i);
    const float d = __half2float(*reinterpret_cast<const __half*>(block));
    // 2 + (i % 32) is even: two 2-byte loads.
    const auto* qs = reinterpret_cast<const char2*>(block + 2 + i % kKvQ8Elems);
    const char2 lo = qs[0], hi = qs[1];
    return make_float4(static_cast<float>(lo.x) * d, static_cast<float>(lo.y) * d,
                       static_cast<float>(hi.x) * d, static_cast<float>(hi.y) * d);
  }
}

}  // namespace minfer::cuda
