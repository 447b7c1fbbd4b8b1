// Prefill matmul as a tiled GEMM: the AVX2 kernels for a batch of tokens.
//
// Contract: a GemmKernel computes y[t][r] = dot(W row r, x row t) for every r
// in [r_begin, r_end) and t in [t_begin, t_end) of one GemmProblem, where x
// rows are already converted to the weight's vec_dot_type (backend/cpu/
// vec_dot.h). It works in tiles of a few weight rows x a few tokens: each
// weight block is loaded and unpacked once per tile and dotted against every
// token's activation block, so a weight block's load and unpacking are shared
// by the tile's tokens instead of repeated per token.
// Numerics: the same integer block sums and per-block scale products as the
// AVX2 dot kernels (and so as ggml's); only the order in which the scaled
// block sums are added differs (one 8-lane accumulator per output; Q4_K's
// min term and Q6_K's -32 offset are folded in through the Q8_K bsums, which
// is the same integer). Results therefore equal the per-row path up to f32
// rounding of the final sum.
// A single token (decode) takes the same tiles with one token column for the
// 32-element formats: a tile then streams several weight rows at once, each
// with its own accumulator in block order — the order of the AVX2 dot kernels
// and of ggml's — so decode results equal the per-row kernels bit for bit.
// gemm_kernel() returns nullptr where the per-row path should be used: types
// without a GEMM kernel, K-quants for a single token, and CPUs without AVX2.
// Kernels trust their arguments.
// Q4_0/Q5_0 batches widen a range's weight rows to Q8_0 blocks once (same
// quants, same scales) in a per-thread buffer and run the Q8_0 tiles.
// Threading: no shared state (the widening buffer is thread_local); disjoint
// (row, token) ranges may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/tensor_type.h"

namespace minfer::cpu {

struct GemmProblem {
  const uint8_t* w = nullptr;  // weight rows
  size_t w_stride = 0;         // bytes between weight rows
  const uint8_t* x = nullptr;  // activation rows in vec_dot_type
  size_t x_stride = 0;         // bytes between activation rows
  int64_t row_len = 0;         // elements per row (a multiple of the block size)
  float* y = nullptr;          // [n_tokens][ldy]
  int64_t ldy = 0;             // floats between output rows (the weight's row count)
};

using GemmKernel = void (*)(const GemmProblem& p, int64_t r_begin, int64_t r_end, int64_t t_begin,
                            int64_t t_end);

// The kernel for `weight` and a batch of n_tokens if the CPU has AVX2: Q4_0,
// Q5_0 and Q8_0 for any n_tokens, Q4_K and Q6_K for n_tokens > 1; else nullptr.
GemmKernel gemm_kernel(quant::TensorType weight, int64_t n_tokens);

}  // namespace minfer::cpu
