// Dot products between one weight row and one activation row, on the raw
// encoded blocks, with the numerics of ggml's CPU backend.
//
// Contract: as in llama.cpp, a matmul first converts each activation row to
// the weight type's vec_dot_type (Q8_0 for Q4_0/Q5_0/Q8_0/MXFP4, Q8_1 for Q4_1/Q5_1,
// Q8_K for the K-quants, the weight's own type for F32/F16/BF16; use
// quant::quantize_row) and then takes integer dot products block by block,
// scaling each block sum by the two block scales.
//   - The scalar kernels follow ggml's generic C code operation by operation
//     (same integer sums, same float products, same accumulation order), so
//     they reproduce a non-SIMD ggml build bit for bit (neither contracting
//     products into FMAs).
//   - The AVX2 kernels (every type) compute the same integer block sums but
//     accumulate the scaled block sums in 8-lane f32 vectors, as ggml's AVX2
//     code does (the K-quants not necessarily in ggml's order), and differ
//     from the scalar ones only by float rounding.
//     Q4_0/Q5_0/Q8_0/MXFP4 use one accumulator in block order, as ggml's
//     AVX2 code does (MXFP4's block scale is f16(d_x) times half the E8M0
//     scale, as in ggml); Q4_1/Q5_1 also use one, with the offsets m_w * s_x (s from
//     the Q8_1 block) summed apart in f32 and added at the end. F16/F32
//     mirror ggml's AVX2 ggml_vec_dot_f16/f32 exactly (4x8-lane
//     accumulators); BF16 has four 8-lane FMA accumulators too (even and odd
//     elements apart, reduced as F16).
//   - The NEON kernels (AArch64) exist for every type and, like the AVX2
//     ones, compute the same integer block sums as the scalar kernels and
//     differ from them only by float rounding (4-lane f32 accumulators; not
//     ggml's NEON order). kNeon forms int8 products with ARMv8.0 widening
//     multiplies, kNeonDotprod with the ARMv8.2 SDOT instruction (integer
//     formats only; its F32/F16/BF16 kernels are kNeon's).
// A kernel trusts its arguments: n must be a non-negative multiple of the
// type's block size (check with dot_args_ok or let matmul validate), both
// rows must hold n elements, and rows need no alignment.
// Kernel choice: the best ISA the CPU supports (AVX2 on x86, NEON with
// dotprod where the CPU reports it, else NEON, on AArch64), unless
// MINFER_CPU_SCALAR=1 is set (process_section<CpuOptions>(), read once, at first use),
// which forces scalar.
// Threading: pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "quant/tensor_type.h"

namespace minfer::cpu {

enum class Isa { kScalar, kAvx2, kNeon, kNeonDotprod };

// The instruction set whose kernels dot() uses (CPU features + env override).
Isa active_isa();
// Whether this CPU can run kernels of `isa` (AVX2 needs AVX2, FMA and F16C;
// kNeon an AArch64 build; kNeonDotprod also a CPU with FEAT_DotProd).
bool isa_supported(Isa isa);
std::string isa_name(Isa isa);

// The activation encoding a dot product with `weight` rows expects. Errors
// for types without a CPU dot kernel (the message names the type).
Result<quant::TensorType> vec_dot_type(quant::TensorType weight);

// w_row: n elements of `weight` type; x_row: n elements of vec_dot_type(weight).
using DotFn = float (*)(int64_t n, const void* w_row, const void* x_row);

// The kernel for `weight` in the given ISA, or nullptr if the type has no dot
// kernel. Types without a kernel of that ISA get the next best one
// (kNeonDotprod -> kNeon -> scalar, kAvx2 -> scalar), and so does an ISA the
// CPU does not support.
DotFn dot_kernel(quant::TensorType weight, Isa isa);

// Ok if `weight` has a dot kernel and n is a non-negative multiple of its
// block size; otherwise an error naming the type and n.
Status dot_args_ok(quant::TensorType weight, int64_t n);

// dot_kernel(weight, active_isa())(n, w_row, x_row). Preconditions as above.
float dot(quant::TensorType weight, int64_t n, const void* w_row, const void* x_row);

}  // namespace minfer::cpu
