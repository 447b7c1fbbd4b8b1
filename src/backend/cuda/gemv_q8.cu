// GEMVs on int8-quantized activations (launchers in kernels.h): y = W x for
// a few tokens, with x quantized per 32 elements to int8 (scale amax / 127,
// round to nearest even) and the products summed with dp4a.
//
// A block takes NT tokens (1, 2, 4 or 8; blockIdx.y is the token group)
// and first builds their quantized activations in shared memory, one after
// the other (or copies them, quantized once for the whole batch by
// launch_quantize_q8 when there are several tokens): optionally RMS-normalizes x (x / rms(x) *
// weight, the fused input norm), then quantizes it, 8 threads per 32-element block. It then walks
// row groups (grid-stride): warp w takes R rows at a time, its lanes take units u = lane, lane +
// 32, ... of each row, a unit being 32 weights read as wide loads:
//   - Q4_0 / Q8_0: one 32-element block (2-byte aligned: read as 32-bit words
//     realigned with funnel shifts).
//   - Q4_K: 16 bytes of a super-block's quants (16 values of two sub-blocks)
//     plus the super-block's 16-byte header; eight lanes per super-block.
//   - Q5_K: Q4_K's loads plus 16 bytes of the fifth bits (176-byte
//     super-blocks: all three loads stay 16-byte aligned).
//   - Q6_K: 8 bytes each of the low nibbles (twice) and high bits, 32 values
//     of four sub-blocks; eight lanes per super-block. One token outside the
//     batch-invariant kernels: the warp stages its rows' super-blocks through
//     shared memory with 16-byte loads first (q8_units.cuh).
// Integer dot products per sub-block are scaled in f32: sum over sub-blocks
// of d_w * d_x * sum(q_w q_x) (K-quant minimums: - dmin * m * d_x * sum q_x).
// Warp sums give the rows. The activation rounding makes results differ from
// the f32 path by at most sum |w| * d_x / 2 per block (checked in the tests).
//
// Batch invariance: every unit a warp reads is dotted with each of the
// block's NT activations, and each (row, token) result is summed in exactly
// the order of the one-token kernel (the same units per lane, the same warp
// reduction). A token's outputs are therefore bit-identical whatever NT, R
// and the number of tokens in the batch (cuda_Ops.Q8GemvTokensAreBatchInvariant).
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8_quantize.cuh"
#include "backend/cuda/q8_units.cuh"

namespace minfer::cuda {
namespace {

using q8act::emit_q8;
using q8act::q8_at;
using q8act::quantize_activation;

constexpr int kWarps = q8act::kQuantWarps;
constexpr int kThreads = q8act::kQuantThreads;
constexpr int kMaxBlocksPerSm = 4;

// Every kernel here is launched with PDL (pdl.cuh): it lets its own
// dependents start at once, prefetches the first weights it will read into L2
// while the previous kernel finishes, and waits for that kernel before
// reading any activation. Nothing is written before the wait.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Prefetches the first row group (R rows from row0) of this warp: each lane
// one 128-byte line per row, lines lane, lane + 32, ... up to 4 per row.
__device__ __forceinline__ void prefetch_rows(const uint8_t* w, size_t row_bytes, int64_t row0,
                                              int n_rows) {
  const int lane = threadIdx.x & 31;
  for (int r = 0; r < n_rows; ++r) {
    const uint8_t* row = w + (row0 + r) * static_cast<int64_t>(row_bytes);
    for (int64_t off = 128 * lane; off < static_cast<int64_t>(row_bytes) && off < 128 * 128;
         off += 128 * 32) {
      prefetch_l2(row + off);
    }
  }
}

// Token t's quantized activation (of the block's NT) in dynamic shared memory.
__device__ __forceinline__ Q8Smem q8_smem(int64_t in_dim, int t) {
  extern __shared__ int4 smem[];
  return q8_at(reinterpret_cast<int8_t*>(smem) + static_cast<int64_t>(t) * (in_dim * 3 / 2),
               in_dim);
}

// Whether a kernel's rows take the staged Q6_K path: one token, in the
// kernels whose sums need not round as the multi-token ones.
__host__ __device__ constexpr bool uses_q6_stage(TensorType t, int nt, bool exact) {
  return t == TensorType::Q6_K && nt == 1 && !exact;
}
// Shared memory past the activations of such a block of R-row warps.
template <int R>
constexpr size_t q6_stage_bytes() {
  return static_cast<size_t>(kWarps) * Q6Stage<R>::kBytesPerWarp;
}
template <int R>
size_t stage_bytes(TensorType t, int nt, bool exact) {
  return uses_q6_stage(t, nt, exact) ? q6_stage_bytes<R>() : 0;
}

// R rows' dot products with NT tokens' activations, summed over the warp:
// lane l takes units l, l + 32, ... of every row, U units per step (two for
// one token, to keep more loads in flight; one for several, whose
// accumulators take the registers), each unit dotted with every token. All R rows are computed
// (callers point rows past the end at a valid row and drop those results) and a unit of a step past
// the row's end re-reads the step's first and is dropped: no branch separates the loads, so the
// compiler issues all R * U units' loads before the first product (the bytes in flight that keep
// HBM busy). Per (row, token), the sums run in the same order for every NT, R and U (a dropped unit
// adds +0.0, which leaves a sum that starts at +0.0 unchanged).
template <TensorType T, int R, int NT, bool kExact>
__device__ __forceinline__ void rows_dot_q8_units(const uint8_t* const (&rows)[R], int n_units,
                                                  int64_t in_dim, float (&acc)[NT][R]) {
  constexpr int U = NT == 1 ? 2 : 1;  // four measured slower on the 7B's 18944-long rows
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < NT; ++t) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[t][r] = 0.0f;
  }
  for (int u = lane; u < n_units; u += 32 * U) {
    float a[U][NT][R];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const int uj = u + 32 * j < n_units ? u + 32 * j : u;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const Q8Smem xs = q8_smem(in_dim, t);
#pragma unroll
        for (int r = 0; r < R; ++r) a[j][t][r] = unit_dot<T>(rows[r], uj, xs);
      }
    }
#pragma unroll
    for (int j = 0; j < U; ++j) {
#pragma unroll
      for (int t = 0; t < NT; ++t) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float v = u + 32 * j < n_units ? a[j][t][r] : 0.0f;
          // kExact: __fadd_rn is never contracted into an FMA with the
          // product in a[j][t][r], so every instantiation rounds alike (the
          // batch-invariant kernels); else the compiler may fuse (one token
          // outside the engine, a few percent faster).
          if constexpr (kExact) {
            acc[t][r] = __fadd_rn(acc[t][r], v);
          } else {
            acc[t][r] += v;
          }
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[t][r] = warp_sum(acc[t][r]);
  }
}

// The staged Q6_K path's stage: after the block's one activation, kWarps
// stages of Q6Stage<R> (16-byte aligned: smem_bytes is a multiple of 16).
template <int R>
__device__ __forceinline__ uint4* q6_stage(int64_t in_dim) {
  extern __shared__ int4 smem[];
  return reinterpret_cast<uint4*>(reinterpret_cast<int8_t*>(smem) + in_dim * 3 / 2) +
         (threadIdx.x >> 5) * (Q6Stage<R>::kBytesPerWarp / 16);
}

// rows_dot_q8_units for R rows with NT tokens, or, for Q6_K with one token
// in the kernels that need not round as the multi-token ones, the staged
// path (a different order of the same products).
template <TensorType T, int R, int NT, bool kExact>
__device__ __forceinline__ void rows_dot_q8(const uint8_t* const (&rows)[R], int n_units,
                                            int64_t in_dim, float (&acc)[NT][R]) {
  if constexpr (uses_q6_stage(T, NT, kExact)) {
    rows_dot_q6k_staged<R>(rows, n_units, q8_smem(in_dim, 0), q6_stage<R>(in_dim), acc[0]);
  } else {
    rows_dot_q8_units<T, R, NT, kExact>(rows, n_units, in_dim, acc);
  }
}

// Bytes of one token's activation: q, d, sum32, sum8 (3 * in_dim / 2, a
// multiple of 16 for in_dim a multiple of 32: every token's q stays aligned).
size_t smem_bytes(int64_t in_dim) {
  return static_cast<size_t>(in_dim) + static_cast<size_t>(in_dim / 32) * 8 +
         static_cast<size_t>(in_dim / 8) * sizeof(int16_t);
}

// The warp's first task (row group) of a grid-stride walk, and how many of
// the R rows from row0 exist.
__device__ __forceinline__ int64_t first_task() {
  return static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
}
__device__ __forceinline__ int rows_at(int64_t total, int64_t row0, int R) {
  return static_cast<int>(total - row0 < R ? total - row0 : R);
}

// The block's tokens: NT from blockIdx.y * NT, of which `n` exist.
struct TokenGroup {
  int64_t first;
  int n;
};
template <int NT>
__device__ __forceinline__ TokenGroup token_group(int64_t n_tokens) {
  const int64_t first = static_cast<int64_t>(blockIdx.y) * NT;
  return {first, static_cast<int>(n_tokens - first < NT ? n_tokens - first : NT)};
}

// Every kernel's start: trigger dependents, prefetch the warp's first R rows
// of w0 (and w1, when not null; rows of w_rows), wait for the previous kernel,
// then build the NT tokens' quantized activations (a token past the batch
// repeats the group's first; its results are dropped). Every thread calls it.
template <int R, int NT>
__device__ __forceinline__ TokenGroup q8_prologue(const uint8_t* w0, const uint8_t* w1,
                                                  size_t row_bytes, int64_t w_rows,
                                                  const Q8Input& in) {
  pdl_launch_dependents();
  const int64_t row0 = first_task() * R;
  if (row0 < w_rows) {
    const int n = rows_at(w_rows, row0, R);
    prefetch_rows(w0, row_bytes, row0, n);
    if (w1 != nullptr) prefetch_rows(w1, row_bytes, row0, n);
  }
  pdl_wait();
  const TokenGroup tg = token_group<NT>(in.n_tokens);
  if (in.quantized != nullptr) {  // copied: 16-byte words of each token's activation
    extern __shared__ int4 smem[];
    const int64_t words = in.in_dim * 3 / 2 / 16;
    const auto* src = reinterpret_cast<const int4*>(in.quantized);
    for (int64_t i = threadIdx.x; i < NT * words; i += kThreads) {
      const int64_t t = i / words;
      smem[i] = src[(tg.first + (t < tg.n ? t : 0)) * words + i % words];
    }
    __syncthreads();
    return tg;
  }
#pragma unroll 1
  for (int t = 0; t < NT; ++t) {
    Q8Input token = in;
    token.x = in.x + (tg.first + (t < tg.n ? t : 0)) * in.in_dim;
    quantize_activation(token, q8_smem(in.in_dim, t));
  }
  return tg;
}

// y[t][r] = (W[r] . x[t] + bias[r]) + residual[t][r] (bias, residual optional).
template <TensorType T, int R, int NT, bool kExact>
__global__ void __launch_bounds__(kThreads)
    gemv_q8_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t rows, Q8Input in,
                   const float* __restrict__ bias, const float* residual, float* y) {
  const TokenGroup tg = q8_prologue<R, NT>(w, nullptr, row_bytes, rows, in);
  const int lane = threadIdx.x & 31;
  const int64_t n_groups = (rows + R - 1) / R;
  for (int64_t g = first_task(); g < n_groups; g += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t row0 = g * R;
    const int n = rows_at(rows, row0, R);
    const uint8_t* rp[R];
#pragma unroll
    for (int r = 0; r < R; ++r) rp[r] = w + (row0 + (r < n ? r : 0)) * row_bytes;
    // One token: bias and residual read before the dot (their latency hides
    // behind it).
    float b1[R] = {}, res1[R] = {};
    if (NT == 1 && lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int64_t i = tg.first * rows + row0 + (r < n ? r : 0);
        if (bias != nullptr) b1[r] = bias[row0 + (r < n ? r : 0)];
        if (residual != nullptr) res1[r] = residual[i];
      }
    }
    float acc[NT][R];
    rows_dot_q8<T, R, NT, kExact>(rp, static_cast<int>(in.in_dim / 32), in.in_dim, acc);
    if (lane == 0) {
#pragma unroll
      for (int t = 0; t < NT; ++t) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (t < tg.n && r < n) {
            const int64_t i = (tg.first + t) * rows + row0 + r;
            float v = acc[t][r];
            if (bias != nullptr) v = __fadd_rn(v, NT == 1 ? b1[r] : bias[row0 + r]);
            // y may alias residual
            if (residual != nullptr) v = __fadd_rn(v, NT == 1 ? res1[r] : residual[i]);
            y[i] = v;
          }
        }
      }
    }
  }
}

// y[t][r] = act(gate[r] . x[t]) * (up[r] . x[t]).
template <TensorType T, int R, int NT, bool kGelu, bool kExact>
__global__ void __launch_bounds__(kThreads)
    ffn_q8_kernel(const uint8_t* __restrict__ gate, const uint8_t* __restrict__ up,
                  size_t row_bytes, int64_t rows, Q8Input in, float* __restrict__ y) {
  const TokenGroup tg = q8_prologue<R, NT>(gate, up, row_bytes, rows, in);
  const int lane = threadIdx.x & 31;
  const int64_t n_groups = (rows + R - 1) / R;
  for (int64_t g = first_task(); g < n_groups; g += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t row0 = g * R;
    const int n = rows_at(rows, row0, R);
    const uint8_t* rp[2 * R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t off = (row0 + (r < n ? r : 0)) * static_cast<int64_t>(row_bytes);
      rp[r] = gate + off;
      rp[R + r] = up + off;
    }
    float acc[NT][2 * R];
    // Gate and up rows in one pass: 2R rows' loads in flight.
    rows_dot_q8<T, 2 * R, NT, kExact>(rp, static_cast<int>(in.in_dim / 32), in.in_dim, acc);
    if (lane == 0) {
#pragma unroll
      for (int t = 0; t < NT; ++t) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (t < tg.n && r < n) {
            const float gv = acc[t][r];
            y[(tg.first + t) * rows + row0 + r] = (kGelu ? gelu_f(gv) : silu_f(gv)) * acc[t][R + r];
          }
        }
      }
    }
  }
}

// Rows [row0, row0 + R) of the stack [s.w[0] rows | s.w[1] rows | s.w[2]
// rows] (`total` of them) dotted with the block's one token, into y[row].
template <TensorType T, int R>
__device__ __forceinline__ void stacked_group(const Q8Stack& s, int64_t row0, int64_t total,
                                              const Q8Input& in, float* __restrict__ y) {
  const int n = rows_at(total, row0, R);
  const uint8_t* rp[R];
  const float* bias[R];
  int64_t local[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    // Selects, not indexing: a dynamic index into the parameter struct
    // would copy it to local memory.
    int64_t row = row0 + (r < n ? r : 0);
    const bool in0 = row < s.rows[0];
    if (!in0) row -= s.rows[0];
    const bool in1 = !in0 && row < s.rows[1];
    if (!in0 && !in1) row -= s.rows[1];
    const uint8_t* base = in0 ? s.w[0] : (in1 ? s.w[1] : s.w[2]);
    const size_t rb = in0 ? s.row_bytes[0] : (in1 ? s.row_bytes[1] : s.row_bytes[2]);
    rp[r] = base + row * static_cast<int64_t>(rb);
    bias[r] = in0 ? s.bias[0] : (in1 ? s.bias[1] : s.bias[2]);
    local[r] = row;
  }
  float acc[1][R];
  rows_dot_q8<T, R, 1, false>(rp, static_cast<int>(in.in_dim / 32), in.in_dim, acc);
  if ((threadIdx.x & 31) == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r < n) y[row0 + r] = acc[0][r] + (bias[r] != nullptr ? bias[r][local[r]] : 0.0f);
    }
  }
}

// Rows of up to three weights stacked: [w0 rows | w1 rows | w2 rows], for
// one token. T == TV: one type, row groups over the whole stack. Else w0 and
// w1 are of type T and w2 (v) of TV: the groups of [w0 | w1] come first,
// then w2's own, so that no warp's rows mix types.
template <TensorType T, TensorType TV>
__global__ void __launch_bounds__(kThreads)
    stacked_q8_kernel(Q8Stack s, Q8Input in, float* __restrict__ y) {
  constexpr int R = 2;
  constexpr bool kSplit = T != TV;
  // Prefetch from the first weight only (most rows; a warp's first group).
  (void)q8_prologue<R, 1>(s.w[0], nullptr, s.row_bytes[0], s.rows[0], in);
  const int64_t rows_a = s.rows[0] + s.rows[1] + (kSplit ? 0 : s.rows[2]);
  const int64_t groups_a = (rows_a + R - 1) / R;
  const int64_t n_groups = groups_a + (kSplit ? (s.rows[2] + R - 1) / R : 0);
  Q8Stack v;  // w2 alone (kSplit)
  v.w[0] = s.w[2];
  v.row_bytes[0] = s.row_bytes[2];
  v.rows[0] = s.rows[2];
  v.bias[0] = s.bias[2];
  for (int64_t g = first_task(); g < n_groups; g += static_cast<int64_t>(gridDim.x) * kWarps) {
    if (!kSplit || g < groups_a) {
      stacked_group<T, R>(s, g * R, rows_a, in, y);
    } else {
      stacked_group<TV, R>(v, (g - groups_a) * R, s.rows[2], in, y + rows_a);
    }
  }
}

// One block per token: its activation normalized and quantized by the same
// code as a GEMV block's own (so the bits are the same), into global memory.
__global__ void __launch_bounds__(kThreads) quantize_q8_kernel(Q8Input in, int8_t* out) {
  Q8Input token = in;
  token.x = in.x + static_cast<int64_t>(blockIdx.x) * in.in_dim;
  quantize_activation(
      token, q8_at(out + static_cast<int64_t>(blockIdx.x) * (in.in_dim * 3 / 2), in.in_dim));
}

// The GLU's rows and their int8 form in one pass (Q8Input::glu_up): thread
// (block x, thread) of token blockIdx.y takes float4 i of the row, writes
// act(gate) * up (the elementwise GLU's numbers, device_math.cuh) to
// glu_out and quantizes it with emit_q8, as quantize_q8_kernel would
// quantize glu_out's row (a 32-value block is 8 lanes of one warp).
__global__ void __launch_bounds__(kThreads) glu_quantize_q8_kernel(Q8Input in, int8_t* out) {
  const int64_t t = blockIdx.y, n4 = in.in_dim / 4;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t row = t * n4;
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (i < n4) {
    const float4 g = reinterpret_cast<const float4*>(in.x)[row + i];
    const float4 u = reinterpret_cast<const float4*>(in.glu_up)[row + i];
    const auto act = [&](float x) { return in.glu_gelu ? gelu_f(x) : silu_f(x); };
    v = make_float4(act(g.x) * u.x, act(g.y) * u.y, act(g.z) * u.z, act(g.w) * u.w);
    reinterpret_cast<float4*>(in.glu_out)[row + i] = v;
  }
  emit_q8(i, n4, v, q8_at(out + t * (in.in_dim * 3 / 2), in.in_dim), in.scale_per_256);
}

// Launches a kernel of this file (kThreads per block) with PDL, over
// `token_groups` groups of tokens (grid y).
template <typename... Params, typename... Args>
cudaError_t launch_q8(void (*kernel)(Params...), unsigned grid, int64_t token_groups, size_t smem,
                      cudaStream_t stream, Args... args) {
  return launch_pdl(kernel, dim3(grid, static_cast<unsigned>(token_groups)), dim3(kThreads), smem,
                    stream, args...);
}

// Shared memory a block may take for its tokens' activations.
constexpr size_t kMaxTokenSmem = 100 * 1024;

// Calls f(IntTag<NT>) with the tokens per block for n_tokens tokens of
// in_dim: 1, 2, 4 or 8 (a group wastes at most a quarter of its tokens
// from 6 up), fewer where NT activations would not fit kMaxTokenSmem.
template <class F>
void choose_tokens(int64_t n_tokens, int64_t in_dim, F&& f) {
  const size_t per = smem_bytes(in_dim);
  if (n_tokens >= 6 && 8 * per <= kMaxTokenSmem) {
    f(std::integral_constant<int, 8>{});
  } else if (n_tokens >= 3 && 4 * per <= kMaxTokenSmem) {
    f(std::integral_constant<int, 4>{});
  } else if (n_tokens >= 2 && 2 * per <= kMaxTokenSmem) {
    f(std::integral_constant<int, 2>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

template <class F>
bool dispatch_q8(TensorType t, F&& f) {
  switch (t) {
    case TensorType::Q4_0:
      f(TypeTag<TensorType::Q4_0>{});
      return true;
    case TensorType::Q8_0:
      f(TypeTag<TensorType::Q8_0>{});
      return true;
    case TensorType::Q4_K:
      f(TypeTag<TensorType::Q4_K>{});
      return true;
    case TensorType::Q5_K:
      f(TypeTag<TensorType::Q5_K>{});
      return true;
    case TensorType::Q6_K:
      f(TypeTag<TensorType::Q6_K>{});
      return true;
    default:
      return false;
  }
}

// Blocks for `groups` warp tasks: one warp each, at most one full wave (the
// blocks that fit on every SM at once, by the kernel's registers and shared
// memory) so that no block waits for another to finish.
// Shared memory past the default 48 KiB is opted into here, before the
// occupancy query (a refusal shows as the launch's error).
template <typename Kernel>
unsigned grid_for(Kernel kernel, size_t smem, int64_t groups) {
  if (smem > 48 * 1024 && cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem)) != cudaSuccess) {
    (void)cudaGetLastError();
  }
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return 1;
    }
    return n;
  }();
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem) !=
          cudaSuccess ||
      per_sm < 1) {
    (void)cudaGetLastError();
    per_sm = 1;
  }
  const int64_t blocks = (groups + kWarps - 1) / kWarps;
  const int64_t cap = static_cast<int64_t>(sms) * std::min(per_sm, kMaxBlocksPerSm);
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

bool shape_ok(int64_t in_dim, int64_t n_tokens) {
  return in_dim > 0 && in_dim % 32 == 0 && n_tokens >= 1 && n_tokens <= 65535 * int64_t{8};
}

bool input_ok(const Q8Input& in) {
  return in.x != nullptr && shape_ok(in.in_dim, in.n_tokens);
}

}  // namespace

bool has_q8_gemv(TensorType type, int64_t in_dim) {
  const bool k_quant =
      type == TensorType::Q4_K || type == TensorType::Q5_K || type == TensorType::Q6_K;
  return dispatch_q8(type, [](auto) {}) && in_dim % (k_quant ? 256 : 32) == 0 &&
         smem_bytes(in_dim) <= 48 * 1024;
}

size_t q8_activation_bytes(int64_t in_dim) {
  return smem_bytes(in_dim);
}

bool quantize_q8_takes(int64_t in_dim, int64_t n_tokens) {
  return shape_ok(in_dim, n_tokens) && smem_bytes(in_dim) % 16 == 0;
}

cudaError_t launch_quantize_q8(const Q8Input& in, int8_t* out, cudaStream_t stream) {
  if (!input_ok(in) || in.quantized != nullptr || smem_bytes(in.in_dim) % 16 != 0 ||
      (in.glu_up != nullptr && (in.rms_norm || in.glu_out == nullptr)) ||
      (in.scale_per_256 && in.in_dim % 256 != 0)) {
    return cudaErrorInvalidValue;
  }
  if (in.glu_up != nullptr) {  // a float4 a thread: (blocks of a row, token) = (grid x, grid y)
    const int64_t n4 = in.in_dim / 4;
    const dim3 grid(static_cast<unsigned>((n4 + kThreads - 1) / kThreads),
                    static_cast<unsigned>(in.n_tokens));
    glu_quantize_q8_kernel<<<grid, kThreads, 0, stream>>>(in, out);
  } else {
    quantize_q8_kernel<<<static_cast<unsigned>(in.n_tokens), kThreads, 0, stream>>>(in, out);
  }
  return cudaGetLastError();
}

cudaError_t launch_gemv_q8(TensorType type, const void* w, size_t row_bytes, int64_t rows,
                           const Q8Input& in, const float* bias, const float* residual, float* y,
                           cudaStream_t stream) {
  if (!has_q8_gemv(type, in.in_dim) || !input_ok(in) || in.glu_up != nullptr) {
    return cudaErrorInvalidValue;
  }
  const auto* wb = static_cast<const uint8_t*>(w);
  cudaError_t e = cudaSuccess;
  dispatch_q8(type, [&](auto tag) {
    constexpr TensorType T = decltype(tag)::value;
    choose_tokens(in.n_tokens, in.in_dim, [&](auto nt) {
      constexpr int NT = decltype(nt)::value;
      const size_t act = NT * smem_bytes(in.in_dim);
      const int64_t groups = (in.n_tokens + NT - 1) / NT;
      // Four rows per warp for many rows (the output matrix) or several
      // tokens (each activation load then serves four rows); else one.
      // Several tokens, or one in the engine: the exact kernels.
      constexpr bool kMany = NT > 1;
      const bool exact = kMany || in.batch_invariant;
      if (rows >= 8 * 1024 || kMany) {
        constexpr int R = 4;
        const size_t smem = act + stage_bytes<R>(T, NT, exact);
        const auto kernel =
            exact ? gemv_q8_kernel<T, R, NT, true> : gemv_q8_kernel<T, R, NT, kMany>;
        e = launch_q8(kernel, grid_for(kernel, smem, (rows + R - 1) / R), groups, smem, stream, wb,
                      row_bytes, rows, in, bias, residual, y);
      } else {
        const size_t smem = act + stage_bytes<1>(T, NT, exact);
        const auto kernel =
            exact ? gemv_q8_kernel<T, 1, NT, true> : gemv_q8_kernel<T, 1, NT, kMany>;
        e = launch_q8(kernel, grid_for(kernel, smem, rows), groups, smem, stream, wb, row_bytes,
                      rows, in, bias, residual, y);
      }
    });
  });
  return e;
}

cudaError_t launch_ffn_q8(TensorType type, const void* gate, const void* up, size_t row_bytes,
                          int64_t n_ff, const Q8Input& in, bool gelu, float* y,
                          cudaStream_t stream) {
  if (!has_q8_gemv(type, in.in_dim) || !input_ok(in) || in.glu_up != nullptr) {
    return cudaErrorInvalidValue;
  }
  const auto* g = static_cast<const uint8_t*>(gate);
  const auto* u = static_cast<const uint8_t*>(up);
  cudaError_t e = cudaSuccess;
  dispatch_q8(type, [&](auto tag) {
    constexpr TensorType T = decltype(tag)::value;
    choose_tokens(in.n_tokens, in.in_dim, [&](auto nt) {
      constexpr int NT = decltype(nt)::value;
      constexpr int R = 2;
      const int64_t groups = (in.n_tokens + NT - 1) / NT;
      constexpr bool kMany = NT > 1;
      const bool exact = kMany || in.batch_invariant;
      const size_t smem = NT * smem_bytes(in.in_dim) + stage_bytes<2 * R>(T, NT, exact);
      const auto kernel =
          gelu
              ? (exact ? ffn_q8_kernel<T, R, NT, true, true> : ffn_q8_kernel<T, R, NT, true, kMany>)
              : (exact ? ffn_q8_kernel<T, R, NT, false, true>
                       : ffn_q8_kernel<T, R, NT, false, kMany>);
      e = launch_q8(kernel, grid_for(kernel, smem, (n_ff + R - 1) / R), groups, smem, stream, g, u,
                    row_bytes, n_ff, in, y);
    });
  });
  return e;
}

bool has_stacked_q8(TensorType qk_type, TensorType v_type, int64_t in_dim) {
  const bool pair =
      qk_type == v_type ||
      ((qk_type == TensorType::Q4_K || qk_type == TensorType::Q5_K) && v_type == TensorType::Q6_K);
  return pair && has_q8_gemv(qk_type, in_dim) && has_q8_gemv(v_type, in_dim);
}

cudaError_t launch_stacked_q8(TensorType qk_type, TensorType v_type, const Q8Stack& s,
                              const Q8Input& in, float* y, cudaStream_t stream) {
  if (!has_stacked_q8(qk_type, v_type, in.in_dim) || !input_ok(in) || in.n_tokens != 1) {
    return cudaErrorInvalidValue;
  }
  constexpr int R = 2;
  const int64_t rows_a = s.rows[0] + s.rows[1] + (qk_type == v_type ? s.rows[2] : 0);
  const int64_t groups = (rows_a + R - 1) / R + (qk_type == v_type ? 0 : (s.rows[2] + R - 1) / R);
  const size_t smem =
      smem_bytes(in.in_dim) +
      (qk_type == TensorType::Q6_K || v_type == TensorType::Q6_K ? q6_stage_bytes<R>() : 0);
  if (qk_type != v_type) {  // has_stacked_q8: Q4_K or Q5_K q/k with a Q6_K v (the _M files)
    const auto kernel = qk_type == TensorType::Q5_K
                            ? stacked_q8_kernel<TensorType::Q5_K, TensorType::Q6_K>
                            : stacked_q8_kernel<TensorType::Q4_K, TensorType::Q6_K>;
    return launch_q8(kernel, grid_for(kernel, smem, groups), 1, smem, stream, s, in, y);
  }
  cudaError_t e = cudaSuccess;
  dispatch_q8(qk_type, [&](auto tag) {
    constexpr TensorType T = decltype(tag)::value;
    const auto kernel = stacked_q8_kernel<T, T>;
    e = launch_q8(kernel, grid_for(kernel, smem, groups), 1, smem, stream, s, in, y);
  });
  return e;
}

}  // namespace minfer::cuda
