// y = x * W^T for one weight matrix in any CPU-supported encoding, with
// llama.cpp's CPU numerics: each token row of x is first converted to the
// weight's vec_dot_type (quant::quantize_row, bit-exact with ggml's activation
// quantizers), then the outputs are integer block dot products: tiles of
// several rows x tokens where the weight type has a tile kernel for the ISA
// (batches on AVX-512 VNNI CPUs: backend/cpu/matmul_gemm_vnni.h, which
// quantizes the activations into its own layout, same quants; otherwise
// backend/cpu/matmul_gemm.h), else one dot kernel call per output
// (backend/cpu/vec_dot.h). Tiles add the scaled block sums in another order
// than the dot kernels for batches (equal up to f32 rounding) and in the same
// order for a single token (bit-exact). A single token of Q4_K/Q6_K on
// AVX-512 VNNI CPUs takes the GEMV of backend/cpu/matmul_gemv_vnni.h (same
// integers as the dot kernels, another f32 order) unless batch_invariant.
//
// Contract:
//   - W has `rows` rows (the output dim) of `row_len` elements (the input dim);
//     row r starts at data + r * row_stride bytes (row_stride 0 means packed:
//     quant::row_bytes(type, row_len)). x is [n_tokens][row_len] f32, y is
//     [n_tokens][rows] f32, both dense and row-major. y must not overlap x or W.
//   - scratch is caller-owned working memory for the converted activations;
//     it is resized as needed and can be reused across calls to avoid
//     allocations in the decode loop.
//   - Errors (Status, nothing written to y is meaningful): a weight type without
//     a dot kernel, row_len not a multiple of the type's block size, negative
//     sizes, a row_stride shorter than a row, null buffers with non-zero sizes,
//     and non-finite activations where the vec_dot_type is quantized (the
//     message names the token). Messages name the type and dimensions.
// Threading: parallel over blocks of output rows on `pool`; each call is
// independent, but `scratch` must not be shared by concurrent calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/vec_dot.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "quant/tensor_type.h"

namespace minfer::cpu {

struct MatmulWeight {
  quant::TensorType type = quant::TensorType::F32;
  int64_t rows = 0;     // output dim
  int64_t row_len = 0;  // input dim
  const void* data = nullptr;
  size_t row_stride = 0;  // bytes between consecutive rows; 0 = packed
};

// How a matmul may pick its kernels. batch_invariant: each token's outputs
// must not depend on n_tokens or the other rows, bit for bit (the engine's
// batches, graph::MatMulMeta::batch_invariant): every batch size then takes
// the tiled kernel a batch of two would (no VNNI GEMM or GEMV, no
// one-token special case), or the per-row kernels where the type has no tiled one.
struct MatmulMode {
  bool batch_invariant = false;
};

// Whether an AVX-512 VNNI kernel of matmul() beats a packed matmul
// (backend/cpu/matmul_packed.h) for this batch: the GEMM for batches of
// kVnniMinTokens or more of its types, the GEMV for single tokens of its
// types that are not packable (none today: Q4_K and Q6_K are). matmul()
// itself still takes the GEMV
// for a packable type when it is called (weights not repacked).
bool takes_vnni(quant::TensorType type, int64_t n_tokens, MatmulMode mode);

// Kernels of active_isa().
Status matmul(const MatmulWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
              std::vector<uint8_t>& scratch, MatmulMode mode = {});

// The same with the kernels of an explicit ISA (for A/B comparisons and tests);
// an ISA the CPU lacks falls back to scalar.
Status matmul(const MatmulWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
              std::vector<uint8_t>& scratch, Isa isa, MatmulMode mode = {});

}  // namespace minfer::cpu
