// The MXFP4 expert kernel of the CPU mixture-of-experts matmul
// (backend/cpu/moe.h) on CPUs with AVX-512 VNNI: a block of one expert's
// weight rows times the tokens routed to it, each token's Q8_0 activation row
// and output row named by a pointer (so the rows are neither gathered nor
// scattered).
//
// Contract: mxfp4_expert_tile writes out[i][r] = dot(W row r, x[i]) for every
// r in [r_begin, r_end) and i in [0, n_tokens), bit for bit what
// dot_kernel(MXFP4, Isa::kAvx2) (backend/cpu/vec_dot.h) returns for that row
// and activation: the same 8 int32 lanes per 32-element block (products of 4
// consecutive elements each), scaled by f16(d_x) * half the E8M0 scale and
// added into one 8-lane f32 accumulator in block order by FMA, reduced as
// vec_dot_avx2.cpp reduces. The integer lanes come from vpdpbusd on the
// nibbles' doubled E2M1 values offset by +12 (so they are unsigned), started
// from -12 times the activation's lane sums: exact, as no lane can exceed
// 2^15. Tiles of 4 rows by up to 3 tokens share each block's activation loads
// and each row's unpacked nibbles; the expert's bytes are prefetched ahead
// of the reading (backend/cpu/moe_prefetch.h).
// Preconditions: vnni_gemm_available() (backend/cpu/matmul_gemm_vnni.h) is
// true; row_len is a multiple of 32; x rows are quant::quantize_row's Q8_0 of
// row_len elements; out rows hold at least r_end floats. Nothing is checked.
// On non-x86 builds mxfp4_expert_tile does nothing and must not be called.
// Threading: pure; disjoint (row range, output) pairs may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>

namespace minfer::cpu {

struct Mxfp4ExpertTile {
  const uint8_t* w = nullptr;         // the expert's first MXFP4 weight row
  size_t w_stride = 0;                // bytes between weight rows
  int64_t rows = 0;                   // the expert's rows (the prefetch stays inside)
  int64_t row_len = 0;                // elements per row
  const uint8_t* const* x = nullptr;  // n_tokens Q8_0 activation rows
  float* const* out = nullptr;        // n_tokens output rows, indexed by weight row
  int64_t n_tokens = 0;
};

void mxfp4_expert_tile(const Mxfp4ExpertTile& p, int64_t r_begin, int64_t r_end);

}  // namespace minfer::cpu
