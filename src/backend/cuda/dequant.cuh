// Device-side decoding of weight rows: every weight type the CUDA backend
// supports, decoded 32 elements (one "chunk") at a time.
//
// Contract: dequant_chunk<T>(row, c, out) writes elements [32c, 32c + 32) of
// the row starting at `row` into out[0..32), with the values of
// quant::dequantize_row (block layouts in quant/blocks.h; arithmetic in f32,
// possibly contracted into FMAs by the compiler, so results may differ from the
// reference in the last bit). A row must hold a whole number of chunks (every
// supported type's block is 32 or 256 elements; F32/F16/BF16 rows must have a
// length that is a multiple of 32: callers check). Reads are byte-wise, so
// rows need no alignment beyond their element type's (F32: 4, F16/BF16: 2).
// dispatch_type() maps a runtime TensorType to the compile-time one and
// returns false for a type without a decoder.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "quant/tensor_type.h"

namespace minfer::cuda {

using quant::TensorType;

constexpr int kChunk = 32;

__device__ __forceinline__ float f16_at(const uint8_t* p) {
  const unsigned short v = static_cast<unsigned short>(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(v));
}

__device__ __forceinline__ void k4_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Bytes per 32-element chunk for the 32-element block types; K-quants use
// 256-element super-blocks (8 chunks).
template <TensorType T>
struct TypeInfo;
// clang-format off
template <> struct TypeInfo<TensorType::F32>  { static constexpr int kBlock = 32, kBytes = 128; };
template <> struct TypeInfo<TensorType::F16>  { static constexpr int kBlock = 32, kBytes = 64; };
template <> struct TypeInfo<TensorType::BF16> { static constexpr int kBlock = 32, kBytes = 64; };
template <> struct TypeInfo<TensorType::Q4_0> { static constexpr int kBlock = 32, kBytes = 18; };
template <> struct TypeInfo<TensorType::Q4_1> { static constexpr int kBlock = 32, kBytes = 20; };
template <> struct TypeInfo<TensorType::Q5_0> { static constexpr int kBlock = 32, kBytes = 22; };
template <> struct TypeInfo<TensorType::Q5_1> { static constexpr int kBlock = 32, kBytes = 24; };
template <> struct TypeInfo<TensorType::Q8_0> { static constexpr int kBlock = 32, kBytes = 34; };
template <> struct TypeInfo<TensorType::MXFP4> { static constexpr int kBlock = 32, kBytes = 17; };
template <> struct TypeInfo<TensorType::Q2_K> { static constexpr int kBlock = 256, kBytes = 84; };
template <> struct TypeInfo<TensorType::Q3_K> { static constexpr int kBlock = 256, kBytes = 110; };
template <> struct TypeInfo<TensorType::Q4_K> { static constexpr int kBlock = 256, kBytes = 144; };
template <> struct TypeInfo<TensorType::Q5_K> { static constexpr int kBlock = 256, kBytes = 176; };
template <> struct TypeInfo<TensorType::Q6_K> { static constexpr int kBlock = 256, kBytes = 210; };
// clang-format on

// MXFP4: an E2M1 code (bit 3 the sign, bits 2-1 the exponent, bit 0 the
// mantissa) as twice its value, an integer (quant/blocks.h's kMxfp4Values),
// and the E8M0 byte as half its power of two (mxfp4_half_scale there).
__device__ __forceinline__ float e2m1_doubled(unsigned code) {
  const unsigned exp = (code >> 1) & 3u, man = code & 1u;
  const int mag = exp == 0 ? static_cast<int>(man) : static_cast<int>((2u + man) << (exp - 1u));
  return static_cast<float>((code & 8u) != 0 ? -mag : mag);
}
__device__ __forceinline__ float e8m0_half(unsigned e) {
  return __uint_as_float(e < 2 ? 0x00200000u << e : (e - 1u) << 23);
}

template <TensorType T>
__device__ __forceinline__ void dequant_chunk(const uint8_t* __restrict__ row, int64_t c,
                                              float* __restrict__ out) {
  using I = TypeInfo<T>;
  if constexpr (T == TensorType::F32) {
    const float4* p = reinterpret_cast<const float4*>(row) + c * 8;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 v = p[i];
      out[4 * i] = v.x;
      out[4 * i + 1] = v.y;
      out[4 * i + 2] = v.z;
      out[4 * i + 3] = v.w;
    }
  } else if constexpr (T == TensorType::F16) {
    const __half* p = reinterpret_cast<const __half*>(row) + c * 32;
#pragma unroll
    for (int i = 0; i < 32; ++i) out[i] = __half2float(p[i]);
  } else if constexpr (T == TensorType::BF16) {
    const unsigned short* p = reinterpret_cast<const unsigned short*>(row) + c * 32;
#pragma unroll
    for (int i = 0; i < 32; ++i) out[i] = __uint_as_float(static_cast<unsigned>(p[i]) << 16);
  } else if constexpr (T == TensorType::MXFP4) {
    const uint8_t* b = row + c * I::kBytes;
    const float d = e8m0_half(b[0]);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      out[i] = e2m1_doubled(b[1 + i] & 15u) * d;
      out[i + 16] = e2m1_doubled(static_cast<unsigned>(b[1 + i]) >> 4) * d;
    }
  } else if constexpr (I::kBlock == 32) {
    const uint8_t* b = row + c * I::kBytes;
    const float d = f16_at(b);
    if constexpr (T == TensorType::Q8_0) {
#pragma unroll
      for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(static_cast<int8_t>(b[2 + i])) * d;
    } else if constexpr (T == TensorType::Q4_0) {
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        out[i] = static_cast<float>((b[2 + i] & 15) - 8) * d;
        out[i + 16] = static_cast<float>((b[2 + i] >> 4) - 8) * d;
      }
    } else if constexpr (T == TensorType::Q4_1) {
      const float m = f16_at(b + 2);
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        out[i] = static_cast<float>(b[4 + i] & 15) * d + m;
        out[i + 16] = static_cast<float>(b[4 + i] >> 4) * d + m;
      }
    } else {  // Q5_0 / Q5_1
      constexpr bool kMin = T == TensorType::Q5_1;
      const float m = kMin ? f16_at(b + 2) : 0.0f;
      const uint8_t* qhp = b + (kMin ? 4 : 2);
      const uint32_t qh =
          qhp[0] | (qhp[1] << 8) | (qhp[2] << 16) | (static_cast<uint32_t>(qhp[3]) << 24);
      const uint8_t* qs = qhp + 4;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int h0 = ((qh >> i) << 4) & 0x10;
        const int h1 = (qh >> (i + 12)) & 0x10;
        const int q0 = (qs[i] & 15) | h0;
        const int q1 = (qs[i] >> 4) | h1;
        if constexpr (kMin) {
          out[i] = static_cast<float>(q0) * d + m;
          out[i + 16] = static_cast<float>(q1) * d + m;
        } else {
          out[i] = static_cast<float>(q0 - 16) * d;
          out[i + 16] = static_cast<float>(q1 - 16) * d;
        }
      }
    }
  } else {
    // K-quants: chunk c is sub-range s (32 elements) of super-block c / 8.
    const uint8_t* b = row + (c / 8) * I::kBytes;
    const int s = static_cast<int>(c % 8);
    if constexpr (T == TensorType::Q4_K || T == TensorType::Q5_K) {
      const float d = f16_at(b);
      const float dmin = f16_at(b + 2);
      int sc, m;
      k4_scale_min(b + 4, s, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      const uint8_t* qs = b + (T == TensorType::Q5_K ? 48 : 16) + 32 * (s / 2);
      const int shift = 4 * (s % 2);
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        int q = (qs[i] >> shift) & 15;
        if constexpr (T == TensorType::Q5_K) q |= ((b[16 + i] >> s) & 1) << 4;
        out[i] = d1 * static_cast<float>(q) - m1;
      }
    } else if constexpr (T == TensorType::Q2_K) {
      const float d = f16_at(b + 80);
      const float dmin = f16_at(b + 82);
      const uint8_t* qs = b + 16 + 32 * (s / 4);
      const int shift = 2 * (s % 4);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int sc = b[2 * s + half];
        const float dl = d * static_cast<float>(sc & 15);
        const float ml = dmin * static_cast<float>(sc >> 4);
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const int q = (qs[16 * half + i] >> shift) & 3;
          out[16 * half + i] = dl * static_cast<float>(q) - ml;
        }
      }
    } else if constexpr (T == TensorType::Q3_K) {
      const float d = f16_at(b + 108);
      const uint8_t* hm = b;
      const uint8_t* qs = b + 32 + 32 * (s / 4);
      const uint8_t* scales = b + 96;
      const int shift = 2 * (s % 4);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * s + half;
        const int lo = (scales[j % 8] >> (4 * (j / 8))) & 15;
        const int hi = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        const float dl = d * static_cast<float>((lo | (hi << 4)) - 32);
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const int e = 16 * half + i;
          const int q = ((qs[e] >> shift) & 3) - (((hm[e] >> s) & 1) ? 0 : 4);
          out[e] = dl * static_cast<float>(q);
        }
      }
    } else {  // Q6_K
      const float d = f16_at(b + 208);
      const uint8_t* ql = b + 64 * (s / 4) + 32 * ((s % 4) % 2);
      const int lshift = 4 * ((s % 4) / 2);
      const uint8_t* qh = b + 128 + 32 * (s / 4);
      const int hshift = 2 * (s % 4);
      const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float dl = d * static_cast<float>(scales[2 * s + half]);
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const int e = 16 * half + i;
          const int q = (((ql[e] >> lshift) & 15) | (((qh[e] >> hshift) & 3) << 4)) - 32;
          out[e] = dl * static_cast<float>(q);
        }
      }
    }
  }
}

template <TensorType T>
using TypeTag = std::integral_constant<TensorType, T>;

// Calls f(TypeTag<T>{}) for the runtime type t; false if t has no decoder.
template <class F>
bool dispatch_type(TensorType t, F&& f) {
  switch (t) {
    // clang-format off
    case TensorType::F32: f(TypeTag<TensorType::F32>{}); return true;
    case TensorType::F16: f(TypeTag<TensorType::F16>{}); return true;
    case TensorType::BF16: f(TypeTag<TensorType::BF16>{}); return true;
    case TensorType::Q4_0: f(TypeTag<TensorType::Q4_0>{}); return true;
    case TensorType::Q4_1: f(TypeTag<TensorType::Q4_1>{}); return true;
    case TensorType::Q5_0: f(TypeTag<TensorType::Q5_0>{}); return true;
    case TensorType::Q5_1: f(TypeTag<TensorType::Q5_1>{}); return true;
    case TensorType::Q8_0: f(TypeTag<TensorType::Q8_0>{}); return true;
    case TensorType::MXFP4: f(TypeTag<TensorType::MXFP4>{}); return true;
    case TensorType::Q2_K: f(TypeTag<TensorType::Q2_K>{}); return true;
    case TensorType::Q3_K: f(TypeTag<TensorType::Q3_K>{}); return true;
    case TensorType::Q4_K: f(TypeTag<TensorType::Q4_K>{}); return true;
    case TensorType::Q5_K: f(TypeTag<TensorType::Q5_K>{}); return true;
    case TensorType::Q6_K: f(TypeTag<TensorType::Q6_K>{}); return true;
    default: return false;
  }
  // clang-format on
}

}  // namespace minfer::cuda
