// MXFP4 (OCP microscaling FP4, ggml's block_mxfp4): 32 E2M1 values sharing an
// E8M0 power-of-two scale. Dequantization is ggml's dequantize_row_mxfp4
// (doubled E2M1 integer times half the E8M0 scale, one exact f32 product).
// Quantization is ggml's quantize_row_mxfp4_ref:
//   - the shared exponent comes from the block's largest |x|:
//     e = floor(log2(amax)) - 2 + 127, with log2 rounded to f32 first (as
//     ggml's floorf(log2f(amax)) does), so that amax's binade maps to E2M1's
//     top binade [4, 8) and values up to 6 * 2^(e - 127) are representable;
//     e = 0 for an all-zero block;
//   - each value takes the E2M1 code whose doubled value times the half scale
//     is nearest to it, the first code in table order on ties (so +0 over -0,
//     and the smaller magnitude between two neighbours).
// One deliberate difference: a block whose amax is below 2^-125 would need
// e < 0, which ggml's uint8_t cast leaves undefined (gguf-py wraps it modulo
// 256); here e is clamped to 0, the smallest scale, which still represents
// such values to within half a step of 2^-128.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "quant/blocks.h"
#include "quant/reference_internal.h"

// Bit-exactness with ggml requires separate roundings (no FMA contraction).
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace minfer::quant::detail {
namespace {

constexpr int kHalf = kQK / 2;

// floor(log2(amax)) - 2 + 127 clamped to [0, 255], with log2 rounded to f32
// before the floor. The double log2 rounded once to f32 is the correctly
// rounded f32 log2 (double's extra precision leaves no ambiguous cases near
// the integers, where the rounding matters): just below a power of two of
// large enough exponent it rounds up to the integer, as log2f does in ggml
// and numpy's float32 log2 in gguf-py.
uint8_t shared_exponent(float amax) {
  if (!(amax > 0.0f)) return 0;
  const float l2 = static_cast<float>(std::log2(static_cast<double>(amax)));
  const int e = static_cast<int>(std::floor(l2)) - 2 + 127;
  return static_cast<uint8_t>(std::clamp(e, 0, 255));
}

// The first code of least |kMxfp4Values[code] * d - x| (ggml's best_index_mxfp4).
uint8_t nearest_code(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

}  // namespace

void dequantize_mxfp4(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockMxfp4>(src, i);
    const float d = mxfp4_half_scale(b.e);
    float* y = dst + i * kQK;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = static_cast<float>(kMxfp4Values[b.qs[j] & 0x0f]) * d;
      y[j + kHalf] = static_cast<float>(kMxfp4Values[b.qs[j] >> 4]) * d;
    }
  }
}

void quantize_mxfp4(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    BlockMxfp4 b;
    b.e = shared_exponent(amax);
    const float d = mxfp4_half_scale(b.e);
    for (int j = 0; j < kHalf; ++j) {
      b.qs[j] = static_cast<uint8_t>(nearest_code(x[j], d) | (nearest_code(x[j + kHalf], d) << 4));
    }
    store_block(dst, i, b);
  }
}

}  // namespace minfer::quant::detail
