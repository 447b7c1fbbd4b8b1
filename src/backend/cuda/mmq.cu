// Matrix products of quantized weights (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K) with
// int8-quantized activations on the int8 tensor cores (mma.sync s8): the
// batched-decode and batch-invariant path (launchers in kernels.h).
//
// The activations come quantized by launch_quantize_q8 (per 32 values: int8
// q, scale d_x and the integer sum of q; for the K-quants one d_x per 256
// values). A warp takes 16 weight rows and 8 NJ tokens; per 32-value unit
// of a row one mma gives the exact integer dot of the unit's weights with
// each token's q (two for Q6_K's 16-value sub-blocks), which the format
// scales into f32 sums, per unit (Q4_0, Q8_0) or per block after integer
// sums over its sub-blocks (the K-quants; mmq_formats.cuh has the layouts
// and the arithmetic of each type). Every output (row, token) sums its
// blocks in one fixed order: the row's blocks are cut into S contiguous
// slices (S from the matrix shape and the SM count only), each slice
// summed in block order, then the slices added in order. Nothing in
// that order depends on the batch — how many tokens, which, or where a
// token sits — so a token's outputs are bit for bit the same in any batch
// (the engine's batch invariance), and the explicit roundings keep the
// compiler from contracting any of it into FMAs.
//
// A block has 8 warps: 8 / S tiles of 16 weight rows, each tile's S warps
// taking one slice each. A warp holds 8 * NJ tokens (NJ n8-tiles of the
// mma, NJ 1, 2 or 4; one grid dimension walks the batch's token groups,
// the other the row blocks) and, per step of blocks, loads
// its A fragments straight from the GGUF rows, its B fragments (8 bytes of
// its token a lane) and the tokens' d_x (handed round by warp shuffles)
// from the quantized activations, which stay in L1.
// The slices meet in shared memory; the epilogue adds the bias, then the residual (the unfused
// order's value). Rows and tokens past the end are clamped for loads and never written.
// One token of any of these types takes mmq_one.cuh's kernel instead: the
// same sums, bit for bit, without the tensor cores (faster for one
// sequence: docs/PERFORMANCE.md, "Constants and their measurements").
#include <cuda_fp16.h>

#include <type_traits>

#include "backend/cuda/kernels.h"
#include "backend/cuda/mmq_formats.cuh"
#include "backend/cuda/mmq_one.cuh"
#include "backend/cuda/mmq_segments.cuh"

namespace minfer::cuda {
namespace {

using mmq::FormatOf;
using mmq::Tokens;

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

// At most 80 registers for Q4_0 / Q8_0: three blocks (24 warps) per SM
// instead of two at the 101 the compiler would take for NJ = 2 (nvcc 13:
// Q4_0 at NJ = 2 spills 4 bytes since the exact conversions, which left its
// 0.5B batched decode unchanged); resident warps are what makes these fast.
// The K-quants hold a whole block per row (up to 15 registers each) and get
// two blocks per SM.
// Q4_0 / Q8_0 at 32 tokens a warp (NJ = 4, large matrices only) get two.
template <quant::TensorType T, int NJ = 2>
constexpr int kMinBlocks = FormatOf<T>::F::kUnits == 1 && NJ <= 2 ? 3 : 2;

// A launch whose weights take at least this many bytes is "large": far more
// than its share of L2 between two reads of a row, so the blocks of one row
// block (its token groups) run side by side and the rows come from DRAM once
// (Segments::tokens_fastest); 32 tokens a warp for large Q4_0 / Q8_0 too,
// not for every type and size (docs/PERFORMANCE.md, "Constants and their measurements").
constexpr int64_t kLargeBytes = int64_t{8} << 20;

// Each segment as its own launch would compute it (mmq_segments.cuh).
template <quant::TensorType T, int NJ>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks<T, NJ>)
    mmq_kernel(const __grid_constant__ mmq::Segments<MmqArgs> segs) {
  unsigned bx = segs.tokens_fastest ? blockIdx.y : blockIdx.x;
  const unsigned by = segs.tokens_fastest ? blockIdx.x : blockIdx.y;
  const MmqArgs& a = segs.pick(bx);
  using F = typename FormatOf<T>::F;
  __shared__ float part[kWarps][NJ * 4][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
  const int S = a.slices;
  const int tile = warp / S, slice = warp % S;
  const int64_t row0 = (static_cast<int64_t>(bx) * (kWarps / S) + tile) * 16;
  const int64_t tok0 = static_cast<int64_t>(by) * 8 * NJ;
  const int64_t per = (a.n_blocks + S - 1) / S;
  const int64_t b_begin = mini(a.n_blocks, slice * per);
  const int64_t b_end = mini(a.n_blocks, b_begin + per);
  const int64_t last_row = a.rows - 1, last_tok = a.n_tokens - 1;
  const uint8_t* w0 = a.w + mini(row0 + g, last_row) * a.row_bytes;
  const uint8_t* w1 = a.w + mini(row0 + g + 8, last_row) * a.row_bytes;
  Tokens<NJ> tk;
  tk.last_unit = static_cast<int>(a.n_units - 1);
  const int64_t d_off = a.n_units * 32;
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    tk.x[j] = a.xq + mini(tok0 + 8 * j + g, last_tok) * a.x_stride;
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
  std::conditional_t<F::kUnitScales, mmq::StepScales<NJ, kStepUnits / 4>, mmq::NoStepScales<NJ>> sc;
  int64_t b = b_begin;
  // The K-quants ask L2 for the blocks F::kPrefetch steps ahead (each lane
  // one line of its two rows: the four lanes of a row cover 256 bytes).
  constexpr int64_t kPfBytes = static_cast<int64_t>(kAhead) * F::kBytes;
  const int64_t pf_off = 64 * tig < kPfBytes ? 64 * tig : kPfBytes - 1;
  constexpr int64_t kPfAhead = static_cast<int64_t>(F::kPrefetch) * kAhead;
  for (; b + kAhead <= b_end; b += kAhead) {
    if constexpr (kPfAhead > 0) {
      if (b + kPfAhead < b_end) {
        mmq::prefetch_l2(w0 + (b + kPfAhead) * F::kBytes + pf_off);
        mmq::prefetch_l2(w1 + (b + kPfAhead) * F::kBytes + pf_off);
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
      const int64_t t = tok0 + 8 * j + 2 * tig + (i & 1);
      if (r < a.rows && t < a.n_tokens) {
        if (a.bias != nullptr) v = __fadd_rn(v, a.bias[r]);
        const int64_t o = t * a.rows + r;
        if (a.residual != nullptr) v = __fadd_rn(v, a.residual[o]);
        a.y[o] = v;  // y may alias residual
      }
    }
  }
}

int sm_count() {
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return 132;
    }
    return n;
  }();
  return sms;
}

// S (1, 2, 4 or 8): more slices for matrices with few row tiles, so that
// several warps per SM have work even for one token (a function of the
// shape and the device only, never of the batch). Q4_0 / Q8_0 (as tuned on
// the 0.5B): by tiles per SM, at least two blocks a slice. K-quants (few
// 256-value blocks a row): the fewest slices that give every SM its
// resident warps (tiles * S >= SMs * resident), at least one block a slice
// (docs/PERFORMANCE.md, "Constants and their measurements").
int slices_for(int64_t rows, int64_t n_blocks, bool k_quant, int resident_warps) {
  const int sms = sm_count();
  const int64_t tiles = (rows + 15) / 16;
  if (k_quant) {
    int s = 1;
    while (s < 8 && tiles * s < static_cast<int64_t>(sms) * resident_warps && n_blocks >= 2 * s) {
      s *= 2;
    }
    return s;
  }
  int s = tiles >= 4 * sms ? 1 : (tiles >= 2 * sms ? 2 : (tiles >= sms / 2 ? 4 : 8));
  while (s > 1 && n_blocks < 2 * s) s /= 2;
  return s;
}

// Tokens per warp: 8 or 16 (more tokens go to more blocks, which keeps
// many warps busy on a decode batch; each re-reads its rows from L2), 32 for
// a large Q4_0 / Q8_0 matrix (its rows read by half as many blocks).
template <quant::TensorType T, class F>
void choose_nj(int64_t n_tokens, bool large, F&& f) {
  if constexpr (FormatOf<T>::F::kUnits == 1) {
    if (n_tokens > 16 && large) {
      f(std::integral_constant<int, 4>{});
      return;
    }
  }
  if (n_tokens > 8) {
    f(std::integral_constant<int, 2>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

// Calls f(FormatTag) for the types the kernels take; false for any other.
template <class F>
bool dispatch_mmq(quant::TensorType t, F&& f) {
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
    default:
      return false;
  }
}

// Values per block of the type's format (32, or 128 / 256 for the K-quants).
int64_t block_values(quant::TensorType t) {
  int64_t v = 0;
  (void)dispatch_mmq(t, [&](auto tag) { v = 32 * FormatOf<decltype(tag)::value>::F::kUnits; });
  return v;
}

// One token: a group of lanes per (row, slice), the same slices as mmq_kernel.
// Without in.quantized, each block quantizes the token itself first.
template <quant::TensorType T>
cudaError_t launch_one(const mmq::Segments<MmqArgs>& m, const Q8Input& in, cudaStream_t stream) {
  mmq::Segments<mmq_one::OneArgs> s;
  s.n = m.n;
  unsigned blocks = 0;
  for (int i = 0; i < m.n; ++i) {
    const MmqArgs& g = m.seg[i];
    s.seg[i] = {g.w,      g.row_bytes, g.rows,     g.n_blocks, g.xq, g.n_units,
                g.slices, g.bias,      g.residual, g.y,        in};
    const int64_t rows_per_block = mmq_one::groups_per_block<T>() / g.slices;
    blocks += static_cast<unsigned>((g.rows + rows_per_block - 1) / rows_per_block);
    s.end[i] = blocks;
  }
  const dim3 grid(blocks), block(mmq_one::kOneWarps * 32);
  if (in.quantized != nullptr) {
    return launch_pdl(mmq_one::one_token_kernel<T, false>, grid, block, 0, stream, s);
  }
  return launch_pdl(mmq_one::one_token_kernel<T, true>, grid, block, q8_activation_bytes(in.in_dim),
                    stream, s);
}

// The segments' arguments for `type`: shape checks, slices.
cudaError_t segment_args(quant::TensorType type, const void* w, size_t row_bytes, int64_t rows,
                         const Q8Input& in, const float* bias, const float* residual, float* y,
                         MmqArgs& a) {
  const int64_t in_dim = in.in_dim, n_tokens = in.n_tokens;
  const bool aligned16 = reinterpret_cast<uintptr_t>(w) % 16 == 0 && row_bytes % 16 == 0;
  const bool needs16 = type == quant::TensorType::Q4_K || type == quant::TensorType::Q5_K;
  const bool k_quant = quant::type_traits(type).block_size == 256;
  if (!has_mmq(type, in_dim) || (in.quantized == nullptr && in.x == nullptr) || n_tokens < 1 ||
      rows < 1 || (needs16 && !aligned16) || (k_quant && !in.scale_per_256)) {
    return cudaErrorInvalidValue;
  }
  const int64_t n_blocks = in_dim / block_values(type);
  int resident = 0;
  (void)dispatch_mmq(type, [&](auto tag) { resident = kWarps * kMinBlocks<decltype(tag)::value>; });
  a = MmqArgs{static_cast<const uint8_t*>(w),
              row_bytes,
              rows,
              n_blocks,
              in.quantized,
              static_cast<int64_t>(q8_activation_bytes(in_dim)),
              n_tokens,
              in_dim / 32,
              slices_for(rows, n_blocks, k_quant, resident),
              bias,
              residual,
              y};
  return cudaSuccess;
}

// Whether one token of `type` over weights at w takes the one-token kernel
// (mmq_one.cuh; Q4_K / Q5_K read 16-byte words, Q6_K aligned words around
// its 2-byte aligned runs, Q4_0 / Q8_0 16-bit halves).
bool one_token_kernel_takes(quant::TensorType type, const void* w) {
  const bool k4 = type == quant::TensorType::Q4_K || type == quant::TensorType::Q5_K;
  return reinterpret_cast<uintptr_t>(w) % (k4 ? 16 : 4) == 0;
}

cudaError_t launch_segments(quant::TensorType type, mmq::Segments<MmqArgs>& s, const Q8Input& in,
                            cudaStream_t stream) {
  const int64_t n_tokens = in.n_tokens;
  // One token takes the same sums without the tensor cores.
  bool one = n_tokens == 1;
  for (int i = 0; i < s.n; ++i) one = one && one_token_kernel_takes(type, s.seg[i].w);
  if (in.quantized == nullptr && !(one && mmq_takes_unquantized(type, s.seg[0].w, in))) {
    return cudaErrorNotSupported;  // the caller quantizes the activations first
  }
  cudaError_t err = cudaErrorInvalidValue;
  (void)dispatch_mmq(type, [&](auto tag) {
    constexpr quant::TensorType T = decltype(tag)::value;
    if (one) {
      err = launch_one<T>(s, in, stream);
      return;
    }
    unsigned blocks = 0;
    int64_t bytes = 0;
    for (int i = 0; i < s.n; ++i) {
      bytes += s.seg[i].rows * static_cast<int64_t>(s.seg[i].row_bytes);
      const int64_t rows_per_block = 16 * (kWarps / s.seg[i].slices);
      blocks += static_cast<unsigned>((s.seg[i].rows + rows_per_block - 1) / rows_per_block);
      s.end[i] = blocks;
    }
    const bool large = bytes >= kLargeBytes;
    s.tokens_fastest = large && blocks <= 65535;  // grid y's limit
    choose_nj<T>(n_tokens, large, [&](auto nj) {
      constexpr int NJ = decltype(nj)::value;
      const auto grid_y = static_cast<unsigned>((n_tokens + 8 * NJ - 1) / (8 * NJ));
      const dim3 grid = s.tokens_fastest ? dim3(grid_y, blocks) : dim3(blocks, grid_y);
      mmq_kernel<T, NJ><<<grid, kWarps * 32, 0, stream>>>(s);
    });
    err = cudaGetLastError();
  });
  return err;
}

}  // namespace

bool mmq_takes_unquantized(quant::TensorType type, const void* w, const Q8Input& in) {
  return in.n_tokens == 1 && in.x != nullptr && in.glu_up == nullptr && has_mmq(type, in.in_dim) &&
         one_token_kernel_takes(type, w) && q8_activation_bytes(in.in_dim) <= 48 * 1024;
}

// Measured on an H100 (docs/HISTORY.md, "Batched-decode kernel choices"): one
// token through Qwen2.5-0.5B's launches (0.5-4.9 MB of weights each) gains
// 2-4% from the saved launches; through 7B's (7-38 MB) it lost 7%, each of
// the many blocks re-reading and quantizing the whole activation. The
// bound lies between the two, untested nearer to it.
bool mmq_quantizes_itself(size_t weight_bytes) {
  return weight_bytes <= (size_t{6} << 20);
}

bool has_mmq(quant::TensorType type, int64_t in_dim) {
  const bool k_quant = quant::type_traits(type).block_size == 256;
  return block_values(type) > 0 && in_dim > 0 && in_dim % (k_quant ? 256 : 32) == 0;
}

cudaError_t launch_mmq(quant::TensorType type, const void* w, size_t row_bytes, int64_t rows,
                       const Q8Input& in, const float* bias, const float* residual, float* y,
                       cudaStream_t stream) {
  mmq::Segments<MmqArgs> s;
  s.n = 1;
  const cudaError_t err = segment_args(type, w, row_bytes, rows, in, bias, residual, y, s.seg[0]);
  return err != cudaSuccess ? err : launch_segments(type, s, in, stream);
}

cudaError_t launch_mmq_stack(quant::TensorType type, const MmqStack& stack, const Q8Input& in,
                             cudaStream_t stream) {
  if (stack.n < 1 || stack.n > MmqStack::kMax) return cudaErrorInvalidValue;
  mmq::Segments<MmqArgs> s;
  s.n = stack.n;
  for (int i = 0; i < stack.n; ++i) {
    const cudaError_t err = segment_args(type, stack.w[i], stack.row_bytes[i], stack.rows[i], in,
                                         stack.bias[i], nullptr, stack.y[i], s.seg[i]);
    if (err != cudaSuccess) return err;
  }
  return launch_segments(type, s, in, stream);
}

}  // namespace minfer::cuda
