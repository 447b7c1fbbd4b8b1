// Causal attention over the KV cache, three kernels:
//
// Per-(token, head) kernel, for batches of fewer than kFlashMinTokens tokens
// (decode): one block per (query token, head), of 16 warps when there are few
// (token, head) pairs (long key ranges, few blocks) or the batch must be
// batch-invariant, else 4. Warp w takes keys
// j_begin + w, j_begin + w + kWarps, ...; its lanes hold head_dim / 32 dims
// each of the query, of the running output and of every key/value row they
// read (coalesced rows). Each warp keeps its own online softmax (running max
// m, sum s, output acc); the warps' states are merged through shared memory at
// the end. Where the batch has (token, KV head) pairs for half the SMs, the
// 16-warp form takes a block per (token, KV head) instead, the group's query
// heads sharing each key's K/V loads, each head's numbers bit for bit the
// per-head block's (attention_decode.cuh holds these kernels).
//
// Split-KV (cluster) kernel, for the same batches when their (token, head)
// pairs would leave SMs idle and the cache holds at least kSplitMinCtx rows
// (sm_90, unless MINFER_NO_SPLIT_KV=1 or the batch must be batch-invariant):
// a thread block cluster of n_split
// (2..8, fixed on the host from the SM count and the pair count) blocks of 8
// warps per pair; block r walks the r-th of n_split equal chunks of the pair's
// key range (known only on the device; chunks may be empty) as above, and
// cluster rank 0 merges the blocks' (m, s, acc) states through distributed
// shared memory. No global scratch, so it can be captured in a CUDA graph.
// Where the cluster launch is refused, the per-token kernel runs.
//
// Tiled (flash) kernel, for longer batches (prefill): a block takes 32 query
// rows of one KV head, rows being (token, head of the GQA group) pairs, so the
// group's heads share every K/V tile; it walks the union of their key ranges
// in tiles of 32 keys staged in shared memory (as f32). Each of its
// 4 warps owns 8 query rows: lane l scores key l of the tile against them,
// the online softmax runs per row (warp max, lane-partial sums), and the
// probabilities go through shared memory to the P.V step, where lane l owns
// dims l, l + 32, ... When that grid would leave most SMs idle (a short
// batch after a long context), each block's key range is split over up to 16
// blocks (flash decoding) whose partial (max, sum, output) states a second
// kernel merges; the partials live in stream-ordered scratch (scratch_alloc),
// and without it the kernel runs unsplit. All f32: the same numbers as the
// per-token kernel up to summation order. A paged batch takes it only when
// it is one sequence's (AttentionArgs::one_sequence): keys then come through
// token 0's page-table row for every query row.
//
// A node's sinks (AttentionArgs::sinks) are folded into each row's merged
// (max, sum, output) state after its keys: by the block merge of the
// per-token and grouped kernels, by cluster rank 0 of the split kernel, and
// by the tiled kernel's epilogue or, split, its merge kernel; never per
// split.
//
// All three: a query sees key j iff j <= position and (no window or position - j <
// window) and j < n_ctx. Keys at positions >= the batch's first position come
// from the batch's own f32 k/v (AttentionArgs::batch_k/v) when the batch's
// positions are consecutive, so a prompt attends to itself at full precision
// whatever the cache type (a one-sequence paged batch's are in its packed
// q|k|v rows, unless it must be batch-invariant); earlier keys come from the cache, K and V each
// f32, f16 or q8_0 (every kernel is templated on the two types) and widened
// or dequantized to f32 as they are loaded (kv_cache.cuh). The query stays
// f32. Scores and sums are f32.
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_cache.cuh"
#include "backend/cuda/pdl.cuh"

namespace minfer::cuda {
namespace {

using namespace attn;  // NOLINT: the decode kernels and their helpers

// The device's compute capability (major) and SM count, queried once (the
// backend drives one device per process); zeros when the query fails.
struct DecodeDevice {
  int cc_major = 0, sms = 0;
};
const DecodeDevice& decode_device() {
  static const DecodeDevice d = [] {
    DecodeDevice r;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&r.cc_major, cudaDevAttrComputeCapabilityMajor, dev) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&r.sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return DecodeDevice{};
    }
    return r;
  }();
  return d;
}

// Blocks per (token, head) for a decode batch: 1 (the per-token kernel)
// unless the (token, head) pairs leave SMs idle and the cache is long, then
// enough for two blocks per SM, 2 to kMaxClusterSplit. Fixed from host-known sizes
// (the KV length is only known on the device).
int64_t decode_split(const AttentionArgs& a) {
  const DecodeDevice& dev = decode_device();
  const int64_t pairs = a.n_tokens * a.n_head;
  if (dev.cc_major < 9 || a.n_ctx < kSplitMinCtx || pairs >= dev.sms || !a.split_kv ||
      a.batch_invariant) {
    return 1;
  }
  const int64_t n = (2 * dev.sms + pairs - 1) / pairs;
  return n < 2 ? 2 : (n > kMaxClusterSplit ? kMaxClusterSplit : n);
}

// The cluster launch of attention_split_kernel; once refused (the device or
// driver cannot run the cluster), never tried again for this instance.
template <int kDpl, TensorType KT, TensorType VT>
bool launch_split(const AttentionArgs& a, int64_t n_split, cudaStream_t stream) {
  static std::atomic<bool> refused{false};
  if (refused.load(std::memory_order_relaxed)) return false;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(n_split), static_cast<unsigned>(a.n_tokens * a.n_head));
  cfg.blockDim = dim3(kSplitWarps * 32);
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(n_split);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = kPdlBetweenGemvs ? add_pdl_attribute(attr, 1) : 1;
  if (cudaLaunchKernelEx(&cfg, attention_split_kernel<kDpl, KT, VT>, a) == cudaSuccess) return true;
  (void)cudaGetLastError();  // the per-token kernel runs instead
  refused.store(true, std::memory_order_relaxed);
  return false;
}

// attention_group_kernel (kManyWarps) for kG heads a KV head, where it is
// built (head_dim 64 or 128, K and V of one type, 2, 4, 7 or 8 heads a
// group) and the batch has (token, KV head) pairs for at least half the
// SMs; false where it is not launched.
template <int kDpl, TensorType KT, TensorType VT>
bool launch_grouped(const AttentionArgs& a, cudaStream_t stream, cudaError_t* err) {
  const int64_t group = a.n_head / a.n_head_kv;
  const int64_t blocks = a.n_tokens * a.n_head_kv;
  if constexpr ((kDpl == 2 || kDpl == 4) && KT == VT) {
    if (2 * blocks < decode_device().sms) return false;
    const auto launch = [&](auto g) {
      *err = launch_kernel(
          kPdlBetweenGemvs, attention_group_kernel<kDpl, KT, VT, kManyWarps, decltype(g)::value>,
          dim3(static_cast<unsigned>(blocks)), dim3(kManyWarps * 32), 0, stream, a);
      return true;
    };
    switch (group) {
      case 2:
        return launch(std::integral_constant<int, 2>{});
      case 4:
        return launch(std::integral_constant<int, 4>{});
      case 7:
        return launch(std::integral_constant<int, 7>{});
      case 8:
        return launch(std::integral_constant<int, 8>{});
      default:
        return false;
    }
  }
  (void)group;
  (void)blocks;
  (void)stream;
  (void)err;
  return false;
}

template <int kDpl, TensorType KT, TensorType VT>
cudaError_t launch_dpl(const AttentionArgs& a, cudaStream_t stream) {
  if (const int64_t n_split = decode_split(a);
      n_split > 1 && launch_split<kDpl, KT, VT>(a, n_split, stream)) {
    return cudaSuccess;
  }
  const dim3 grid(static_cast<unsigned>(a.n_tokens * a.n_head));
  if (a.n_tokens * a.n_head < kFewBlocks || a.batch_invariant) {  // one shape for every batch
    // The heads of a KV head together where the batch fills the SMs: the
    // same numbers as one block a head.
    if (cudaError_t e = cudaSuccess; launch_grouped<kDpl, KT, VT>(a, stream, &e)) return e;
    return launch_kernel(kPdlBetweenGemvs, attention_kernel<kDpl, KT, VT, kManyWarps>, grid,
                         dim3(kManyWarps * 32), 0, stream, a);
  }
  return launch_kernel(kPdlBetweenGemvs, attention_kernel<kDpl, KT, VT, kFewWarps>, grid,
                       dim3(kFewWarps * 32), 0, stream, a);
}

// --- tiled (flash) kernel ---------------------------------------------------------

constexpr int64_t kFlashMinTokens = 8;
constexpr int kFlashWarps = 4;
constexpr int kRowsPerWarp = 8;
constexpr int kFlashRows = kFlashWarps * kRowsPerWarp;  // query rows per block
constexpr int kKeys = 32;                               // keys per tile (one per lane)
constexpr int64_t kMaxSplit = 16;                       // key-range splits per block

template <int D>
struct FlashSmem {
  static constexpr int kPitch =
      D + 4;  // float4 rows read by 8 lanes at once miss each other's banks
  static constexpr size_t kFloats = size_t{kFlashRows} * kPitch    // q (scaled)
                                    + size_t{kKeys} * kPitch       // k tile
                                    + size_t{kKeys} * D            // v tile
                                    + size_t{kFlashRows} * kKeys;  // p, per warp
  static constexpr size_t kBytes = kFloats * sizeof(float);
};

template <int D, TensorType KT, TensorType VT>
// part == nullptr: normalized rows to a.out. Else split z = blockIdx.z of
// gridDim.z takes its share of the block's key tiles and writes its
// unnormalized rows and (max, sum) to part (layout in launch_flash_typed).
__global__ void __launch_bounds__(kFlashWarps * 32) flash_kernel(AttentionArgs a, float* part) {
  using S = FlashSmem<D>;
  constexpr int kPitch = S::kPitch, kDpl = D / 32;
  extern __shared__ __align__(16) float fsmem[];
  float* qs = fsmem;
  float* ks = qs + kFlashRows * kPitch;
  float* vs = ks + kKeys * kPitch;
  float* ps = vs + kKeys * D;
  __shared__ int s_pos[kFlashRows], s_begin[kFlashRows];
  __shared__ int64_t s_row[kKeys];  // paged: the tile's cache rows
  __shared__ int s_consecutive;
  __shared__ int64_t s_lo, s_hi;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t group = a.n_head / a.n_head_kv;
  const int64_t kvh = blockIdx.y;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kFlashRows;
  const int64_t n_rows = a.n_tokens * group;
  const int64_t kv_row = a.n_head_kv * D, b_row = batch_row(a);

  if (tid == 0) s_consecutive = 1;
  __syncthreads();
  const int32_t first = a.positions[0];
  for (int64_t i = tid; i < a.n_tokens; i += blockDim.x) {
    if (a.positions[i] != first + i) s_consecutive = 0;
  }
  // Row positions (-1: past the batch) and the block's key range.
  if (warp == 0) {
    const int64_t r = row0 + lane;
    const int64_t pos = r < n_rows ? a.positions[r / group] : -1;
    int64_t begin = 0;
    if (a.sliding_window > 0 && pos - a.sliding_window + 1 > 0) begin = pos - a.sliding_window + 1;
    s_pos[lane] = static_cast<int>(pos);
    s_begin[lane] = static_cast<int>(begin);
    int64_t lo = pos >= 0 ? begin : INT64_MAX, hi = pos + 1 < a.n_ctx ? pos + 1 : a.n_ctx;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const int64_t l2 = __shfl_xor_sync(0xffffffffu, lo, o);
      const int64_t h2 = __shfl_xor_sync(0xffffffffu, hi, o);
      lo = l2 < lo ? l2 : lo;
      hi = h2 > hi ? h2 : hi;
    }
    if (lane == 0) {
      s_lo = lo;
      s_hi = hi;
    }
  }
  // The block's query rows, pre-scaled.
  for (int idx = tid; idx < kFlashRows * (D / 4); idx += blockDim.x) {
    const int rr = idx / (D / 4), d4 = idx % (D / 4);
    const int64_t r = row0 + rr;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < n_rows) {
      const int64_t t = r / group, h = kvh * group + r % group;
      v = *reinterpret_cast<const float4*>(a.q + t * q_row(a) + h * D + 4 * d4);
      v.x *= a.scale;
      v.y *= a.scale;
      v.z *= a.scale;
      v.w *= a.scale;
    }
    *reinterpret_cast<float4*>(qs + rr * kPitch + 4 * d4) = v;
  }
  __syncthreads();
  const bool use_batch = s_consecutive != 0 && a.batch_k != nullptr && a.batch_v != nullptr;
  const int32_t* pages = pages_of(a, 0);  // paged: one sequence's (AttentionArgs::one_sequence)
  int64_t j_lo = s_lo, j_hi = s_hi;
  if (gridDim.z > 1 && j_hi > j_lo) {
    const int64_t tiles = (j_hi - j_lo + kKeys - 1) / kKeys;
    const int64_t per = (tiles + gridDim.z - 1) / gridDim.z;
    const int64_t b = j_lo + static_cast<int64_t>(blockIdx.z) * per * kKeys;
    const int64_t e = b + per * kKeys;
    j_lo = b;
    j_hi = e < j_hi ? e : j_hi;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDpl];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int k = 0; k < kDpl; ++k) acc[i][k] = 0.0f;
  }
  float* pw = ps + warp * kRowsPerWarp * kKeys;

  for (int64_t j0 = j_lo; j0 < j_hi; j0 += kKeys) {
    __syncthreads();         // the previous tile is consumed
    if (pages != nullptr) {  // one page-table read per key, not per load
      if (tid < kKeys) s_row[tid] = cache_row(a, pages, j0 + tid < j_hi ? j0 + tid : j_lo);
      __syncthreads();
    }
    for (int idx = tid; idx < kKeys * (D / 4); idx += blockDim.x) {
      const int jj = idx / (D / 4), d4 = idx % (D / 4);
      const int64_t j = j0 + jj;
      float4 kv4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), vv4 = kv4;
      if (j < j_hi) {
        const int64_t e = kvh * D + 4 * d4;  // element of the K/V row
        if (use_batch && j >= first) {
          kv4 = *reinterpret_cast<const float4*>(a.batch_k + (j - first) * b_row + e);
          vv4 = *reinterpret_cast<const float4*>(a.batch_v + (j - first) * b_row + e);
        } else {
          const int64_t row = pages != nullptr ? s_row[jj] : j;
          kv4 = kv_load4<KT>(a.k_cache, row, kv_row, e);
          vv4 = kv_load4<VT>(a.v_cache, row, kv_row, e);
        }
      }
      *reinterpret_cast<float4*>(ks + jj * kPitch + 4 * d4) = kv4;
      *reinterpret_cast<float4*>(vs + jj * D + 4 * d4) = vv4;
    }
    __syncthreads();

    // Scores: lane = key j0 + lane, against the warp's rows.
    float sc[kRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) sc[i] = 0.0f;
    const float* kr = ks + lane * kPitch;
    const float* qw = qs + warp * kRowsPerWarp * kPitch;
#pragma unroll 4
    for (int d = 0; d < D; d += 4) {
      const float4 k4 = *reinterpret_cast<const float4*>(kr + d);
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const float4 q4 = *reinterpret_cast<const float4*>(qw + i * kPitch + d);
        sc[i] += q4.x * k4.x + q4.y * k4.y + q4.z * k4.z + q4.w * k4.w;
      }
    }
    const int64_t j = j0 + lane;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int rr = warp * kRowsPerWarp + i;
      const bool seen = j < j_hi && j <= s_pos[rr] && j >= s_begin[rr];
      const float s = seen ? sc[i] : -INFINITY;
      float mt = s;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
      const float m_new = fmaxf(m[i], mt);
      const float alpha = m_new == -INFINITY ? 1.0f : expf(m[i] - m_new);
      const float p = m_new == -INFINITY ? 0.0f : expf(s - m_new);
      m[i] = m_new;
      l[i] = l[i] * alpha + p;
#pragma unroll
      for (int k = 0; k < kDpl; ++k) acc[i][k] *= alpha;
      pw[i * kKeys + lane] = p;
    }
    __syncwarp();
    // P.V: lane owns dims lane + 32 k.
#pragma unroll 2
    for (int jj = 0; jj < kKeys; jj += 4) {
      float v[4][kDpl];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
#pragma unroll
        for (int k = 0; k < kDpl; ++k) v[u][k] = vs[(jj + u) * D + lane + 32 * k];
      }
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const float4 p4 = *reinterpret_cast<const float4*>(pw + i * kKeys + jj);
#pragma unroll
        for (int k = 0; k < kDpl; ++k) {
          acc[i][k] += p4.x * v[0][k] + p4.y * v[1][k] + p4.z * v[2][k] + p4.w * v[3][k];
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    float lt = l[i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) lt += __shfl_xor_sync(0xffffffffu, lt, o);
    const int64_t r = row0 + warp * kRowsPerWarp + i;
    if (r >= n_rows) continue;
    if (part != nullptr) {
      const int64_t pr = (static_cast<int64_t>(blockIdx.z) * a.n_head_kv + kvh) * n_rows + r;
      float* pacc = part + pr * D;
#pragma unroll
      for (int k = 0; k < kDpl; ++k) pacc[lane + 32 * k] = acc[i][k];
      if (lane == 0) {
        float* ml = part + static_cast<int64_t>(gridDim.z) * a.n_head_kv * n_rows * D + 2 * pr;
        ml[0] = m[i];
        ml[1] = lt;
      }
      continue;
    }
    const int64_t t = r / group, h = kvh * group + r % group;
    float* o = a.out + (t * a.n_head + h) * D;
    // m[i] and lt are the same in every lane, so is the sink's fold.
    const float keep = a.sinks != nullptr ? fold_sink(a.sinks[h], m[i], &lt) : 1.0f;
    const float inv = lt > 0.0f ? 1.0f / lt : 0.0f;
#pragma unroll
    for (int k = 0; k < kDpl; ++k) o[lane + 32 * k] = __fmul_rn(acc[i][k], keep) * inv;
  }
}

// One warp per (kv head, row): merges the n_split partial states of the row,
// then folds in the row's sink (once, on the merged state).
template <int D>
__global__ void __launch_bounds__(128)
    flash_merge_kernel(AttentionArgs a, const float* __restrict__ part, int n_split) {
  constexpr int kDpl = D / 32;
  const int lane = threadIdx.x & 31;
  const int64_t n_rows = a.n_tokens * (a.n_head / a.n_head_kv);
  const int64_t idx = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (idx >= a.n_head_kv * n_rows) return;  // no barrier in this kernel
  const int64_t stride = a.n_head_kv * n_rows;
  const float* ml = part + static_cast<int64_t>(n_split) * stride * D;
  float m_all = -INFINITY;
  for (int z = 0; z < n_split; ++z) m_all = fmaxf(m_all, ml[2 * (z * stride + idx)]);
  float s = 0.0f, o[kDpl] = {};
  for (int z = 0; z < n_split; ++z) {
    const float mz = ml[2 * (z * stride + idx)];
    const float w = mz == -INFINITY ? 0.0f : expf(mz - m_all);
    s += ml[2 * (z * stride + idx) + 1] * w;
    const float* pz = part + (z * stride + idx) * D;
#pragma unroll
    for (int k = 0; k < kDpl; ++k) o[k] += pz[lane + 32 * k] * w;
  }
  const int64_t group = a.n_head / a.n_head_kv;
  const int64_t kvh = idx / n_rows, r = idx % n_rows;
  const int64_t t = r / group, h = kvh * group + r % group;
  float* out = a.out + (t * a.n_head + h) * D;
  const float keep = a.sinks != nullptr ? fold_sink(a.sinks[h], m_all, &s) : 1.0f;
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
#pragma unroll
  for (int k = 0; k < kDpl; ++k) out[lane + 32 * k] = __fmul_rn(o[k], keep) * inv;
}

// Splits the key range over gridDim.z when the grid would leave most SMs idle
// (short batches after a long context), then merges the splits.
template <int D, TensorType KT, TensorType VT>
cudaError_t launch_flash_typed(const AttentionArgs& a, cudaStream_t stream) {
  static std::once_flag once;
  static cudaError_t status = cudaSuccess;
  std::call_once(once, [] {
    status =
        cudaFuncSetAttribute(flash_kernel<D, KT, VT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(FlashSmem<D>::kBytes));
  });
  if (status != cudaSuccess) {  // less shared memory than the tile needs: per-token kernel
    (void)cudaGetLastError();
    return cudaErrorNotSupported;
  }
  const int64_t rows = a.n_tokens * (a.n_head / a.n_head_kv);
  const int64_t blocks = (rows + kFlashRows - 1) / kFlashRows * a.n_head_kv;
  int device = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      e != cudaSuccess) {
    return e;
  }
  int64_t n_split = (2 * static_cast<int64_t>(sms) + blocks - 1) / blocks;
  n_split = n_split < 1 ? 1 : (n_split > kMaxSplit ? kMaxSplit : n_split);
  float* part = nullptr;
  if (n_split > 1) {
    const size_t bytes = static_cast<size_t>(n_split * a.n_head_kv * rows * (D + 2)) * 4;
    void* p = nullptr;
    if (scratch_alloc(&p, bytes, stream) == cudaSuccess) {
      part = static_cast<float*>(p);
    } else {
      n_split = 1;
    }
  }
  const dim3 grid(static_cast<unsigned>((rows + kFlashRows - 1) / kFlashRows),
                  static_cast<unsigned>(a.n_head_kv), static_cast<unsigned>(n_split));
  flash_kernel<D, KT, VT><<<grid, kFlashWarps * 32, FlashSmem<D>::kBytes, stream>>>(a, part);
  if (part == nullptr) return cudaGetLastError();
  const int64_t warps = a.n_head_kv * rows;
  flash_merge_kernel<D><<<static_cast<unsigned>((warps + 3) / 4), 128, 0, stream>>>(
      a, part, static_cast<int>(n_split));
  const cudaError_t e = cudaGetLastError();
  const cudaError_t f = cudaFreeAsync(part, stream);
  return e != cudaSuccess ? e : f;
}

// Calls f(kt, vt), the cache types as std::integral_constant values;
// false for a type without a device layout.
template <typename F>
bool dispatch_kv_types(const AttentionArgs& a, F&& f) {
  bool known = false;
  dispatch_kv_type(
      a.k_type, [&](auto kt) { known = dispatch_kv_type(a.v_type, [&](auto vt) { f(kt, vt); }); });
  return known;
}

template <int D>
cudaError_t launch_flash(const AttentionArgs& a, cudaStream_t stream) {
  cudaError_t e = cudaErrorInvalidValue;
  dispatch_kv_types(a, [&](auto kt, auto vt) {
    e = launch_flash_typed<D, decltype(kt)::value, decltype(vt)::value>(a, stream);
  });
  return e;
}

template <int kDpl>
cudaError_t launch_per_token(const AttentionArgs& a, cudaStream_t stream) {
  cudaError_t e = cudaErrorInvalidValue;
  dispatch_kv_types(a, [&](auto kt, auto vt) {
    e = launch_dpl<kDpl, decltype(kt)::value, decltype(vt)::value>(a, stream);
  });
  return e;
}

}  // namespace

bool attention_head_dim_ok(int64_t head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 96 || head_dim == 128 || head_dim == 256;
}

cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  const bool q8 = a.k_type == TensorType::Q8_0 || a.v_type == TensorType::Q8_0;
  if (q8 && a.head_dim % kKvQ8Elems != 0) return cudaErrorInvalidValue;
  if (a.n_tokens <= 0) return cudaSuccess;
  const bool shared_tiles = a.page_table == nullptr || a.one_sequence;
  if (a.n_tokens >= kFlashMinTokens && shared_tiles && !a.batch_invariant) {
    cudaError_t e = cudaErrorInvalidValue;
    switch (a.head_dim) {
      case 32:
        e = launch_flash<32>(a, stream);
        break;
      case 64:
        e = launch_flash<64>(a, stream);
        break;
      case 96:
        e = launch_flash<96>(a, stream);
        break;
      case 128:
        e = launch_flash<128>(a, stream);
        break;
      case 256:
        e = launch_flash<256>(a, stream);
        break;
      default:
        break;
    }
    if (e != cudaErrorNotSupported) return e;
  }
  switch (a.head_dim) {
    case 32:
      return launch_per_token<1>(a, stream);
    case 64:
      return launch_per_token<2>(a, stream);
    case 96:
      return launch_per_token<3>(a, stream);
    case 128:
      return launch_per_token<4>(a, stream);
    case 256:
      return launch_per_token<8>(a, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace minfer::cuda
