// Per-type dot kernels behind backend/cpu/vec_dot.h; for the vec_dot*.cpp
// files and the tests that pin each ISA. Arguments are trusted (see vec_dot.h).
// Blocks are copied out with memcpy because rows inside a mapped GGUF file
// need not be aligned. Threading: no state.
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/cpu/vec_dot.h"

namespace minfer::cpu::detail {

// The best ISA this CPU supports (what dot() uses unless forced to scalar).
Isa best_supported_isa();

// The ISA dot() uses, given the best one the CPU supports and whether
// CpuOptions::cpu_scalar (MINFER_CPU_SCALAR) forces scalar kernels.
Isa choose_isa(Isa best_supported, bool force_scalar);

template <typename Block>
inline Block load_block(const void* row, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const unsigned char*>(row) + i * static_cast<int64_t>(sizeof(Block)),
              sizeof(Block));
  return b;
}

float dot_f32_scalar(int64_t n, const void* w, const void* x);
float dot_f16_scalar(int64_t n, const void* w, const void* x);
float dot_bf16_scalar(int64_t n, const void* w, const void* x);
float dot_q4_0_scalar(int64_t n, const void* w, const void* x);
float dot_q4_1_scalar(int64_t n, const void* w, const void* x);
float dot_q5_0_scalar(int64_t n, const void* w, const void* x);
float dot_q5_1_scalar(int64_t n, const void* w, const void* x);
float dot_q8_0_scalar(int64_t n, const void* w, const void* x);
float dot_mxfp4_scalar(int64_t n, const void* w, const void* x);
float dot_q2_k_scalar(int64_t n, const void* w, const void* x);
float dot_q3_k_scalar(int64_t n, const void* w, const void* x);
float dot_q4_k_scalar(int64_t n, const void* w, const void* x);
float dot_q5_k_scalar(int64_t n, const void* w, const void* x);
float dot_q6_k_scalar(int64_t n, const void* w, const void* x);

// Defined only on x86; callers check isa_supported(Isa::kAvx2) first.
float dot_f32_avx2(int64_t n, const void* w, const void* x);
float dot_f16_avx2(int64_t n, const void* w, const void* x);
float dot_bf16_avx2(int64_t n, const void* w, const void* x);
float dot_q4_0_avx2(int64_t n, const void* w, const void* x);
float dot_q4_1_avx2(int64_t n, const void* w, const void* x);
float dot_q5_0_avx2(int64_t n, const void* w, const void* x);
float dot_q5_1_avx2(int64_t n, const void* w, const void* x);
float dot_q8_0_avx2(int64_t n, const void* w, const void* x);
float dot_mxfp4_avx2(int64_t n, const void* w, const void* x);
float dot_q2_k_avx2(int64_t n, const void* w, const void* x);
float dot_q3_k_avx2(int64_t n, const void* w, const void* x);
float dot_q4_k_avx2(int64_t n, const void* w, const void* x);
float dot_q5_k_avx2(int64_t n, const void* w, const void* x);
float dot_q6_k_avx2(int64_t n, const void* w, const void* x);

// Defined only on AArch64 (NEON is part of ARMv8.0).
float dot_f32_neon(int64_t n, const void* w, const void* x);
float dot_f16_neon(int64_t n, const void* w, const void* x);
float dot_bf16_neon(int64_t n, const void* w, const void* x);
float dot_q4_0_neon(int64_t n, const void* w, const void* x);
float dot_q4_1_neon(int64_t n, const void* w, const void* x);
float dot_q5_0_neon(int64_t n, const void* w, const void* x);
float dot_q5_1_neon(int64_t n, const void* w, const void* x);
float dot_q8_0_neon(int64_t n, const void* w, const void* x);
float dot_mxfp4_neon(int64_t n, const void* w, const void* x);
float dot_q2_k_neon(int64_t n, const void* w, const void* x);
float dot_q3_k_neon(int64_t n, const void* w, const void* x);
float dot_q4_k_neon(int64_t n, const void* w, const void* x);
float dot_q5_k_neon(int64_t n, const void* w, const void* x);
float dot_q6_k_neon(int64_t n, const void* w, const void* x);

// Defined only on AArch64; callers check isa_supported(Isa::kNeonDotprod) first.
float dot_q4_0_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_q4_1_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_q5_0_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_q5_1_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_q8_0_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_mxfp4_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_q2_k_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_q3_k_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_q4_k_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_q5_k_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_q6_k_neon_dotprod(int64_t n, const void* w, const void* x);

}  // namespace minfer::cpu::detail
