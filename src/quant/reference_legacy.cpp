// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1: 32-element blocks with one or two f16
// scales. The quantizers reproduce ggml's reference rounding exactly (argmax
// tie-breaking, truncation after +0.5 / +8.5 / +16.5, roundf for Q8), which
// the golden tests check byte for byte against the gguf Python package.
#include <cmath>
#include <cstdint>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/reference_internal.h"

// Bit-exactness with other implementations requires that a*b+c stays two
// roundings on every target (ARM and x86-with-FMA builds would fuse it).
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace minfer::quant::detail {
namespace {

constexpr int kHalf = kQK / 2;

// Element e's nibble: low nibbles hold the first half of the block.
inline int nibble(const uint8_t* qs, int e) {
  return e < kHalf ? (qs[e] & 0x0f) : (qs[e - kHalf] >> 4);
}

inline void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < kHalf; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + kHalf] & 0x0f) << 4));
  }
}

inline uint32_t load_qh(const uint8_t* qh) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

inline void store_qh(const int* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int e = 0; e < kQK; ++e) bits |= static_cast<uint32_t>((q[e] >> 4) & 1) << e;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(bits >> (8 * k));
}

// The signed value of largest magnitude; the first one wins ties, as in ggml.
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

inline void min_max(const float* x, int n, float* lo, float* hi) {
  *lo = x[0];
  *hi = x[0];
  for (int i = 1; i < n; ++i) {
    *lo = std::min(*lo, x[i]);
    *hi = std::max(*hi, x[i]);
  }
}

inline float abs_max(const float* x, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// Symmetric 2^bits-level quantization: the extreme value maps to the most
// negative level, -(2^(bits-1)), which has the larger magnitude of the range.
void quantize_symmetric(const float* x, int bits, uint16_t* d_out, int* q) {
  const int levels = 1 << bits;
  const int offset = levels / 2;
  const float d = signed_absmax(x, kQK) / static_cast<float>(-offset);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = f32_to_f16(d);
  for (int e = 0; e < kQK; ++e) {
    q[e] = clamp_trunc(x[e] * id + (static_cast<float>(offset) + 0.5f), 0, levels - 1);
  }
}

// Affine quantization x = d * q + min over [min, max].
void quantize_affine(const float* x, int bits, uint16_t* d_out, uint16_t* m_out, int* q) {
  const int levels = 1 << bits;
  float lo = 0.0f;
  float hi = 0.0f;
  min_max(x, kQK, &lo, &hi);
  const float d = (hi - lo) / static_cast<float>(levels - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = f32_to_f16(d);
  *m_out = f32_to_f16(lo);
  for (int e = 0; e < kQK; ++e) q[e] = clamp_trunc((x[e] - lo) * id + 0.5f, 0, levels - 1);
}

// Q8 blocks: d = amax / 127 and q = roundf(x * (1 / d)); returns sum(q).
int quantize_q8_block(const float* x, uint16_t* d_out, int8_t* qs, float* d_f32) {
  const float d = abs_max(x, kQK) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = f32_to_f16(d);
  *d_f32 = d;
  int sum = 0;
  for (int e = 0; e < kQK; ++e) {
    const float r = std::round(x[e] * id);  // half away from zero, like C's roundf
    // A block of subnormals can make 1 / d overflow: its zeros give 0 * inf,
    // a NaN, which becomes 0 (what ggml's conversion to int8 yields on x86).
    qs[e] = std::isnan(r) ? int8_t{0}
                          : static_cast<int8_t>(r < -127.0f  ? -127
                                                : r > 127.0f ? 127
                                                             : static_cast<int>(r));
    sum += qs[e];
  }
  return sum;
}

}  // namespace

void dequantize_q4_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK) {
    const auto b = load_block<BlockQ4_0>(src, i);
    const float d = f16_to_f32(b.d);
    for (int e = 0; e < kQK; ++e) dst[e] = static_cast<float>(nibble(b.qs, e) - 8) * d;
  }
}

void dequantize_q4_1(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK) {
    const auto b = load_block<BlockQ4_1>(src, i);
    const float d = f16_to_f32(b.d);
    const float m = f16_to_f32(b.m);
    for (int e = 0; e < kQK; ++e) dst[e] = static_cast<float>(nibble(b.qs, e)) * d + m;
  }
}

void dequantize_q5_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK) {
    const auto b = load_block<BlockQ5_0>(src, i);
    const float d = f16_to_f32(b.d);
    const uint32_t qh = load_qh(b.qh);
    for (int e = 0; e < kQK; ++e) {
      const int q = nibble(b.qs, e) | static_cast<int>(((qh >> e) & 1u) << 4);
      dst[e] = static_cast<float>(q - 16) * d;
    }
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK) {
    const auto b = load_block<BlockQ5_1>(src, i);
    const float d = f16_to_f32(b.d);
    const float m = f16_to_f32(b.m);
    const uint32_t qh = load_qh(b.qh);
    for (int e = 0; e < kQK; ++e) {
      const int q = nibble(b.qs, e) | static_cast<int>(((qh >> e) & 1u) << 4);
      dst[e] = static_cast<float>(q) * d + m;
    }
  }
}

void dequantize_q8_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK) {
    const auto b = load_block<BlockQ8_0>(src, i);
    const float d = f16_to_f32(b.d);
    for (int e = 0; e < kQK; ++e) dst[e] = static_cast<float>(b.qs[e]) * d;
  }
}

void dequantize_q8_1(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK) {
    const auto b = load_block<BlockQ8_1>(src, i);
    const float d = f16_to_f32(b.d);
    for (int e = 0; e < kQK; ++e) dst[e] = static_cast<float>(b.qs[e]) * d;
  }
}

void quantize_q4_0(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK) {
    BlockQ4_0 b{};
    int q[kQK];
    quantize_symmetric(src, 4, &b.d, q);
    pack_nibbles(q, b.qs);
    store_block(dst, i, b);
  }
}

void quantize_q4_1(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK) {
    BlockQ4_1 b{};
    int q[kQK];
    quantize_affine(src, 4, &b.d, &b.m, q);
    pack_nibbles(q, b.qs);
    store_block(dst, i, b);
  }
}

void quantize_q5_0(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK) {
    BlockQ5_0 b{};
    int q[kQK];
    quantize_symmetric(src, 5, &b.d, q);
    pack_nibbles(q, b.qs);
    store_qh(q, b.qh);
    store_block(dst, i, b);
  }
}

void quantize_q5_1(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK) {
    BlockQ5_1 b{};
    int q[kQK];
    quantize_affine(src, 5, &b.d, &b.m, q);
    pack_nibbles(q, b.qs);
    store_qh(q, b.qh);
    store_block(dst, i, b);
  }
}

void quantize_q8_0(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK) {
    BlockQ8_0 b{};
    float d = 0.0f;
    (void)quantize_q8_block(src, &b.d, b.qs, &d);
    store_block(dst, i, b);
  }
}

void quantize_q8_1(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK) {
    BlockQ8_1 b{};
    float d = 0.0f;
    const int sum = quantize_q8_block(src, &b.d, b.qs, &d);
    // The unrounded f32 d, not the stored f16 one, as ggml does.
    b.s = f32_to_f16(static_cast<float>(sum) * d);
    store_block(dst, i, b);
  }
}

}  // namespace minfer::quant::detail
