// The decode fusions of the CUDA backend (launchers in kernels.h):
//
//   - FusedQKV / FusedQkvNorm, one token: a GEMV over the q, k and v weights
//     in one launch (one warp per output row; the row's segment picks the
//     weight and bias; one launch per projection when their types differ),
//     writing the packed row [q | k | v]; then one block per head applies the
//     per-head RMSNorm (q/k, when given), RoPE (q/k; YaRN when the meta
//     carries it) and stores k and v into the cache at the token's position
//     (or its cell). That second kernel also serves many tokens whose
//     projections the tensor cores computed.
//   - FusedFFN, up to 4 tokens: each warp computes gate row r and
//     up row r and writes act(gate) * up, so neither intermediate reaches
//     memory.
// Arithmetic is the unfused kernels' (device_math.cuh): the same row dot
// products, activations and RoPE angles; the per-head norm sums squares in
// another order than rms_norm_kernel, so results may differ in the last bits.
#include <cuda_fp16.h>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_cache.cuh"
#include "backend/cuda/pdl.cuh"

namespace minfer::cuda {
namespace {

constexpr int kWarps = 4;  // warps (output rows) per block
constexpr int kPostThreads = 128;
constexpr int kMaxHeadDim = 256;

struct Segments {  // up to three weights whose rows are stacked in the output
  const uint8_t* w[3] = {};
  size_t row_bytes[3] = {};
  int64_t rows[3] = {};
  const float* bias[3] = {};
  int n = 0;
};

template <TensorType T>
__global__ void __launch_bounds__(kWarps * 32)
    segments_gemv_kernel(Segments s, int64_t n_chunks, const float* __restrict__ x,
                         float* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int64_t out_row = row;
  int seg = 0;
  while (seg < s.n && row >= s.rows[seg]) row -= s.rows[seg++];
  const bool valid = seg < s.n;
  float acc = valid ? row_dot_lane<T>(s.w[seg] + row * s.row_bytes[seg], n_chunks, x, lane) : 0.0f;
  acc = warp_sum(acc);
  if (valid && lane == 0) y[out_row] = acc + (s.bias[seg] != nullptr ? s.bias[seg][row] : 0.0f);
}

// Where head h of token t comes from: out's packed row, or (proj) the
// projection's own rows.
__device__ __forceinline__ const float* qkv_source(const FusedQkvArgs& a, int64_t t, int64_t h) {
  const int64_t D = a.head_dim, q_dim = a.n_head * D, kv_dim = a.n_head_kv * D;
  if (a.proj == nullptr) return a.out + t * (q_dim + 2 * kv_dim) + h * D;
  if (h < a.n_head) return a.proj + t * q_dim + h * D;
  const float* k = a.proj + a.n_tokens * q_dim;
  if (h < a.n_head + a.n_head_kv) return k + t * kv_dim + (h - a.n_head) * D;
  return k + a.n_tokens * kv_dim + t * kv_dim + (h - a.n_head - a.n_head_kv) * D;
}

// One block per (head of q|k|v, token) = (blockIdx.x, blockIdx.y).
// Launched with PDL (pdl.cuh): waits for the projection before reading it.
__global__ void __launch_bounds__(kPostThreads) qkv_post_kernel(FusedQkvArgs a) {
  __shared__ float buf[kMaxHeadDim];
  __shared__ float partial[kPostThreads / 32];
  pdl_launch_dependents();
  pdl_wait();
  const int64_t D = a.head_dim;
  const int64_t h = blockIdx.x, t = blockIdx.y;
  const int kind = h < a.n_head ? 0 : (h < a.n_head + a.n_head_kv ? 1 : 2);  // q, k, v
  const float* src = qkv_source(a, t, h);
  float* v = a.out + t * (a.n_head + 2 * a.n_head_kv) * D + h * D;
  const int32_t pos = a.positions[t];
  const int32_t row = a.cells != nullptr ? a.cells[t] : pos;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) buf[d] = src[d];
  const float* norm = kind == 0 ? a.q_norm : (kind == 1 ? a.k_norm : nullptr);
  if (norm != nullptr) {  // uniform per block: no thread skips the barriers
    float sum = 0.0f;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) sum += buf[d] * buf[d];
    sum = warp_sum(sum);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < kPostThreads / 32; ++w) total += partial[w];
    const float s = rsqrtf(total / static_cast<float>(D) + a.eps);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) buf[d] = buf[d] * s * norm[d];
  }
  __syncthreads();
  if (kind < 2) {
    const int64_t half = a.n_rot / 2;
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      float c, s;
      rope_cos_sin(pos, i, a.n_rot, a.freq_base, a.freq_scale, a.freq_factors, a.yarn, &c, &s);
      const int64_t i0 = a.neox ? i : 2 * i;
      const int64_t i1 = a.neox ? i + half : 2 * i + 1;
      const float x0 = buf[i0], x1 = buf[i1];
      buf[i0] = x0 * c - x1 * s;
      buf[i1] = x0 * s + x1 * c;
    }
  }
  __syncthreads();
  const bool store = kind > 0;
  const bool ok = row >= 0 && row < a.n_ctx;
  if (store && !ok && threadIdx.x == 0 &&
      atomicCAS(a.err, kErrNone, kErrPositionRange) == kErrNone) {
    a.err[1] = row;
    a.err[2] = static_cast<int>(a.n_ctx);
  }
  const int64_t kv_row = a.n_head_kv * D;
  const int64_t head = kind == 1 ? h - a.n_head : h - a.n_head - a.n_head_kv;
  void* cache = kind == 1 ? a.k_cache : a.v_cache;
  const TensorType type = kind == 1 ? a.k_type : a.v_type;
  // store, ok and type are uniform per block, and with D % 32 == 0 (checked
  // for Q8_0 caches) each warp's d are all below D or all past it.
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    v[d] = buf[d];
    if (!store || !ok) continue;
    const int64_t i = head * D + d;
    switch (type) {
      case TensorType::F32:
        kv_store_element<TensorType::F32>(cache, row, kv_row, i, buf[d], a.err);
        break;
      case TensorType::F16:
        kv_store_element<TensorType::F16>(cache, row, kv_row, i, buf[d], a.err);
        break;
      case TensorType::Q8_0:
        kv_store_element<TensorType::Q8_0>(cache, row, kv_row, i, buf[d], a.err);
        break;
      default:  // refused by the backend before the launch
        break;
    }
  }
}

template <TensorType T, bool kGelu, int kSplit>
__global__ void __launch_bounds__(kGemvBlockWarps * 32)
    ffn_gemv_kernel(const uint8_t* __restrict__ gate, const uint8_t* __restrict__ up,
                    size_t row_bytes, int64_t rows, int64_t n_chunks, const float* __restrict__ x,
                    float* __restrict__ y) {
  __shared__ float part_g[kGemvBlockWarps][1], part_u[kGemvBlockWarps][1];
  const GemvSplit<1, kSplit> s(blockIdx.x);
  const int64_t t = blockIdx.y;
  const float* xt = x + t * n_chunks * kChunk;
  const int n = s.rows_valid(rows);
  float g[1], u[1];
  rows_dot_lane<T, 1>(gate + s.row0 * row_bytes, row_bytes, n, n_chunks, s.c_begin(), s.kStep, xt,
                      g);
  rows_dot_lane<T, 1>(up + s.row0 * row_bytes, row_bytes, n, n_chunks, s.c_begin(), s.kStep, xt, u);
  s.reduce(g, part_g);
  s.reduce(u, part_u);
  if (n > 0 && s.writer()) y[t * rows + s.row0] = (kGelu ? gelu_f(g[0]) : silu_f(g[0])) * u[0];
}

unsigned blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kWarps - 1) / kWarps);
}

}  // namespace

bool fused_head_dim_ok(int64_t head_dim) {
  return head_dim > 0 && head_dim <= kMaxHeadDim && head_dim % 2 == 0;
}

cudaError_t launch_fused_qkv(const FusedQkvArgs& a, cudaStream_t stream) {
  const int64_t n_chunks = a.in_dim / kChunk;
  const bool same = a.type[0] == a.type[1] && a.type[1] == a.type[2];
  if (a.q8_gemv) {  // q and k of one type, v of it or of the type has_stacked_q8 pairs with it
    if (a.type[0] != a.type[1]) return cudaErrorInvalidValue;
    Q8Stack s;
    for (int i = 0; i < 3; ++i) {
      s.w[i] = static_cast<const uint8_t*>(a.w[i]);
      s.row_bytes[i] = a.row_bytes[i];
      s.rows[i] = a.rows[i];
      s.bias[i] = a.bias[i];
    }
    const cudaError_t e = launch_stacked_q8(a.type[0], a.type[2], s, a.q8, a.out, stream);
    if (e != cudaSuccess) return e;
  }
  int64_t offset = 0;
  for (int first = 0; !a.q8_gemv && first < 3;) {  // the f32 GEMV, one launch per type
    const int last = same ? 3 : first + 1;         // segments [first, last) in one launch
    Segments s;
    int64_t rows = 0;
    for (int i = first; i < last; ++i) {
      s.w[s.n] = static_cast<const uint8_t*>(a.w[i]);
      s.row_bytes[s.n] = a.row_bytes[i];
      s.rows[s.n] = a.rows[i];
      s.bias[s.n] = a.bias[i];
      ++s.n;
      rows += a.rows[i];
    }
    float* y = a.out + offset;
    const bool known = dispatch_type(a.type[first], [&](auto tag) {
      constexpr TensorType T = decltype(tag)::value;
      segments_gemv_kernel<T><<<blocks(rows), kWarps * 32, 0, stream>>>(s, n_chunks, a.x, y);
    });
    if (!known) return cudaErrorInvalidValue;
    offset += rows;
    first = last;
  }
  const cudaError_t earlier = cudaGetLastError();  // the f32 GEMV launches'
  const cudaError_t e = launch_qkv_post(a, stream);
  return e != cudaSuccess ? e : earlier;
}

cudaError_t launch_qkv_post(const FusedQkvArgs& a, cudaStream_t stream) {
  if (a.n_tokens <= 0) return cudaSuccess;
  if (a.proj == nullptr && a.n_tokens != 1) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(a.n_head + 2 * a.n_head_kv),
                  static_cast<unsigned>(a.n_tokens));
  return launch_kernel(kPdlBetweenGemvs, qkv_post_kernel, grid, dim3(kPostThreads), 0, stream, a);
}

cudaError_t launch_fused_ffn(TensorType type, const void* gate, const void* up, size_t row_bytes,
                             int64_t n_ff, int64_t in_dim, const float* x, int64_t n_tokens,
                             bool gelu, float* y, cudaStream_t stream) {
  const int64_t n_chunks = in_dim / kChunk;
  const auto* g = static_cast<const uint8_t*>(gate);
  const auto* u = static_cast<const uint8_t*>(up);
  const bool known = dispatch_type(type, [&](auto tag) {
    constexpr TensorType T = decltype(tag)::value;
    choose_gemv_split(n_ff, n_chunks, 1, [&](auto, auto split) {
      constexpr int kS = decltype(split)::value;
      constexpr int64_t per_block = GemvSplit<1, kS>::kRowsPerBlock;
      const dim3 grid(static_cast<unsigned>((n_ff + per_block - 1) / per_block),
                      static_cast<unsigned>(n_tokens));
      if (gelu) {
        ffn_gemv_kernel<T, true, kS>
            <<<grid, kGemvBlockWarps * 32, 0, stream>>>(g, u, row_bytes, n_ff, n_chunks, x, y);
      } else {
        ffn_gemv_kernel<T, false, kS>
            <<<grid, kGemvBlockWarps * 32, 0, stream>>>(g, u, row_bytes, n_ff, n_chunks, x, y);
      }
    });
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace minfer::cuda
