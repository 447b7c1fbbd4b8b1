// Per-type row kernels behind quant/reference.h, for use by its .cpp files
// only. Each takes a whole number of blocks (`nb`), trusts its arguments (the
// dispatcher has validated them) and reads/writes blocks through memcpy so
// the buffers need no alignment. Threading: no state.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace minfer::quant::detail {

// Block i of a row, copied out / in; keeps unaligned rows free of UB.
template <typename Block>
Block load_block(const void* row, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const unsigned char*>(row) + i * sizeof(Block), sizeof(Block));
  return b;
}
template <typename Block>
void store_block(void* row, int64_t i, const Block& b) {
  std::memcpy(static_cast<unsigned char*>(row) + i * sizeof(Block), &b, sizeof(Block));
}

// Truncates v toward zero after clamping to [lo, hi], so an out-of-range value
// can never reach an undefined float-to-int conversion.
inline int clamp_trunc(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

// Round half to even without consulting the floating-point environment; this
// is what ggml's nearest_int computes under the default rounding mode.
inline int round_half_even(float v) {
  const float fl = std::floor(v);
  const float frac = v - fl;  // exact for any float
  int r = static_cast<int>(fl);
  if (frac > 0.5f || (frac == 0.5f && (r & 1) != 0)) ++r;
  return r;
}

inline int clamp_int(int v, int lo, int hi) {
  return std::min(hi, std::max(lo, v));
}

void dequantize_q4_0(const void* src, float* dst, int64_t nb);
void dequantize_q4_1(const void* src, float* dst, int64_t nb);
void dequantize_q5_0(const void* src, float* dst, int64_t nb);
void dequantize_q5_1(const void* src, float* dst, int64_t nb);
void dequantize_q8_0(const void* src, float* dst, int64_t nb);
void dequantize_q8_1(const void* src, float* dst, int64_t nb);
void dequantize_q2_k(const void* src, float* dst, int64_t nb);
void dequantize_q3_k(const void* src, float* dst, int64_t nb);
void dequantize_q4_k(const void* src, float* dst, int64_t nb);
void dequantize_q5_k(const void* src, float* dst, int64_t nb);
void dequantize_q6_k(const void* src, float* dst, int64_t nb);
void dequantize_q8_k(const void* src, float* dst, int64_t nb);
void dequantize_mxfp4(const void* src, float* dst, int64_t nb);

void quantize_q4_0(const float* src, void* dst, int64_t nb);
void quantize_q4_1(const float* src, void* dst, int64_t nb);
void quantize_q5_0(const float* src, void* dst, int64_t nb);
void quantize_q5_1(const float* src, void* dst, int64_t nb);
void quantize_q8_0(const float* src, void* dst, int64_t nb);
void quantize_q8_1(const float* src, void* dst, int64_t nb);
void quantize_q2_k(const float* src, void* dst, int64_t nb);
void quantize_q3_k(const float* src, void* dst, int64_t nb);
void quantize_q4_k(const float* src, void* dst, int64_t nb);
void quantize_q5_k(const float* src, void* dst, int64_t nb);
void quantize_q6_k(const float* src, void* dst, int64_t nb);
void quantize_q8_k(const float* src, void* dst, int64_t nb);
void quantize_mxfp4(const float* src, void* dst, int64_t nb);

}  // namespace minfer::quant::detail
