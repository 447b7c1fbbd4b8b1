// The per-(token, head) decode kernels of attention.cu (its only includer;
// the comment at its top says when each runs): the per-token kernel, the
// split-KV cluster kernel, and the device helpers they share with the tiled
// kernel (key ranges, page tables, the batch's own k/v rows).
#pragma once

#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_cache.cuh"
#include "backend/cuda/pdl.cuh"

namespace minfer::cuda::attn {

using quant::TensorType;

constexpr int kFewWarps = 4, kManyWarps = 16;
constexpr int64_t kFewBlocks = 256;    // below this many (token, head) pairs: kManyWarps
constexpr int kSplitWarps = 8;         // warps per block of the split (cluster) kernel
constexpr int kMaxClusterSplit = 8;    // blocks per cluster: the portable cluster size
constexpr int64_t kSplitMinCtx = 512;  // cache capacity below which decode never splits

// Whether the batch's positions are consecutive and its own k/v are given
// (then keys at positions >= positions[0] come from them). Every thread of
// the block must call it (two barriers).
__device__ __forceinline__ bool batch_kv_usable(const AttentionArgs& a, int* s_consecutive) {
  if (threadIdx.x == 0) *s_consecutive = 1;
  __syncthreads();
  const int32_t first = a.positions[0];
  for (int64_t i = threadIdx.x; i < a.n_tokens; i += blockDim.x) {
    if (a.positions[i] != first + i) *s_consecutive = 0;
  }
  __syncthreads();
  return *s_consecutive != 0 && a.batch_k != nullptr && a.batch_v != nullptr;
}

// Floats from one token's query row to the next.
__device__ __forceinline__ int64_t q_row(const AttentionArgs& a) {
  return a.q_stride > 0 ? a.q_stride : a.n_head * a.head_dim;
}

// Floats from one token's batch_k (batch_v) row to the next.
__device__ __forceinline__ int64_t batch_row(const AttentionArgs& a) {
  return a.batch_stride > 0 ? a.batch_stride : a.n_head_kv * a.head_dim;
}

// The keys [*j_begin, *j_end) a query at `pos` sees (empty when j_end <= j_begin).
__device__ __forceinline__ void key_range(const AttentionArgs& a, int64_t pos, int64_t* j_begin,
                                          int64_t* j_end) {
  *j_begin = 0;
  if (a.sliding_window > 0 && pos - a.sliding_window + 1 > 0) *j_begin = pos - a.sliding_window + 1;
  *j_end = pos + 1 < a.n_ctx ? pos + 1 : a.n_ctx;
}

// Position j's dims lane + 32 i of KV head kvh, from the batch's own f32
// rows (batch, when from_batch: row j - first, batch_row floats apart) or
// from cache row `row` (type T).
template <TensorType T, int kDpl>
__device__ __forceinline__ void load_kv_row(const float* batch, const void* cache, bool from_batch,
                                            int64_t j, int64_t row, int64_t first, int64_t kv_row,
                                            int64_t batch_row, int64_t kvh, float (&out)[kDpl]) {
  const int lane = threadIdx.x & 31;
  constexpr int64_t D = kDpl * 32;
  if (from_batch) {
    const float* r = batch + (j - first) * batch_row + kvh * D;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) out[i] = r[lane + 32 * i];
  } else {
#pragma unroll
    for (int i = 0; i < kDpl; ++i) out[i] = kv_load<T>(cache, row, kv_row, kvh * D + lane + 32 * i);
  }
}

// One warp's online softmax over keys j_lo + warp, j_lo + warp + kWarps, ...
// below j_hi of KV head kvh, for kG query heads of that KV head, head g's
// dims lane + 32 i given by q(g, i); updates (m[g], s[g], acc[g]) (m = -inf, s = 0,
// acc = 0 before the first key; unchanged when the warp has no key). Keys go
// kKeys at a time: all their K and V rows are loaded before the first dot
// product (bytes in flight) and serve every head, the kKeys scores share one
// rescale of (s, acc). Every rounding is explicit, so a head's numbers are
// the same whatever kG (the grouped kernel's are the per-head kernel's, bit
// for bit). No barrier: the bounds may differ between warps, not within one.
// The cache row of position j for a query whose page-table row is `pages`
// (null: the cache rows are the positions).
__device__ __forceinline__ int64_t cache_row(const AttentionArgs& a, const int32_t* pages,
                                             int64_t j) {
  if (pages == nullptr) return j;
  return static_cast<int64_t>(pages[j / a.page_size]) * a.page_size + j % a.page_size;
}

// The page-table row of query token t (null when the cache is not paged).
__device__ __forceinline__ const int32_t* pages_of(const AttentionArgs& a, int64_t t) {
  return a.page_table == nullptr ? nullptr : a.page_table + a.seq_slots[t] * a.max_pages;
}

template <int kDpl, TensorType KT, TensorType VT, int kWarps, int kG, class Query>
__device__ __forceinline__ void warp_attend(const AttentionArgs& a, const Query& q, int64_t kvh,
                                            int64_t j_lo, int64_t j_hi, bool use_batch,
                                            const int32_t* pages, float (&m)[kG], float (&s)[kG],
                                            float (&acc)[kG][kDpl]) {
  constexpr int kKeys = kDpl >= 8 ? 2 : 4;
  const int64_t kv_row = a.n_head_kv * (kDpl * 32), b_row = batch_row(a);
  const int32_t first = a.positions[0];
  for (int64_t j0 = j_lo + (threadIdx.x >> 5); j0 < j_hi; j0 += kWarps * kKeys) {
    float kr[kKeys][kDpl], vr[kKeys][kDpl];
    bool valid[kKeys];
#pragma unroll
    for (int c = 0; c < kKeys; ++c) {
      valid[c] = j0 + c * kWarps < j_hi;
      const int64_t j = valid[c] ? j0 + c * kWarps : j0;  // a past-the-end key re-reads j0
      const bool from_batch = use_batch && j >= first;
      const int64_t row = cache_row(a, pages, j);
      load_kv_row<KT>(a.batch_k, a.k_cache, from_batch, j, row, first, kv_row, b_row, kvh, kr[c]);
      load_kv_row<VT>(a.batch_v, a.v_cache, from_batch, j, row, first, kv_row, b_row, kvh, vr[c]);
    }
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      float sc[kKeys];
#pragma unroll
      for (int c = 0; c < kKeys; ++c) {
        sc[c] = 0.0f;
#pragma unroll
        for (int i = 0; i < kDpl; ++i) sc[c] = __fmaf_rn(q(g, i), kr[c][i], sc[c]);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int c = 0; c < kKeys; ++c) {
          sc[c] = __fadd_rn(sc[c], __shfl_xor_sync(0xffffffffu, sc[c], o));
        }
      }
      float m_new = m[g];
#pragma unroll
      for (int c = 0; c < kKeys; ++c) {
        sc[c] = valid[c] ? __fmul_rn(sc[c], a.scale) : -INFINITY;
        m_new = fmaxf(m_new, sc[c]);  // finite: key j0 is valid
      }
      const float ms = expf(__fsub_rn(m[g], m_new));  // 0 on the first keys (m = -inf)
      s[g] = __fmul_rn(s[g], ms);
#pragma unroll
      for (int i = 0; i < kDpl; ++i) acc[g][i] = __fmul_rn(acc[g][i], ms);
#pragma unroll
      for (int c = 0; c < kKeys; ++c) {
        const float p = expf(__fsub_rn(sc[c], m_new));  // 0 for a past-the-end key
        s[g] = __fadd_rn(s[g], p);
#pragma unroll
        for (int i = 0; i < kDpl; ++i) acc[g][i] = __fmaf_rn(p, vr[c][i], acc[g][i]);
      }
      m[g] = m_new;
    }
  }
}

// Folds a sink logit into a merged online softmax (max m, sum *s) as one
// more key without a value, in llama.cpp's order: when the sink is the new
// maximum, what was accumulated is rescaled to it and the sink adds
// exp(0) = 1; else it adds expf(sink - m). Returns the factor the output
// sum is to be multiplied by (1 when not rescaled). With no key seen (m =
// -inf) the factor is 0 and the sum 1, so the row stays 0. Every rounding
// is explicit, so each kernel folds a head the same way.
__device__ __forceinline__ float fold_sink(float sink, float m, float* s) {
  if (sink > m) {
    const float ms = expf(__fsub_rn(m, sink));
    *s = __fadd_rn(__fmul_rn(*s, ms), 1.0f);
    return ms;
  }
  *s = __fadd_rn(*s, expf(__fsub_rn(sink, m)));
  return 1.0f;
}

// Head h's sink logit, or null when the node has none.
__device__ __forceinline__ const float* sink_of(const AttentionArgs& a, int64_t h) {
  return a.sinks == nullptr ? nullptr : a.sinks + h;
}

// Shared memory of a block's in-block merge: each warp's (m, s, acc).
template <int kDpl, int kWarps>
struct WarpStates {
  float m[kWarps], s[kWarps];
  float acc[kWarps][kDpl * 32];
};

// Merges the block's kWarps warp states (each thread passes its warp's) into
// the block's: returns its max m_all and writes its sum to *s_all (every
// thread gets both), and dst[d] = sum_w acc_w[d] exp(m_w - m_all), times
// 1 / s_all when `normalize` (0 when the block saw no key). A `sink` (not
// null only with normalize: a block that holds the whole key range) is
// folded into the merged state before the division (fold_sink); *s_all then
// includes it. dst may be st.acc[0]: thread x reads and writes only the dims
// d = x, x + blockDim.x, ... Every thread must call it (one barrier).
template <int kDpl, int kWarps>
__device__ float merge_warps(WarpStates<kDpl, kWarps>& st, float m, float s,
                             const float (&acc)[kDpl], bool normalize, const float* sink,
                             float* dst, float* s_all) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    st.m[warp] = m;
    st.s[warp] = s;
  }
#pragma unroll
  for (int i = 0; i < kDpl; ++i) st.acc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  float m_all = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, st.m[w]);
  float sum = 0.0f;
  float f[kWarps];
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    f[w] = st.m[w] == -INFINITY ? 0.0f : expf(__fsub_rn(st.m[w], m_all));
    sum = __fmaf_rn(st.s[w], f[w], sum);
  }
  // keep = 1 without a sink: the products below are then exact, the bits unchanged.
  const float keep = sink != nullptr ? fold_sink(*sink, m_all, &sum) : 1.0f;
  const float inv = !normalize ? 1.0f : (sum > 0.0f ? __fdiv_rn(1.0f, sum) : 0.0f);
  for (int d = threadIdx.x; d < kDpl * 32; d += blockDim.x) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o = __fmaf_rn(st.acc[w][d], f[w], o);
    dst[d] = __fmul_rn(__fmul_rn(o, keep), inv);
  }
  *s_all = sum;
  return m_all;
}

// The lanes' query dims lane + 32 i of (token t, head h).
template <int kDpl>
__device__ __forceinline__ void load_query(const AttentionArgs& a, int64_t t, int64_t h,
                                           float (&q)[kDpl]) {
  const int lane = threadIdx.x & 31;
  const float* qh = a.q + t * q_row(a) + h * (kDpl * 32);
#pragma unroll
  for (int i = 0; i < kDpl; ++i) q[i] = qh[lane + 32 * i];
}

// kDpl: dims per lane (head_dim / 32); KT, VT: the cache row types.
// One block per (token, head) = blockIdx.x.
// Launched with PDL (pdl.cuh) for decode: waits before reading anything.
template <int kDpl, TensorType KT, TensorType VT, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttentionArgs a) {
  __shared__ WarpStates<kDpl, kWarps> st;
  __shared__ int s_consecutive;
  pdl_launch_dependents();
  pdl_wait();
  const int64_t t = blockIdx.x / a.n_head, h = blockIdx.x % a.n_head;
  const int64_t kvh = h / (a.n_head / a.n_head_kv);
  const bool use_batch = batch_kv_usable(a, &s_consecutive);
  int64_t j_begin = 0, j_end = 0;
  key_range(a, a.positions[t], &j_begin, &j_end);
  float q[kDpl], acc[1][kDpl] = {};
  load_query(a, t, h, q);
  float m[1] = {-INFINITY}, s[1] = {0.0f};
  warp_attend<kDpl, KT, VT, kWarps, 1>(
      a, [&](int, int i) { return q[i]; }, kvh, j_begin, j_end, use_batch, pages_of(a, t), m, s,
      acc);
  float s_all = 0.0f;
  merge_warps(st, m[0], s[0], acc[0], true, sink_of(a, h), a.out + (t * a.n_head + h) * (kDpl * 32),
              &s_all);
}

// The same per head, kG heads of one KV head a block: (token, KV head) =
// blockIdx.x, the heads kvh * kG .. + kG - 1. Each warp takes the keys it
// would in attention_kernel (same kWarps) and loads their K and V rows once
// for the kG heads; each head's softmax, sums and merge are
// attention_kernel's, bit for bit, so the host may pick either per batch
// without a token's result depending on it (batch invariance).
template <int kDpl, TensorType KT, TensorType VT, int kWarps, int kG>
__global__ void __launch_bounds__(kWarps * 32) attention_group_kernel(AttentionArgs a) {
  constexpr int D = kDpl * 32;
  __shared__ WarpStates<kDpl, kWarps> st;
  __shared__ float s_q[kG][D];  // the heads' queries (registers go to the sums)
  __shared__ int s_consecutive;
  pdl_launch_dependents();
  pdl_wait();
  const int64_t t = blockIdx.x / a.n_head_kv, kvh = blockIdx.x % a.n_head_kv;
  const float* q0 = a.q + t * q_row(a) + kvh * kG * D;  // the group's heads are adjacent
  for (int i = threadIdx.x; i < kG * D; i += blockDim.x) s_q[i / D][i % D] = q0[i];
  const bool use_batch = batch_kv_usable(a, &s_consecutive);  // its barriers publish s_q
  int64_t j_begin = 0, j_end = 0;
  key_range(a, a.positions[t], &j_begin, &j_end);
  float acc[kG][kDpl] = {}, m[kG], s[kG];
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    m[g] = -INFINITY;
    s[g] = 0.0f;
  }
  const int lane = threadIdx.x & 31;
  warp_attend<kDpl, KT, VT, kWarps, kG>(
      a, [&](int g, int i) { return s_q[g][lane + 32 * i]; }, kvh, j_begin, j_end, use_batch,
      pages_of(a, t), m, s, acc);
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    if (g > 0) __syncthreads();  // the previous head's merge has read st
    float s_all = 0.0f;
    const int64_t h = kvh * kG + g;
    merge_warps(st, m[g], s[g], acc[g], true, sink_of(a, h),
                a.out + (t * a.n_head + h) * (kDpl * 32), &s_all);
  }
}

// Split-KV decode: a cluster of gridDim.x blocks per (token, head) =
// blockIdx.y. Block r (its rank in the cluster) takes the r-th of gridDim.x
// equal chunks of the key range (empty chunks at short contexts: m = -inf,
// s = 0), merges its warps into its own shared memory, and after a cluster
// barrier rank 0 merges the blocks' states through distributed shared memory
// and writes the output; the second cluster barrier keeps every block's
// shared memory alive until rank 0 has read it. Every thread of every block
// reaches both barriers. sm_90 only (the host launches it nowhere else).
template <int kDpl, TensorType KT, TensorType VT>
__global__ void __launch_bounds__(kSplitWarps * 32) attention_split_kernel(AttentionArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  constexpr int D = kDpl * 32;
  __shared__ WarpStates<kDpl, kSplitWarps> st;
  __shared__ float s_block_m, s_block_s;
  __shared__ int s_consecutive;
  pdl_launch_dependents();  // launched with PDL too: nothing is read before the wait
  pdl_wait();
  const cg::cluster_group cluster = cg::this_cluster();
  const int n_split = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t t = blockIdx.y / a.n_head, h = blockIdx.y % a.n_head;
  const int64_t kvh = h / (a.n_head / a.n_head_kv);
  const bool use_batch = batch_kv_usable(a, &s_consecutive);
  int64_t j_begin = 0, j_end = 0;
  key_range(a, a.positions[t], &j_begin, &j_end);
  const int64_t len = j_end > j_begin ? j_end - j_begin : 0;
  const int64_t per = (len + n_split - 1) / n_split;
  const int64_t lo = j_begin + rank * per;
  const int64_t hi = lo + per < j_end ? lo + per : j_end;
  float q[kDpl], acc[1][kDpl] = {};
  load_query(a, t, h, q);
  float m[1] = {-INFINITY}, s[1] = {0.0f};
  warp_attend<kDpl, KT, VT, kSplitWarps, 1>(
      a, [&](int, int i) { return q[i]; }, kvh, lo, hi, use_batch, pages_of(a, t), m, s, acc);
  float s_all = 0.0f;
  // Unnormalized and without the sink: rank 0 folds it into the merged state.
  const float m_all = merge_warps(st, m[0], s[0], acc[0], false, nullptr, st.acc[0], &s_all);
  if (threadIdx.x == 0) {
    s_block_m = m_all;
    s_block_s = s_all;
  }
  cluster.sync();  // every block's (s_block_m, s_block_s, st.acc[0]) is written
  if (rank == 0) {
    float mr[kMaxClusterSplit], f[kMaxClusterSplit];
    const float* accr[kMaxClusterSplit];
    float m_max = -INFINITY, sum = 0.0f;
#pragma unroll
    for (int r = 0; r < kMaxClusterSplit; ++r) {
      mr[r] = r < n_split ? *cluster.map_shared_rank(&s_block_m, r) : -INFINITY;
      accr[r] = r < n_split ? cluster.map_shared_rank(&st.acc[0][0], r) : nullptr;
      m_max = fmaxf(m_max, mr[r]);
    }
#pragma unroll
    for (int r = 0; r < kMaxClusterSplit; ++r) {
      f[r] = mr[r] == -INFINITY ? 0.0f : expf(mr[r] - m_max);
      if (r < n_split) sum += *cluster.map_shared_rank(&s_block_s, r) * f[r];
    }
    // The sink once, on the merged state of the whole key range.
    const float keep = a.sinks != nullptr ? fold_sink(a.sinks[h], m_max, &sum) : 1.0f;
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    float* oh = a.out + (t * a.n_head + h) * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
      float o = 0.0f;
#pragma unroll
      for (int r = 0; r < kMaxClusterSplit; ++r) {
        if (r < n_split) o += accr[r][d] * f[r];
      }
      oh[d] = __fmul_rn(o, keep) * inv;
    }
  }
  cluster.sync();  // no block exits while rank 0 reads its shared memory
#else
  (void)a;
#endif
}

}  // namespace minfer::cuda::attn
