// Prefill matmul with AVX-512 VNNI: the batch GEMM for Q4_0, Q5_0, Q8_0, Q4_K,
// Q5_K and Q6_K weights on CPUs with AVX-512 F/BW/VL/DQ and VNNI.
//
// Contract: vnni_gemm computes y[t][r] = dot(W row r, x row t) for every r in
// [r_begin, r_end) and t in [t_begin, t_end) of one GemmProblem
// (backend/cpu/matmul_gemm.h) whose x rows were converted by vnni_prepare_x
// or vnni_quantize_x (x_stride = vnni_x_row_bytes(row_len)) for the 32-element
// formats, and are plain Q8_K rows for the K-quants.
// Layout: a range's weight rows are repacked, 16 rows at a time, into a
// per-thread buffer: per block, the 16 f32 scales, then the quants as
// unsigned bytes, 4 consecutive elements of row r in 32-bit lane r (8 groups
// of 64 bytes; Q4_0 and Q5_0 unpacked to one byte each; Q8_0 offset by +128).
// A prepared activation block is {f32 d, i32 -c*sum(q), 32 signed quants},
// where c is the weight type's offset (8, 16 or 128). One vpdpbusd then adds
// 4 products of each of 16 rows with one token, and the block sum
// sum((q_w + c) * q_x) - c * sum(q_x) is exactly the signed integer block sum
// of the dot kernels (no saturation: |sum| < 2^21). Each 16-row lane adds the
// scaled block sums in block order, d_w * d_x * sum as the AVX2 dot kernels
// do, so results equal them up to FMA contraction.
// K-quants: per sub-block the unsigned block sum (vpdpbusd) times the row's
// scale (vpmulld), and the Q8_K bsums term (Q4_K's and Q5_K's mins, Q6_K's
// -32 offset)
// by vpdpwssd: the same integers as the AVX2 kernels (|sum| < 2^29), scaled
// as they do (d * y_d, and dmin * y_d for the mins).
// Weights stay where they are (the GGUF mapping, shared with other
// backends); the per-range repack costs a few percent of a 512-token batch
// and no memory beyond one range. Single tokens take the AVX2 path, or
// for Q4_K/Q6_K the VNNI GEMV (backend/cpu/matmul_gemv_vnni.h).
// Dispatch: vnni_gemm_available() checks CPUID/XCR0 once and honours
// MINFER_CPU_NO_AVX512=1 (for A/B comparisons). Nothing here may be called
// unless it returned true; on non-x86 builds it is always false.
// Threading: no shared state (the repack buffer is thread_local); disjoint
// (row, token) ranges may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/matmul_gemm.h"
#include "quant/tensor_type.h"

namespace minfer::cpu {

// CPU and OS support AVX-512 F/BW/VL/DQ + VNNI and MINFER_CPU_NO_AVX512 is
// unset or "0" (read once).
bool vnni_gemm_available();

// Whether `weight` has a VNNI GEMM (Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K).
bool vnni_gemm_type(quant::TensorType weight);

// Bytes of one prepared activation row of row_len elements (a multiple of 32).
size_t vnni_x_row_bytes(int64_t row_len);

// Converts one Q8_0 activation row of row_len elements into the layout the
// `weight` kernel expects (vnni_x_row_bytes(row_len) bytes at out).
void vnni_prepare_x(quant::TensorType weight, const uint8_t* q8_row, int64_t row_len, uint8_t* out);

// The same from f32: quant::quantize_row's Q8_0 of x (bit for bit) followed
// by vnni_prepare_x, in one pass. False (out unspecified) if x has a NaN or
// an infinity.
bool vnni_quantize_x(quant::TensorType weight, const float* x, int64_t row_len, uint8_t* out);

// The GEMM over a range (see above). `weight` must satisfy vnni_gemm_type.
void vnni_gemm(quant::TensorType weight, const GemmProblem& p, int64_t r_begin, int64_t r_end,
               int64_t t_begin, int64_t t_end);

}  // namespace minfer::cpu
