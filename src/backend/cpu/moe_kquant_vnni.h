// The Q4_K and Q6_K expert kernel of the CPU mixture-of-experts matmul
// (backend/cpu/moe.h) on CPUs with AVX-512 VNNI: a block of one expert's
// weight rows, read where the file keeps them, times the few tokens routed to
// it, each token's activation row and output row named by a pointer (so the
// rows are neither gathered nor scattered).
//
// Contract: kquant_expert_tile writes out[i][r] = dot(W row r, x[i]) for every
// r in [r_begin, r_end) and i in [0, n_tokens). The integers are those of
// backend/cpu/matmul_gemv_vnni.h's GEMV (the same activation layout, from
// vnni_gemv_prepare_x; vpdpbusd on the unsigned quants, vpdpwssd for the
// sub-block scales, the Q4_K minimums and the Q6_K offset as integers) and
// each row keeps its 16 f32 lanes, added super-block by super-block; the
// lanes are reduced four rows at a time, so the sums equal the GEMV's up to
// f32 rounding. A (row, token) output depends only on that row and token:
// the same bits whatever the other tokens, the block of rows or the thread
// (batch-invariant by construction).
// Reading: passes of 4 rows share each super-block's activation loads; a
// pass runs its tokens one after another while its rows sit in L1. The
// expert's bytes are prefetched a fixed distance ahead of the reading, up to
// its last row (backend/cpu/moe_prefetch.h), so one call over many rows
// streams them as one run.
// Preconditions: vnni_gemm_available() (backend/cpu/matmul_gemm_vnni.h);
// type Q4_K or Q6_K; row_len a multiple of 256; x rows prepared by
// vnni_gemv_prepare_x for `type`, 64-byte aligned; out rows hold at least
// r_end floats. Nothing is checked. On non-x86 builds the tile does nothing
// and must not be called.
// Threading: pure; disjoint (row range, output) pairs may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/tensor_type.h"

namespace minfer::cpu {

struct KQuantExpertTile {
  quant::TensorType type = quant::TensorType::Q4_K;
  const uint8_t* w = nullptr;         // the expert's first weight row
  size_t w_stride = 0;                // bytes between weight rows
  int64_t rows = 0;                   // the expert's rows (the prefetch stays inside)
  int64_t row_len = 0;                // elements per row
  const uint8_t* const* x = nullptr;  // n_tokens prepared activation rows
  float* const* out = nullptr;        // n_tokens output rows, indexed by weight row
  int64_t n_tokens = 0;
};

void kquant_expert_tile(const KQuantExpertTile& p, int64_t r_begin, int64_t r_end);

}  // namespace minfer::cpu
