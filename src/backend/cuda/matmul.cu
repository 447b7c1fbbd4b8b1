// Matrix products over quantized weights and the embedding lookup, for every
// type of backend/cuda/dequant.cuh, on f32 activations.
//
//   - GEMV (n_tokens <= kGemvMaxTokens): one warp per output row; lane l
//     decodes chunks l, l+32, ... of the row (consecutive lanes read
//     consecutive blocks) and dots them with the activation row; a warp
//     reduction gives the output. Tokens are the grid's y dimension.
//   - Tiled (more tokens): a 64 x 64 output tile per block of 256 threads; each
//     step decodes a 64-row x 32-column weight tile and loads a 32 x 64
//     activation tile into shared memory, then every thread accumulates a 4 x 4
//     sub-tile. Loads and stores past the edges are predicated (no early
//     return before a barrier).
// Accumulation is f32 in both; the bias is added at the end.
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"

namespace minfer::cuda {
namespace {

constexpr int kGemvWarps = 4;
constexpr int64_t kGemvMaxTokens = 4;
constexpr int kTileM = 64;   // weight rows per block
constexpr int kTileN = 64;   // tokens per block
constexpr int kTileThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <TensorType T>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t rows, int64_t n_chunks,
                const float* __restrict__ x, const float* __restrict__ bias,
                float* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
  const int64_t t = blockIdx.y;
  const float* xt = x + t * n_chunks * kChunk;
  float acc = 0.0f;
  if (row < rows) {
    const uint8_t* wr = w + row * row_bytes;
    for (int64_t c = lane; c < n_chunks; c += 32) {
      float v[kChunk];
      dequant_chunk<T>(wr, c, v);
      const float4* xv = reinterpret_cast<const float4*>(xt + c * kChunk);
#pragma unroll
      for (int i = 0; i < kChunk / 4; ++i) {
        const float4 a = __ldg(xv + i);
        acc += v[4 * i] * a.x + v[4 * i + 1] * a.y + v[4 * i + 2] * a.z + v[4 * i + 3] * a.w;
      }
    }
  }
  acc = warp_sum(acc);
  if (row < rows && lane == 0) y[t * rows + row] = acc + (bias != nullptr ? bias[row] : 0.0f);
}

template <TensorType T>
__global__ void __launch_bounds__(kTileThreads)
    tiled_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t rows, int64_t n_chunks,
                 const float* __restrict__ x, int64_t n_tokens, const float* __restrict__ bias,
                 float* __restrict__ y) {
  __shared__ float ws[kChunk][kTileM + 1];
  __shared__ float xs[kChunk][kTileN + 1];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTileM;
  const int64_t tok0 = static_cast<int64_t>(blockIdx.y) * kTileN;
  const int64_t in_dim = n_chunks * kChunk;
  float acc[4][4] = {};
  for (int64_t c = 0; c < n_chunks; ++c) {
    if (tid < kTileM) {
      float v[kChunk];
      const int64_t r = row0 + tid;
      if (r < rows) {
        dequant_chunk<T>(w + r * row_bytes, c, v);
      } else {
#pragma unroll
        for (int i = 0; i < kChunk; ++i) v[i] = 0.0f;
      }
#pragma unroll
      for (int i = 0; i < kChunk; ++i) ws[i][tid] = v[i];
    }
#pragma unroll
    for (int m = 0; m < kChunk * kTileN / kTileThreads; ++m) {
      const int idx = tid + m * kTileThreads;
      const int tt = idx / kChunk, kk = idx % kChunk;
      const int64_t t = tok0 + tt;
      xs[kk][tt] = t < n_tokens ? x[t * in_dim + c * kChunk + kk] : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < kChunk; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = ws[k][tx + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = xs[k][ty + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = row0 + tx + 16 * i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t t = tok0 + ty + 16 * j;
      if (r < rows && t < n_tokens) {
        y[t * rows + r] = acc[i][j] + (bias != nullptr ? bias[r] : 0.0f);
      }
    }
  }
}

template <TensorType T>
__global__ void get_rows_kernel(const uint8_t* __restrict__ w, size_t row_bytes,
                                int64_t n_table_rows, int64_t n_chunks,
                                const int32_t* __restrict__ ids, float scale,
                                float* __restrict__ out, int* err) {
  const int64_t r = blockIdx.x;
  const int32_t id = ids[r];
  const bool ok = id >= 0 && id < n_table_rows;
  if (!ok && threadIdx.x == 0 && atomicCAS(err, kErrNone, kErrTokenRange) == kErrNone) {
    err[1] = id;
    err[2] = static_cast<int>(n_table_rows);
  }
  float* o = out + r * n_chunks * kChunk;
  for (int64_t c = threadIdx.x; c < n_chunks; c += blockDim.x) {
    float v[kChunk];
    if (ok) {
      dequant_chunk<T>(w + static_cast<int64_t>(id) * row_bytes, c, v);
    } else {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) v[i] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i) o[c * kChunk + i] = v[i] * scale;
  }
}

}  // namespace

bool has_decoder(TensorType type) {
  return dispatch_type(type, [](auto) {});
}

cudaError_t launch_matmul(TensorType type, const void* w, size_t row_bytes, int64_t rows,
                          int64_t in_dim, const float* x, int64_t n_tokens, const float* bias,
                          float* y, cudaStream_t stream) {
  if (n_tokens >= kMmaMinTokens) {  // tensor cores (matmul_mma.cu) unless out of scratch
    const cudaError_t e =
        launch_matmul_mma(type, w, row_bytes, rows, in_dim, x, n_tokens, bias, y, stream);
    if (e != cudaErrorMemoryAllocation) return e;
  }
  const int64_t n_chunks = in_dim / kChunk;
  const auto* wb = static_cast<const uint8_t*>(w);
  const bool known = dispatch_type(type, [&](auto tag) {
    constexpr TensorType T = decltype(tag)::value;
    if (n_tokens <= kGemvMaxTokens) {
      const dim3 grid(static_cast<unsigned>((rows + kGemvWarps - 1) / kGemvWarps),
                      static_cast<unsigned>(n_tokens));
      gemv_kernel<T><<<grid, kGemvWarps * 32, 0, stream>>>(wb, row_bytes, rows, n_chunks, x, bias,
                                                           y);
    } else {
      const dim3 grid(static_cast<unsigned>((rows + kTileM - 1) / kTileM),
                      static_cast<unsigned>((n_tokens + kTileN - 1) / kTileN));
      tiled_kernel<T><<<grid, kTileThreads, 0, stream>>>(wb, row_bytes, rows, n_chunks, x,
                                                         n_tokens, bias, y);
    }
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_get_rows_weight(TensorType type, const void* w, size_t row_bytes,
                                   int64_t n_table_rows, int64_t row_len, const int32_t* ids,
                                   int64_t n_rows, float scale, float* out, int* err,
                                   cudaStream_t stream) {
  const int64_t n_chunks = row_len / kChunk;
  const auto* wb = static_cast<const uint8_t*>(w);
  const bool known = dispatch_type(type, [&](auto tag) {
    constexpr TensorType T = decltype(tag)::value;
    const int threads = n_chunks >= 128 ? 128 : 32;
    get_rows_kernel<T><<<static_cast<unsigned>(n_rows), threads, 0, stream>>>(
        wb, row_bytes, n_table_rows, n_chunks, ids, scale, out, err);
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace minfer::cuda
