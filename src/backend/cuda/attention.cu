// Causal attention over the KV cache: one block per (query token, head), of
// 16 warps when there are few (token, head) pairs (decode: long key ranges,
// few blocks), else 4. Warp w takes keys j_begin + w, j_begin + w + kWarps,
// ...; its lanes hold head_dim / 32 dims each of the query, of the running
// output and of every key/value row they read (coalesced rows). Each warp
// keeps its own online softmax (running max m, sum s, output acc); the warps'
// states are merged through shared memory at the end. A query sees key j iff
// j <= position and (no window or position - j < window).
//
// Keys at positions >= the batch's first position come from the batch's own
// f32 k/v (AttentionArgs::batch_k/v) when the batch's positions are
// consecutive, so a prompt attends to itself at full precision whatever the
// cache type; earlier keys come from the cache (f32, or f16 widened to f32).
// The query stays f32. Scores and sums are f32.
#include <cuda_fp16.h>

#include "backend/cuda/kernels.h"

namespace minfer::cuda {
namespace {

constexpr int kFewWarps = 4, kManyWarps = 16;
constexpr int64_t kFewBlocks = 256;  // below this many (token, head) pairs: kManyWarps

template <bool kF16>
__device__ __forceinline__ float load_kv(const void* base, int64_t idx) {
  if constexpr (kF16) {
    return __half2float(static_cast<const __half*>(base)[idx]);
  } else {
    return static_cast<const float*>(base)[idx];
  }
}

template <int kDpl, bool kF16, int kWarps>  // kDpl: dims per lane (head_dim / 32)
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttentionArgs a) {
  __shared__ float s_m[kWarps], s_s[kWarps];
  __shared__ float s_acc[kWarps][kDpl * 32];
  __shared__ int s_consecutive;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.x / a.n_head;
  const int64_t h = blockIdx.x % a.n_head;
  const int64_t D = kDpl * 32;
  const int64_t kv_row = a.n_head_kv * D;
  const int64_t kvh = h / (a.n_head / a.n_head_kv);

  // Are the batch's positions consecutive? (Then its own k/v are used.)
  if (threadIdx.x == 0) s_consecutive = 1;
  __syncthreads();
  const int32_t first = a.positions[0];
  for (int64_t i = threadIdx.x; i < a.n_tokens; i += blockDim.x) {
    if (a.positions[i] != first + i) s_consecutive = 0;
  }
  __syncthreads();
  const bool use_batch = s_consecutive != 0 && a.batch_k != nullptr && a.batch_v != nullptr;

  const int64_t pos = a.positions[t];
  int64_t j_begin = 0;
  if (a.sliding_window > 0) j_begin = pos - a.sliding_window + 1 > 0 ? pos - a.sliding_window + 1 : 0;
  const int64_t j_end = pos + 1 < a.n_ctx ? pos + 1 : a.n_ctx;

  float q[kDpl], acc[kDpl];
  const float* qh = a.q + t * a.n_head * D + h * D;
#pragma unroll
  for (int i = 0; i < kDpl; ++i) {
    q[i] = qh[lane + 32 * i];
    acc[i] = 0.0f;
  }
  float m = -INFINITY, s = 0.0f;
  for (int64_t j = j_begin + warp; j < j_end; j += kWarps) {
    const bool from_batch = use_batch && j >= first;
    float kv[kDpl];
    if (from_batch) {
      const float* kr = a.batch_k + (j - first) * kv_row + kvh * D;
#pragma unroll
      for (int i = 0; i < kDpl; ++i) kv[i] = kr[lane + 32 * i];
    } else {
      const int64_t base = j * kv_row + kvh * D;
#pragma unroll
      for (int i = 0; i < kDpl; ++i) kv[i] = load_kv<kF16>(a.k_cache, base + lane + 32 * i);
    }
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) dot += q[i] * kv[i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    const float sc = dot * a.scale;
    const float m_new = fmaxf(m, sc);
    const float ms = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = expf(sc - m_new);
    m = m_new;
    if (from_batch) {
      const float* vr = a.batch_v + (j - first) * kv_row + kvh * D;
#pragma unroll
      for (int i = 0; i < kDpl; ++i) kv[i] = vr[lane + 32 * i];
    } else {
      const int64_t base = j * kv_row + kvh * D;
#pragma unroll
      for (int i = 0; i < kDpl; ++i) kv[i] = load_kv<kF16>(a.v_cache, base + lane + 32 * i);
    }
#pragma unroll
    for (int i = 0; i < kDpl; ++i) acc[i] = acc[i] * ms + p * kv[i];
    s = s * ms + p;
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_s[warp] = s;
  }
#pragma unroll
  for (int i = 0; i < kDpl; ++i) s_acc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  float m_all = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, s_m[w]);
  float s_all = 0.0f;
  float f[kWarps];
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    f[w] = s_m[w] == -INFINITY ? 0.0f : expf(s_m[w] - m_all);
    s_all += s_s[w] * f[w];
  }
  const float inv = s_all > 0.0f ? 1.0f / s_all : 0.0f;
  float* oh = a.out + t * a.n_head * D + h * D;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += s_acc[w][d] * f[w];
    oh[d] = o * inv;
  }
}

template <int kDpl, int kWarps>
void launch_warps(const AttentionArgs& a, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(a.n_tokens * a.n_head);
  if (a.f16_cache) {
    attention_kernel<kDpl, true, kWarps><<<grid, kWarps * 32, 0, stream>>>(a);
  } else {
    attention_kernel<kDpl, false, kWarps><<<grid, kWarps * 32, 0, stream>>>(a);
  }
}

template <int kDpl>
void launch_dpl(const AttentionArgs& a, cudaStream_t stream) {
  if (a.n_tokens * a.n_head < kFewBlocks) {
    launch_warps<kDpl, kManyWarps>(a, stream);
  } else {
    launch_warps<kDpl, kFewWarps>(a, stream);
  }
}

}  // namespace

bool attention_head_dim_ok(int64_t head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 96 || head_dim == 128 ||
         head_dim == 256;
}

cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.n_tokens <= 0) return cudaSuccess;
  switch (a.head_dim) {
    case 32: launch_dpl<1>(a, stream); break;
    case 64: launch_dpl<2>(a, stream); break;
    case 96: launch_dpl<3>(a, stream); break;
    case 128: launch_dpl<4>(a, stream); break;
    case 256: launch_dpl<8>(a, stream); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace minfer::cuda
