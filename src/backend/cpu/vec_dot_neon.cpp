// NEON dot kernels for every AArch64 CPU (Advanced SIMD is part of ARMv8.0):
// F32, F16 and BF16 with 8 x 4-lane f32 FMA accumulators (32 elements per
// step, as the AVX2 kernels), and the integer formats of
// backend/cpu/vec_dot_neon_impl.h with int8 products formed by widening
// multiplies. The ARMv8.2 dot-product versions are in vec_dot_neon_dotprod.cpp.
#if defined(__aarch64__)

#include <arm_neon.h>

#include "backend/cpu/vec_dot_internal.h"
#include "backend/cpu/vec_dot_neon_impl.h"

namespace minfer::cpu::detail {
namespace {

// 16 int8 x int8 products widened to int16 (|product| <= 2^14, exact) and
// added pairwise into the four int32 lanes.
struct WideningDot {
  static int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
  }
};

constexpr int kLanes = 32;  // elements per step of the float kernels

inline float reduce8(float32x4_t s[8]) {
  for (int step = 4; step > 0; step /= 2) {
    for (int j = 0; j < step; ++j) s[j] = vaddq_f32(s[j], s[j + step]);
  }
  return vaddvq_f32(s[0]);
}

// sum_i widen(a[i]) * widen(b[i]) where Load(p, i) returns elements i..i+3 as f32.
template <typename T, float32x4_t (*Load)(const T*), float (*Scalar)(T)>
float dot_float_rows(int64_t n, const void* w, const void* x) {
  const T* a = static_cast<const T*>(w);
  const T* b = static_cast<const T*>(x);
  const int64_t np = n & ~int64_t{kLanes - 1};
  float32x4_t s[8];
  for (float32x4_t& v : s) v = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < np; i += kLanes) {
    for (int j = 0; j < 8; ++j) s[j] = vfmaq_f32(s[j], Load(a + i + 4 * j), Load(b + i + 4 * j));
  }
  double sum = reduce8(s);
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(Scalar(a[i]) * Scalar(b[i]));
  return static_cast<float>(sum);
}

float32x4_t load_f32(const float* p) {
  return vld1q_f32(p);
}
float32x4_t load_f16(const uint16_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
float32x4_t load_bf16(const uint16_t* p) {
  return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}
float scalar_f32(float v) {
  return v;
}
float scalar_f16(uint16_t h) {
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}
float scalar_bf16(uint16_t h) {
  return vgetq_lane_f32(vreinterpretq_f32_u32(vshll_n_u16(vdup_n_u16(h), 16)), 0);
}

}  // namespace

float dot_f32_neon(int64_t n, const void* w, const void* x) {
  return dot_float_rows<float, load_f32, scalar_f32>(n, w, x);
}
float dot_f16_neon(int64_t n, const void* w, const void* x) {
  return dot_float_rows<uint16_t, load_f16, scalar_f16>(n, w, x);
}
float dot_bf16_neon(int64_t n, const void* w, const void* x) {
  return dot_float_rows<uint16_t, load_bf16, scalar_bf16>(n, w, x);
}

float dot_q4_0_neon(int64_t n, const void* w, const void* x) {
  return neon::dot_q8_0_blocks<WideningDot, neon::Q4_0Format>(n, w, x);
}
float dot_q4_1_neon(int64_t n, const void* w, const void* x) {
  return neon::dot_q8_1_blocks<WideningDot, neon::Q4_1Format>(n, w, x);
}
float dot_q5_0_neon(int64_t n, const void* w, const void* x) {
  return neon::dot_q8_0_blocks<WideningDot, neon::Q5_0Format>(n, w, x);
}
float dot_q5_1_neon(int64_t n, const void* w, const void* x) {
  return neon::dot_q8_1_blocks<WideningDot, neon::Q5_1Format>(n, w, x);
}
float dot_q8_0_neon(int64_t n, const void* w, const void* x) {
  return neon::dot_q8_0_blocks<WideningDot, neon::Q8_0Format>(n, w, x);
}
float dot_mxfp4_neon(int64_t n, const void* w, const void* x) {
  return neon::dot_q8_0_blocks<WideningDot, neon::Mxfp4Format>(n, w, x);
}
float dot_q2_k_neon(int64_t n, const void* w, const void* x) {
  return neon::dot_q2_k<WideningDot>(n, w, x);
}
float dot_q3_k_neon(int64_t n, const void* w, const void* x) {
  return neon::dot_q3_k<WideningDot>(n, w, x);
}
float dot_q4_k_neon(int64_t n, const void* w, const void* x) {
  return neon::dot_k4<WideningDot, quant::BlockQ4_K>(n, w, x);
}
float dot_q5_k_neon(int64_t n, const void* w, const void* x) {
  return neon::dot_k4<WideningDot, quant::BlockQ5_K>(n, w, x);
}
float dot_q6_k_neon(int64_t n, const void* w, const void* x) {
  return neon::dot_q6_k<WideningDot>(n, w, x);
}

}  // namespace minfer::cpu::detail

#endif  // __aarch64__
