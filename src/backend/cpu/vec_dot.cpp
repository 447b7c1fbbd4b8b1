#include "backend/cpu/vec_dot.h"

#include <cstdlib>
#include <cstring>

#include "backend/cpu/vec_dot_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace minfer::cpu {
namespace {

using quant::TensorType;

struct Kernels {
  TensorType vec_dot_type;
  DotFn scalar;
  DotFn avx2;  // nullptr: no AVX2 version, use scalar
};

bool find_kernels(TensorType weight, Kernels* out) {
  using namespace detail;
#if defined(__x86_64__) || defined(__i386__)
#define MINFER_X86(fn) fn
#else
#define MINFER_X86(fn) nullptr
#endif
  switch (weight) {
    case TensorType::F32:
      *out = {TensorType::F32, dot_f32_scalar, MINFER_X86(dot_f32_avx2)};
      return true;
    case TensorType::F16:
      *out = {TensorType::F16, dot_f16_scalar, MINFER_X86(dot_f16_avx2)};
      return true;
    case TensorType::BF16:
      *out = {TensorType::BF16, dot_bf16_scalar, nullptr};
      return true;
    case TensorType::Q4_0:
      *out = {TensorType::Q8_0, dot_q4_0_scalar, MINFER_X86(dot_q4_0_avx2)};
      return true;
    case TensorType::Q4_1:
      *out = {TensorType::Q8_1, dot_q4_1_scalar, nullptr};
      return true;
    case TensorType::Q5_0:
      *out = {TensorType::Q8_0, dot_q5_0_scalar, MINFER_X86(dot_q5_0_avx2)};
      return true;
    case TensorType::Q5_1:
      *out = {TensorType::Q8_1, dot_q5_1_scalar, nullptr};
      return true;
    case TensorType::Q8_0:
      *out = {TensorType::Q8_0, dot_q8_0_scalar, MINFER_X86(dot_q8_0_avx2)};
      return true;
    case TensorType::Q2_K:
      *out = {TensorType::Q8_K, dot_q2_k_scalar, MINFER_X86(dot_q2_k_avx2)};
      return true;
    case TensorType::Q3_K:
      *out = {TensorType::Q8_K, dot_q3_k_scalar, MINFER_X86(dot_q3_k_avx2)};
      return true;
    case TensorType::Q4_K:
      *out = {TensorType::Q8_K, dot_q4_k_scalar, MINFER_X86(dot_q4_k_avx2)};
      return true;
    case TensorType::Q5_K:
      *out = {TensorType::Q8_K, dot_q5_k_scalar, MINFER_X86(dot_q5_k_avx2)};
      return true;
    case TensorType::Q6_K:
      *out = {TensorType::Q8_K, dot_q6_k_scalar, MINFER_X86(dot_q6_k_avx2)};
      return true;
    default:
      return false;
  }
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

}  // namespace

namespace detail {
Isa choose_isa(bool cpu_has_avx2, const char* force_scalar_env) {
  if (force_scalar_env != nullptr && force_scalar_env[0] != '\0' &&
      std::strcmp(force_scalar_env, "0") != 0) {
    return Isa::kScalar;
  }
  return cpu_has_avx2 ? Isa::kAvx2 : Isa::kScalar;
}
}  // namespace detail

Isa active_isa() {
  static const Isa isa = detail::choose_isa(cpu_has_avx2(), std::getenv("MINFER_CPU_SCALAR"));
  return isa;
}

bool isa_supported(Isa isa) {
  static const bool avx2 = cpu_has_avx2();
  return isa == Isa::kScalar || avx2;
}

std::string isa_name(Isa isa) {
  return isa == Isa::kAvx2 ? "avx2" : "scalar";
}

Result<quant::TensorType> vec_dot_type(quant::TensorType weight) {
  Kernels k;
  if (!find_kernels(weight, &k)) {
    return Status::error("cpu: no dot product kernel for weight type " +
                         std::string(quant::type_name(weight)));
  }
  return k.vec_dot_type;
}

DotFn dot_kernel(quant::TensorType weight, Isa isa) {
  Kernels k;
  if (!find_kernels(weight, &k)) return nullptr;
  if (isa == Isa::kAvx2 && k.avx2 != nullptr && isa_supported(Isa::kAvx2)) return k.avx2;
  return k.scalar;
}

Status dot_args_ok(quant::TensorType weight, int64_t n) {
  Kernels k;
  if (!find_kernels(weight, &k)) {
    return Status::error("cpu: no dot product kernel for weight type " +
                         std::string(quant::type_name(weight)));
  }
  const int64_t block = quant::type_traits(weight).block_size;
  if (n < 0 || n % block != 0) {
    return Status::error("cpu: dot product of " + std::string(quant::type_name(weight)) +
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
