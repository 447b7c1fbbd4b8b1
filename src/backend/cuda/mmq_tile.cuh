// One block's work of the int8 tensor-core products (mmq.cu's dense
// products, mmq_id.cu's expert products): kWarps warps over 16-row tiles
// of one weight matrix and 8 NJ tokens, the arithmetic of mmq.cu's header
// comment. Which tokens a block takes, and where each one's outputs go, is
// the caller's `Map`:
//   const int8_t* x(int k)  the quantized row of the block's token k (any
//                           valid row for k past the block's last token);
//   bool out(int k, int64_t& o)  whether token k exists, and the index of
//                           its output row's first element in y (and in
//                           the residual).
// A token's sums depend on its own row only, never on its neighbours in
// the block, so any grouping of tokens into blocks gives the same bits.
#pragma once

#include <cstdint>
#include <type_traits>

#include "backend/cuda/mmq_formats.cuh"

namespace minfer::cuda::mmq {

constexpr int kWarps = 8;

__host__ __device__ __forceinline__ int64_t mini(int64_t a, int64_t b) {
  return a < b ? a : b;
}

struct MmqArgs {
  const uint8_t* w;
  size_t row_bytes;
  int64_t rows, n_blocks;  // weight rows, blocks (of the format) per row
  const int8_t* xq;        // [n_tokens][x_stride bytes]: launch_quantize_q8's layout
  int64_t x_stride, n_tokens;
  int64_t n_units;  // 32-value units per row
  int slices;       // S: 1, 2, 4 or 8
  const float* bias;
  const float* residual;
  float* y;
};

// At most 80 registers for Q4_0 / Q8_0 / MXFP4: three blocks (24 warps) per SM
// instead of two at the 101 the compiler would take for NJ = 2 (nvcc 13:
// Q4_0 at NJ = 2 spills 4 bytes since the exact conversions, which left its
// 0.5B batched decode unchanged); resident warps are what makes these fast.
// The K-quants hold a whole block per row (up to 15 registers each) and get
// two blocks per SM.
// Q4_0 / Q8_0 at 32 tokens a warp (NJ = 4, large matrices only) get two.
template <quant::TensorType T, int NJ = 2>
constexpr int kMinBlocks = FormatOf<T>::F::kUnits == 1 && NJ <= 2 ? 3 : 2;

// Calls f(std::integral_constant<TensorType, T>) for each type T the tile
// takes (MXFP4 only with kMxfp4); false for any other type.
template <bool kMxfp4, class F>
bool dispatch_tile(quant::TensorType t, F&& f) {
  using quant::TensorType;
  switch (t) {
    case TensorType::Q4_0:
      f(std::integral_constant<TensorType, TensorType::Q4_0>{});
      return true;
    case TensorType::Q8_0:
      f(std::integral_constant<TensorType, TensorType::Q8_0>{});
      return true;
    case TensorType::Q4_K:
      f(std::integral_constant<TensorType, TensorType::Q4_K>{});
      return true;
    case TensorType::Q5_K:
      f(std::integral_constant<TensorType, TensorType::Q5_K>{});
      return true;
    case TensorType::Q6_K:
      f(std::integral_constant<TensorType, TensorType::Q6_K>{});
      return true;
    case TensorType::MXFP4:
      if constexpr (kMxfp4) {
        f(std::integral_constant<TensorType, TensorType::MXFP4>{});
        return true;
      }
      return false;
    default:
      return false;
  }
}

// S (1, 2, 4 or 8) for a matrix of `rows` rows of n_blocks blocks, from its
// shape and the device only, never from the batch (mmq.cu). resident_warps:
// kWarps * kMinBlocks of its type.
int slices_for(int64_t rows, int64_t n_blocks, bool k_quant, int resident_warps);

// Row block bx of `a` for the block's tokens (Map, above).
template <quant::TensorType T, int NJ, class Map>
__device__ __forceinline__ void mmq_tile(const MmqArgs& a, unsigned bx, const Map& map) {
  using F = typename FormatOf<T>::F;
  __shared__ float part[kWarps][NJ * 4][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
  const int S = a.slices;
  const int tile = warp / S, slice = warp % S;
  const int64_t row0 = (static_cast<int64_t>(bx) * (kWarps / S) + tile) * 16;
  const int64_t per = (a.n_blocks + S - 1) / S;
  const int64_t b_begin = mini(a.n_blocks, slice * per);
  const int64_t b_end = mini(a.n_blocks, b_begin + per);
  const int64_t last_row = a.rows - 1;
  const uint8_t* w0 = a.w + mini(row0 + g, last_row) * a.row_bytes;
  const uint8_t* w1 = a.w + mini(row0 + g + 8, last_row) * a.row_bytes;
  Tokens<NJ> tk;
  tk.last_unit = static_cast<int>(a.n_units - 1);
  const int64_t d_off = a.n_units * 32;
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    tk.x[j] = map.x(8 * j + g);
    tk.d[j] = reinterpret_cast<const float*>(tk.x[j] + d_off);
  }
  float acc[NJ][4];
#pragma unroll
  for (int j = 0; j < NJ; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  // A step: kAhead blocks (a multiple of four units), their weights loaded
  // before any is used (loads in flight), their tokens' scales in one go.
  constexpr int kAhead = F::kAhead;
  constexpr int kStepUnits = F::kUnits * kAhead;
  static_assert(kStepUnits % 4 == 0, "a step holds whole quads of units");
  std::conditional_t<F::kUnitScales, StepScales<NJ, kStepUnits / 4>, NoStepScales<NJ>> sc;
  int64_t b = b_begin;
  // The K-quants ask L2 for the blocks F::kPrefetch steps ahead (each lane
  // one line of its two rows: the four lanes of a row cover 256 bytes).
  constexpr int64_t kPfBytes = static_cast<int64_t>(kAhead) * F::kBytes;
  const int64_t pf_off = 64 * tig < kPfBytes ? 64 * tig : kPfBytes - 1;
  constexpr int64_t kPfAhead = static_cast<int64_t>(F::kPrefetch) * kAhead;
  for (; b + kAhead <= b_end; b += kAhead) {
    if constexpr (kPfAhead > 0) {
      if (b + kPfAhead < b_end) {
        prefetch_l2(w0 + (b + kPfAhead) * F::kBytes + pf_off);
        prefetch_l2(w1 + (b + kPfAhead) * F::kBytes + pf_off);
      }
    }
    typename F::Row r[kAhead][2];
#pragma unroll
    for (int q = 0; q < kAhead; ++q) {
      F::load(w0, b + q, tig, r[q][0]);
      F::load(w1, b + q, tig, r[q][1]);
    }
    sc.load(tk, b * F::kUnits, tig);
#pragma unroll
    for (int q = 0; q < kAhead; ++q) {
      F::add(r[q][0], r[q][1], b + q, q * F::kUnits, tk, sc, tig, acc);
    }
  }
  for (; b < b_end; ++b) {  // the slice's last blocks, one at a time (kAhead > 1)
    typename F::Row r[2];
    F::load(w0, b, tig, r[0]);
    F::load(w1, b, tig, r[1]);
    sc.load(tk, b * F::kUnits, tig);
    F::add(r[0], r[1], b, 0, tk, sc, tig, acc);
  }
  // Slices in order: the tile's first warp adds the others' sums to its own.
  if (S > 1) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) part[warp][4 * j + i][lane] = acc[j][i];
    }
  }
  __syncthreads();         // S is the same for the whole block: every thread gets here
  if (slice != 0) return;  // past the only barrier
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = acc[j][i];
      for (int s = 1; s < S; ++s) v = __fadd_rn(v, part[warp + s][4 * j + i][lane]);
      const int64_t r = row0 + g + (i >= 2 ? 8 : 0);
      int64_t o = 0;
      if (r < a.rows && map.out(8 * j + 2 * tig + (i & 1), o)) {
        if (a.bias != nullptr) v = __fadd_rn(v, a.bias[r]);
        o += r;
        if (a.residual != nullptr) v = __fadd_rn(v, a.residual[o]);
        a.y[o] = v;  // y may alias residual
      }
    }
  }
}

}  // namespace minfer::cuda::mmq
