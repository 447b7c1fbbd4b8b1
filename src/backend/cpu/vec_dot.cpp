#include "backend/cpu/vec_dot.h"

#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_options.h"
#include "backend/cpu/vec_dot_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)  // linux/arch/arm64/include/uapi/asm/hwcap.h
#endif
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

namespace minfer::cpu {
namespace {

using quant::TensorType;

struct Kernels {
  TensorType vec_dot_type;
  DotFn scalar;
  DotFn avx2;          // nullptr: no AVX2 version (non-x86 builds), use scalar
  DotFn neon;          // nullptr: no NEON version, use scalar
  DotFn neon_dotprod;  // nullptr: no SDOT version, use neon
};

bool find_kernels(TensorType weight, Kernels* out) {
  using namespace detail;
#if defined(__x86_64__) || defined(__i386__)
#define MINFER_X86(fn) fn
#else
#define MINFER_X86(fn) nullptr
#endif
#if defined(__aarch64__)
#define MINFER_ARM(fn) fn
#else
#define MINFER_ARM(fn) nullptr
#endif
  // One row per type: the three SIMD kernels named after the scalar one.
#define MINFER_KERNELS(act, name, avx2)                                              \
  *out = {TensorType::act, dot_##name##_scalar, avx2, MINFER_ARM(dot_##name##_neon), \
          MINFER_ARM(dot_##name##_neon_dotprod)};                                    \
  return true
  switch (weight) {
    case TensorType::F32:
      *out = {TensorType::F32, dot_f32_scalar, MINFER_X86(dot_f32_avx2), MINFER_ARM(dot_f32_neon),
              nullptr};
      return true;
    case TensorType::F16:
      *out = {TensorType::F16, dot_f16_scalar, MINFER_X86(dot_f16_avx2), MINFER_ARM(dot_f16_neon),
              nullptr};
      return true;
    case TensorType::BF16:
      *out = {TensorType::BF16, dot_bf16_scalar, MINFER_X86(dot_bf16_avx2),
              MINFER_ARM(dot_bf16_neon), nullptr};
      return true;
    case TensorType::Q4_0:
      MINFER_KERNELS(Q8_0, q4_0, MINFER_X86(dot_q4_0_avx2));
    case TensorType::Q4_1:
      MINFER_KERNELS(Q8_1, q4_1, MINFER_X86(dot_q4_1_avx2));
    case TensorType::Q5_0:
      MINFER_KERNELS(Q8_0, q5_0, MINFER_X86(dot_q5_0_avx2));
    case TensorType::Q5_1:
      MINFER_KERNELS(Q8_1, q5_1, MINFER_X86(dot_q5_1_avx2));
    case TensorType::Q8_0:
      MINFER_KERNELS(Q8_0, q8_0, MINFER_X86(dot_q8_0_avx2));
    case TensorType::MXFP4:
      MINFER_KERNELS(Q8_0, mxfp4, MINFER_X86(dot_mxfp4_avx2));
    case TensorType::Q2_K:
      MINFER_KERNELS(Q8_K, q2_k, MINFER_X86(dot_q2_k_avx2));
    case TensorType::Q3_K:
      MINFER_KERNELS(Q8_K, q3_k, MINFER_X86(dot_q3_k_avx2));
    case TensorType::Q4_K:
      MINFER_KERNELS(Q8_K, q4_k, MINFER_X86(dot_q4_k_avx2));
    case TensorType::Q5_K:
      MINFER_KERNELS(Q8_K, q5_k, MINFER_X86(dot_q5_k_avx2));
    case TensorType::Q6_K:
      MINFER_KERNELS(Q8_K, q6_k, MINFER_X86(dot_q6_k_avx2));
    default:
      return false;
  }
#undef MINFER_KERNELS
#undef MINFER_ARM
#undef MINFER_X86
}

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
             f16c = c & (1u << 29);
  if (!(fma && osxsave && avx && f16c)) return false;
  // The OS must save the YMM registers across context switches.
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 6u) != 6u) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return b & (1u << 5);
#else
  return false;
#endif
}

// ARMv8.2 FEAT_DotProd (SDOT/UDOT), as the operating system reports it.
bool cpu_has_neon_dotprod() {
#if defined(__aarch64__) && defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#elif defined(__aarch64__) && defined(__APPLE__)
  int value = 0;
  size_t size = sizeof(value);
  return sysctlbyname("hw.optional.arm.FEAT_DotProd", &value, &size, nullptr, 0) == 0 && value != 0;
#else
  return false;
#endif
}

struct CpuFeatures {
  bool avx2 = cpu_has_avx2();
  bool neon_dotprod = cpu_has_neon_dotprod();
};

const CpuFeatures& cpu_features() {
  static const CpuFeatures features;
  return features;
}

}  // namespace

namespace detail {
Isa best_supported_isa() {
  for (Isa isa : {Isa::kAvx2, Isa::kNeonDotprod, Isa::kNeon}) {
    if (isa_supported(isa)) return isa;
  }
  return Isa::kScalar;
}

Isa choose_isa(Isa best_supported, bool force_scalar) {
  return force_scalar ? Isa::kScalar : best_supported;
}
}  // namespace detail

Isa active_isa() {
  static const Isa isa =
      detail::choose_isa(detail::best_supported_isa(), process_section<CpuOptions>().cpu_scalar);
  return isa;
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return cpu_features().avx2;
    case Isa::kNeon:
#if defined(__aarch64__)
      return true;
#else
      return false;
#endif
    case Isa::kNeonDotprod:
      return cpu_features().neon_dotprod;
  }
  return false;
}

std::string isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx2:
      return "avx2";
    case Isa::kNeon:
      return "neon";
    case Isa::kNeonDotprod:
      return "neon-dotprod";
    case Isa::kScalar:
      break;
  }
  return "scalar";
}

Result<quant::TensorType> vec_dot_type(quant::TensorType weight) {
  Kernels k;
  if (!find_kernels(weight, &k)) {
    return Status::unimplemented("cpu: no dot product kernel for weight type " +
                                 std::string(quant::type_name(weight)));
  }
  return k.vec_dot_type;
}

DotFn dot_kernel(quant::TensorType weight, Isa isa) {
  Kernels k;
  if (!find_kernels(weight, &k)) return nullptr;
  if (!isa_supported(isa)) return k.scalar;
  switch (isa) {
    case Isa::kAvx2:
      return k.avx2 != nullptr ? k.avx2 : k.scalar;
    case Isa::kNeonDotprod:
      if (k.neon_dotprod != nullptr) return k.neon_dotprod;
      [[fallthrough]];
    case Isa::kNeon:
      return k.neon != nullptr ? k.neon : k.scalar;
    case Isa::kScalar:
      break;
  }
  return k.scalar;
}

Status dot_args_ok(quant::TensorType weight, int64_t n) {
  Kernels k;
  if (!find_kernels(weight, &k)) {
    return Status::unimplemented("cpu: no dot product kernel for weight type " +
                                 std::string(quant::type_name(weight)));
  }
  const int64_t block = quant::type_traits(weight).block_size;
  if (n < 0 || n % block != 0) {
    return Status::unimplemented("cpu: dot product of " + std::string(quant::type_name(weight)) +
                                 " rows: length " + std::to_string(n) +
                                 " is not a non-negative multiple of the block size " +
                                 std::to_string(block));
  }
  return Status::ok();
}

float dot(quant::TensorType weight, int64_t n, const void* w_row, const void* x_row) {
  return dot_kernel(weight, active_isa())(n, w_row, x_row);
}

}  // namespace minfer::cpu
