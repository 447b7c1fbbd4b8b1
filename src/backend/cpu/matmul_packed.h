// Weights repacked once for the AVX2 matmul of every batch size: Q4_0, Q5_0,
// Q5_1, Q8_0, Q4_K, Q5_K and Q6_K rows interleaved in groups of eight, so one 32-byte register
// holds the same four elements of eight rows and its eight int32 lanes are the eight rows' sums. A
// block's integer sums then need no horizontal reduction: each 4-byte chunk of a token's activation
// block is broadcast and multiplied against the register, and the f32 scaling (one convert and one
// fma per block) is shared by the eight rows instead of paid per row.
//
// Layout of one group-block (8 rows x 32 elements), groups one after another,
// each holding its row_len / 32 group-blocks in order:
//   - 8 f16 scales (row r's d at r), 16 bytes;
//   - Q4_0: 4 registers; register m, lane r = row r's qs[4m..4m+3] (low
//     nibbles: elements 4m+i, high nibbles: elements 16+4m+i), 128 bytes;
//   - Q5_0: the Q4_0 registers, then one register of high bits: lane r, byte
//     i, bit c = the fifth bit of row r's element 4c+i, 32 bytes more;
//   - Q5_1: 8 f16 mins after the scales (16 bytes), then Q5_0's registers;
//   - Q8_0: 8 registers; register c, lane r = row r's qs[4c..4c+3], 256 bytes.
//   - Q4_K (per 256-element super-block): 8 f16 d, 8 f16 dmin, the 6-bit
//     scales as bytes [sub-block][row] (64), the mins as bytes [sub-block
//     pair][row][2] (64), then 32 registers: sub-block pair j, register k,
//     lane r = row r's qs[32j+4k..32j+4k+3] (1024 bytes).
//   - Q5_K (per super-block): the Q4_K header, then per sub-block pair j two
//     registers of fifth bits (lane r, byte i, bit k: the fifth bit of row
//     r's element 64j + 4k + i, then of 64j + 32 + 4k + i) followed by
//     Q4_K's eight registers of that pair (320 bytes per pair).
//   - Q6_K (per super-block): 8 f16 d, the int8 scales as bytes [sub-block
//     pair][row][2] (128), then 16 triples {high bits, nibbles, nibbles} of
//     registers in reading order (matmul_packed.cpp, pack_q6_k), 1536 bytes:
//     one stream, which the hardware prefetchers follow (separate nibble and
//     high-bit regions read a third as fast from DRAM on Zen 4).
// The 32-element formats are exactly the bytes of their eight source blocks
// (Q4_0 144, Q5_0 176, Q5_1 192, Q8_0 272), rearranged; Q4_K takes 1184 for 1152, Q6_K
// exactly its 1680, Q5_K 1440 for 1408. A last group short of eight
// rows is padded with zero rows (scale 0), whose outputs are never written.
//
// Numerics: the activations are quantized to Q8_0 (Q8_1 for Q5_1, Q8_K for
// K-quants) as for matmul(); each (row, token, block) integer sum is exact (the 4/5/6-bit
// quants enter unsigned, u = q + 8, q + 16 or q + 32, and the offset times the
// activation block's sum is subtracted as an integer, so the sum equals the
// signed one; Q4_K's and Q5_K's scale and min sums are integers too; int16
// partial sums stay below 2^15 by construction), then acc = fma(d_w * d_x,
// float(sum), acc) in block order (Q4_K, Q5_K: then acc -= dmin_w * d_x *
// float(min sum); Q5_1: then acc += m_w * s_x, the Q8_1 block's f16 s as the
// dot kernel takes it). A token's outputs
// therefore depend only on its own activation row: bit-identical for any
// batch size, position in the batch and thread count (batch invariant by
// construction), and equal to the per-row dot kernels up to f32 rounding.
//
// Contract:
//   - packable(type): Q4_0, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K or Q6_K on a CPU with AVX2; else packed
//     matmuls are not available and matmul() is the path.
//   - pack_weight(w): the packed copy of w (its data is read, not kept).
//     Errors: a type that is not packable, sizes matmul() would refuse.
//   - packed_matmul(p, x, n_tokens, y, pool, scratch[, kernels]): y = x * W^T with the
//     shapes and errors of matmul() (backend/cpu/matmul.h), from the packed
//     copy; non-finite activations are an error naming the token.
// Threading: parallel over groups of rows (and tokens for long batches) on
// `pool`; a PackedWeight is read-only once made and may be shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/matmul.h"
#include "base/large_pages.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "quant/tensor_type.h"

namespace minfer::cpu {

struct PackedWeight {
  quant::TensorType type = quant::TensorType::F32;
  int64_t rows = 0;
  int64_t row_len = 0;
  size_t group_bytes = 0;  // bytes of one group of 8 rows (all its blocks)
  std::vector<uint8_t, LargePageAllocator<uint8_t>> data;  // (rows + 7) / 8 groups, huge pages
};

bool packable(quant::TensorType type);

Result<PackedWeight> pack_weight(const MatmulWeight& w, ThreadPool& pool);

// Whether packed_matmul's kAuto takes the AVX-512 VNNI kernels (256-bit
// vpdpbusd/vpdpwssd; vnni_gemm_available()). They give the AVX2 kernels'
// bits: the integer sums are exact either way and the float steps the same.
bool packed_vnni_available();

enum class PackedKernels {
  kAuto,  // the VNNI kernels where available, else AVX2
  kAvx2,  // the AVX2 kernels (tests compare the two)
};

Status packed_matmul(const PackedWeight& p, const float* x, int64_t n_tokens, float* y,
                     ThreadPool& pool, std::vector<uint8_t>& scratch,
                     PackedKernels kernels = PackedKernels::kAuto);

}  // namespace minfer::cpu
