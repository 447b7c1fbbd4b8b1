// The integer NEON dot kernels of backend/cpu/vec_dot_neon_impl.h with int8
// products formed by SDOT (ARMv8.2 FEAT_DotProd: 16 products into 4 int32
// lanes in one instruction). CMakeLists.txt builds this one file with
// -march=armv8.2-a+dotprod; vec_dot.cpp calls it only when the CPU reports
// the feature (Linux: HWCAP_ASIMDDP; macOS: hw.optional.arm.FEAT_DotProd).
#if defined(__aarch64__)

#if !defined(__ARM_FEATURE_DOTPROD)
#error "vec_dot_neon_dotprod.cpp must be compiled with +dotprod (see CMakeLists.txt)"
#endif

#include <arm_neon.h>

#include "backend/cpu/vec_dot_internal.h"
#include "backend/cpu/vec_dot_neon_impl.h"

namespace minfer::cpu::detail {
namespace {

struct SdotDot {
  static int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }
};

}  // namespace

float dot_q4_0_neon_dotprod(int64_t n, const void* w, const void* x) {
  return neon::dot_q8_0_blocks<SdotDot, neon::Q4_0Format>(n, w, x);
}
float dot_q4_1_neon_dotprod(int64_t n, const void* w, const void* x) {
  return neon::dot_q8_1_blocks<SdotDot, neon::Q4_1Format>(n, w, x);
}
float dot_q5_0_neon_dotprod(int64_t n, const void* w, const void* x) {
  return neon::dot_q8_0_blocks<SdotDot, neon::Q5_0Format>(n, w, x);
}
float dot_q5_1_neon_dotprod(int64_t n, const void* w, const void* x) {
  return neon::dot_q8_1_blocks<SdotDot, neon::Q5_1Format>(n, w, x);
}
float dot_q8_0_neon_dotprod(int64_t n, const void* w, const void* x) {
  return neon::dot_q8_0_blocks<SdotDot, neon::Q8_0Format>(n, w, x);
}
float dot_mxfp4_neon_dotprod(int64_t n, const void* w, const void* x) {
  return neon::dot_q8_0_blocks<SdotDot, neon::Mxfp4Format>(n, w, x);
}
float dot_q2_k_neon_dotprod(int64_t n, const void* w, const void* x) {
  return neon::dot_q2_k<SdotDot>(n, w, x);
}
float dot_q3_k_neon_dotprod(int64_t n, const void* w, const void* x) {
  return neon::dot_q3_k<SdotDot>(n, w, x);
}
float dot_q4_k_neon_dotprod(int64_t n, const void* w, const void* x) {
  return neon::dot_k4<SdotDot, quant::BlockQ4_K>(n, w, x);
}
float dot_q5_k_neon_dotprod(int64_t n, const void* w, const void* x) {
  return neon::dot_k4<SdotDot, quant::BlockQ5_K>(n, w, x);
}
float dot_q6_k_neon_dotprod(int64_t n, const void* w, const void* x) {
  return neon::dot_q6_k<SdotDot>(n, w, x);
}

}  // namespace minfer::cpu::detail

#endif  // __aarch64__
