// Decode matmul with AVX-512 VNNI: the single-token GEMV for Q4_K and Q6_K
// weights on CPUs with AVX-512 F/BW/VL/DQ and VNNI (vnni_gemm_available()).
//
// Contract: vnni_gemv computes y[r] = dot(W row r, x) for every r in
// [r_begin, r_end) of one GemmProblem (backend/cpu/matmul_gemm.h) whose
// single x row was converted by vnni_gemv_prepare_x (x_stride unused, y is
// indexed by row; ldy = the matrix's row count, which bounds the prefetch).
// Activations: quantized once per matmul to Q8_K (quant::quantize_row, the
// same quants as the AVX2 kernels), then laid out per 256-element super-block
// as {f32 d, 8 i16 sums of 32 quants at byte 16, the 16 i16 Q8_K bsums at
// byte 32, 256 quants at byte 64}; Q4_K's quants are reordered so that one
// 64-byte load of its packed nibbles lines up with one 64-byte load of them.
// Kernel: passes of 4 rows share each super-block's activation loads; per row
// and super-block, vpdpbusd multiplies the unsigned 4/6-bit quants with the
// int8 activations (4 products per i32 lane, |lane| < 2^15), vpdpwssd applies
// each lane's sub-block scale, Q6_K's -32 offset is -32 * sum(scale * bsum)
// and Q4_K's minimums dmin * sum(min * 32-element sums), the integers of the
// AVX2 kernels. Each row's 16 f32 lanes add d * d_x * lane super-block by
// super-block; the float order differs from the AVX2 row kernel (16 lanes,
// reduced at the end), so results equal it up to f32 rounding only: callers
// that need batch invariance must not use this path (matmul.cpp gates it
// like the VNNI GEMM). The next 4 rows are prefetched while a pass runs.
// Nothing here may be called unless vnni_gemm_available() returned true; on
// non-x86 builds vnni_gemv_type() is false.
// Threading: pure functions; disjoint row ranges may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/matmul_gemm.h"
#include "quant/tensor_type.h"

namespace minfer::cpu {

// Whether `weight` has a VNNI GEMV (Q4_K, Q6_K); false on non-x86 builds.
bool vnni_gemv_type(quant::TensorType weight);

// Bytes of one prepared activation row of row_len elements (a multiple of 256).
size_t vnni_gemv_x_bytes(int64_t row_len);

// Converts one Q8_K row of row_len elements into the layout of the `weight`
// kernel (vnni_gemv_x_bytes(row_len) bytes at out).
void vnni_gemv_prepare_x(quant::TensorType weight, const uint8_t* q8k_row, int64_t row_len,
                         uint8_t* out);

// The GEMV over rows [r_begin, r_end) (see above); `weight` must satisfy
// vnni_gemv_type.
void vnni_gemv(quant::TensorType weight, const GemmProblem& p, int64_t r_begin, int64_t r_end);

}  // namespace minfer::cpu
