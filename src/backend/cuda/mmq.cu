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
#include <utility>

#include "backend/cuda/kernels.h"
#include "backend/cuda/mmq_formats.cuh"
#include "backend/cuda/mmq_one.cuh"
#include "backend/cuda/mmq_segments.cuh"
#include "backend/cuda/mmq_tile.cuh"

namespace minfer::cuda {
namespace {

using mmq::FormatOf;
using mmq::kMinBlocks;
using mmq::kWarps;
using mmq::mini;
using mmq::MmqArgs;

// A launch whose weights take at least this many bytes is "large": far more
// than its share of L2 between two reads of a row, so the blocks of one row
// block (its token groups) run side by side and the rows come from DRAM once
// (Segments::tokens_fastest); 32 tokens a warp for large Q4_0 / Q8_0 too,
// not for every type and size (docs/PERFORMANCE.md, "Constants and their measurements").
constexpr int64_t kLargeBytes = int64_t{8} << 20;

// The tokens of a dense product: token group `by` of the batch, in order.
struct BatchTokens {
  const MmqArgs& a;
  int64_t tok0;
  __device__ __forceinline__ const int8_t* x(int k) const {
    return a.xq + mini(tok0 + k, a.n_tokens - 1) * a.x_stride;
  }
  __device__ __forceinline__ bool out(int k, int64_t& o) const {
    o = (tok0 + k) * a.rows;
    return tok0 + k < a.n_tokens;
  }
};

// Each segment as its own launch would compute it (mmq_segments.cuh).
template <quant::TensorType T, int NJ>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks<T, NJ>)
    mmq_kernel(const __grid_constant__ mmq::Segments<MmqArgs> segs) {
  unsigned bx = segs.tokens_fastest ? blockIdx.y : blockIdx.x;
  const unsigned by = segs.tokens_fastest ? blockIdx.x : blockIdx.y;
  const MmqArgs& a = segs.pick(bx);
  mmq::mmq_tile<T, NJ>(a, bx, BatchTokens{a, static_cast<int64_t>(by) * 8 * NJ});
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

// Calls f(FormatTag) for the types the dense kernels take (not MXFP4: no
// one-token kernel); false for any other.
template <class F>
bool dispatch_mmq(quant::TensorType t, F&& f) {
  return mmq::dispatch_tile</*kMxfp4=*/false>(t, std::forward<F>(f));
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
              mmq::slices_for(rows, n_blocks, k_quant, resident),
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

namespace mmq {

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

}  // namespace mmq

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
