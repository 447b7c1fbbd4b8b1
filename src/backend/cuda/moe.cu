// The CUDA kernels of the mixture-of-experts ops (contracts of the ops in
// graph/ir.h, numerics in docs/MOE.md; launchers declared in kernels.h).
//
//   - selection and gating: one warp per token. The row's scores sit in
//     shared memory; each of the n_used rounds is a warp-wide arg-max (a tie
//     to the lower id), the winner's score then marked NaN so it is not
//     picked again (router logits with a NaN are refused before that).
//   - the expert matmul: the GEMV of matmul.cu (device_math.cuh's GemvSplit
//     and rows_dot_lane) with the grid's y dimension over output rows
//     t*n_used+j, each reading its own expert's matrix: one token reads only
//     its n_used experts, and a row's sum never depends on the other rows,
//     so the op is batch-invariant. Activations stay f32.
//   - the weighted sum: one thread per output element, products and sums
//     rounded one by one in order of j (no FMA), as the CPU does.
#include <cmath>
#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"

namespace minfer::cuda {
namespace {

constexpr int kRouteWarps = 4;
constexpr unsigned kFull = 0xffffffffu;
constexpr int kGatingTopKSoftmax = 2;  // graph::MoeGating::kTopKSoftmax
constexpr int kGatingNormalized = 1;   // graph::MoeGating::kSoftmaxNormalized

__device__ __forceinline__ float warp_max_f(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum_f(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// (score a, id ia) ranks before (b, ib): larger score, a tie to the lower id.
// An id < 0 is "none yet".
__device__ __forceinline__ bool ranks_before(float a, int ia, float b, int ib) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  return a > b || (a == b && ia < ib);
}

__device__ void report_once(int* err, int code, int a, int b) {
  if (atomicCAS(err, kErrNone, code) == kErrNone) {
    err[1] = a;
    err[2] = b;
  }
}

__global__ void __launch_bounds__(kRouteWarps * 32)
    moe_topk_kernel(const float* __restrict__ logits, int64_t n_tokens, int n_expert, int n_used,
                    bool softmax_scores, int32_t* __restrict__ ids, int* err) {
  __shared__ float scores[kRouteWarps][kMoeMaxExperts];
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= n_tokens) return;  // whole warps leave; no block barrier follows
  const float* row = logits + t * n_expert;
  float* s = scores[warp];
  float max = -INFINITY;
  bool nan = false;
  for (int e = lane; e < n_expert; e += 32) {
    s[e] = row[e];
    nan = nan || isnan(s[e]);
    max = fmaxf(max, s[e]);
  }
  int32_t* out = ids + t * n_used;
  if (__any_sync(kFull, nan)) {
    if (lane == 0) report_once(err, kErrNanRouterLogit, static_cast<int>(t), n_expert);
    for (int j = lane; j < n_used; j += 32) out[j] = j;  // valid ids for the ops after
    return;
  }
  if (softmax_scores) {  // select on probabilities, as the CPU does
    max = warp_max_f(max);
    float sum = 0.0f;
    for (int e = lane; e < n_expert; e += 32) sum += s[e] = expf(s[e] - max);
    sum = warp_sum_f(sum);
    for (int e = lane; e < n_expert; e += 32) s[e] = s[e] / sum;
  }
  for (int j = 0; j < n_used; ++j) {
    float best = 0.0f;
    int best_id = -1;
    for (int e = lane; e < n_expert; e += 32) {
      if (!isnan(s[e]) && ranks_before(s[e], e, best, best_id)) {
        best = s[e];
        best_id = e;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float b = __shfl_xor_sync(kFull, best, o);
      const int bi = __shfl_xor_sync(kFull, best_id, o);
      if (ranks_before(b, bi, best, best_id)) {
        best = b;
        best_id = bi;
      }
    }
    if (lane == (best_id & 31)) s[best_id] = NAN;  // the owning lane, which alone reads it
    if (lane == 0) out[j] = best_id;
    __syncwarp();
  }
}

__global__ void __launch_bounds__(kRouteWarps * 32)
    moe_weights_kernel(const float* __restrict__ logits, const int32_t* __restrict__ ids,
                       int64_t n_tokens, int n_expert, int n_used, int gating,
                       float* __restrict__ weights, int* err) {
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= n_tokens) return;
  const float* row = logits + t * n_expert;
  const bool mine = lane < n_used;
  int id = mine ? ids[t * n_used + lane] : 0;
  if (mine && (id < 0 || id >= n_expert)) {
    report_once(err, kErrExpertRange, id, n_expert);
    id = 0;
  }
  const float picked = mine ? row[id] : -INFINITY;
  float w;
  if (gating == kGatingTopKSoftmax) {  // softmax over the selected logits only
    const float max = warp_max_f(picked);
    const float e = mine ? expf(picked - max) : 0.0f;
    w = e / warp_sum_f(e);
  } else {  // softmax over all experts, read at the selected ones
    float max = -INFINITY;
    for (int e = lane; e < n_expert; e += 32) max = fmaxf(max, row[e]);
    max = warp_max_f(max);
    float sum = 0.0f;
    for (int e = lane; e < n_expert; e += 32) sum += expf(row[e] - max);
    sum = warp_sum_f(sum);
    w = mine ? expf(picked - max) / sum : 0.0f;
    if (gating == kGatingNormalized) w = w / fmaxf(warp_sum_f(w), 6.103515625e-05f);  // 2^-14
  }
  if (mine) weights[t * n_used + lane] = w;
}

template <TensorType T, int R, int kSplit>
__global__ void __launch_bounds__(kGemvBlockWarps * 32) matmul_id_kernel(MatMulIdArgs a) {
  __shared__ float part[kGemvBlockWarps][R];
  const GemvSplit<R, kSplit> g(blockIdx.x);
  const int64_t n_chunks = a.in_dim / kChunk;
  const int n = g.rows_valid(a.rows);
  const auto* w = static_cast<const uint8_t*>(a.w);
  // Uniform across the block: every thread runs every iteration (reduce may
  // hold a barrier).
  for (int64_t i = blockIdx.y; i < a.n_tokens * a.n_used; i += gridDim.y) {
    int32_t e = a.ids[i];
    if (e < 0 || e >= a.n_expert) {
      if (threadIdx.x == 0 && blockIdx.x == 0) report_once(a.err, kErrExpertRange, e, a.n_expert);
      e = 0;
    }
    const float* x = a.x + (a.per_row_input ? i : i / a.n_used) * a.in_dim;
    float acc[R];
    rows_dot_lane<T, R>(w + static_cast<size_t>(e) * a.expert_bytes + g.row0 * a.row_bytes,
                        a.row_bytes, n, n_chunks, g.c_begin(), g.kStep, x, acc);
    g.reduce(acc, part);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r < n && g.writer()) {
        const int64_t o = g.row0 + r;
        a.y[i * a.rows + o] = acc[r] + (a.bias != nullptr ? a.bias[e * a.rows + o] : 0.0f);
      }
    }
    if constexpr (kSplit > 1) __syncthreads();  // part is written again next round
  }
}

__global__ void moe_sum_kernel(const float* __restrict__ y, const float* __restrict__ w,
                               int64_t n_tokens, int n_used, int64_t dim, float* __restrict__ out) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n_tokens * dim) return;
  const int64_t t = idx / dim, d = idx % dim;
  const float* yt = y + t * n_used * dim + d;
  const float* wt = w + t * n_used;
  float s = __fmul_rn(yt[0], wt[0]);
  for (int j = 1; j < n_used; ++j) s = __fadd_rn(s, __fmul_rn(yt[j * dim], wt[j]));
  out[idx] = s;
}

unsigned route_blocks(int64_t n_tokens) {
  return static_cast<unsigned>((n_tokens + kRouteWarps - 1) / kRouteWarps);
}

}  // namespace

cudaError_t launch_moe_topk(const float* logits, int64_t n_tokens, int n_expert, int n_used,
                            int gating, int32_t* ids, int* err, cudaStream_t stream) {
  moe_topk_kernel<<<route_blocks(n_tokens), kRouteWarps * 32, 0, stream>>>(
      logits, n_tokens, n_expert, n_used, gating != kGatingTopKSoftmax, ids, err);
  return cudaGetLastError();
}

cudaError_t launch_moe_weights(const float* logits, const int32_t* ids, int64_t n_tokens,
                               int n_expert, int n_used, int gating, float* weights, int* err,
                               cudaStream_t stream) {
  moe_weights_kernel<<<route_blocks(n_tokens), kRouteWarps * 32, 0, stream>>>(
      logits, ids, n_tokens, n_expert, n_used, gating, weights, err);
  return cudaGetLastError();
}

cudaError_t launch_matmul_id(const MatMulIdArgs& a, cudaStream_t stream) {
  const int64_t out_rows = a.n_tokens * a.n_used;
  const bool known = dispatch_type(a.type, [&](auto tag) {
    constexpr TensorType T = decltype(tag)::value;
    choose_gemv_split(a.rows, a.in_dim / kChunk, 4, [&](auto r, auto split) {
      constexpr int kR = decltype(r)::value, kS = decltype(split)::value;
      constexpr int64_t per_block = GemvSplit<kR, kS>::kRowsPerBlock;
      const dim3 grid(static_cast<unsigned>((a.rows + per_block - 1) / per_block),
                      static_cast<unsigned>(out_rows < 65535 ? out_rows : 65535));
      matmul_id_kernel<T, kR, kS><<<grid, kGemvBlockWarps * 32, 0, stream>>>(a);
    });
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_moe_sum(const float* y, const float* weights, int64_t n_tokens, int n_used,
                           int64_t dim, float* out, cudaStream_t stream) {
  const int64_t n = n_tokens * dim;
  moe_sum_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(y, weights, n_tokens,
                                                                             n_used, dim, out);
  return cudaGetLastError();
}

}  // namespace minfer::cuda
