// Matrix products over quantized weights and the embedding lookup, for every
// type of backend/cuda/dequant.cuh, on f32 activations.
//
//   - GEMV (n_tokens <= kGemvMaxTokens, and launch_gemv_add at any size):
//     blocks of 4 warps; a group of warps
//     (one, or four for long rows) takes R output rows (four when there are
//     very many rows), its lanes decode chunks lane, lane + 32, ... of each
//     row (consecutive lanes read consecutive blocks) and dot them with the
//     activation chunk loaded once for all R rows (device_math.cuh:
//     rows_dot_lane, GemvSplit, choose_gemv_split); warp and group reductions
//     give the outputs. Tokens are the grid's y dimension.
//   - Tiled (more tokens): a 64 x 64 output tile per block of 256 threads; each
//     step decodes a 64-row x 32-column weight tile and loads a 32 x 64
//     activation tile into shared memory, then every thread accumulates a 4 x 4
//     sub-tile. Loads and stores past the edges are predicated (no early
//     return before a barrier).
// Accumulation is f32 in both; the bias is added at the end.
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"

namespace minfer::cuda {
namespace {

constexpr int64_t kGemvMaxTokens = 4;
constexpr int kTileM = 64;  // weight rows per block
constexpr int kTileN = 64;  // tokens per block
constexpr int kTileThreads = 256;

template <TensorType T, int R, int kSplit>
__global__ void __launch_bounds__(kGemvBlockWarps * 32)
    gemv_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t rows, int64_t n_chunks,
                const float* __restrict__ x, const float* __restrict__ bias, const float* residual,
                float* y) {
  __shared__ float part[kGemvBlockWarps][R];
  const GemvSplit<R, kSplit> g(blockIdx.x);
  const int64_t t = blockIdx.y;
  const int n = g.rows_valid(rows);
  float acc[R];
  rows_dot_lane<T, R>(w + g.row0 * row_bytes, row_bytes, n, n_chunks, g.c_begin(), g.kStep,
                      x + t * n_chunks * kChunk, acc);
  g.reduce(acc, part);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < n && g.writer()) {
      const int64_t i = t * rows + g.row0 + r;
      const float v = acc[r] + (bias != nullptr ? bias[g.row0 + r] : 0.0f);
      y[i] = residual != nullptr ? v + residual[i] : v;  // y may alias residual
    }
  }
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

namespace {

// The GEMV for up to kGemvMaxTokens tokens, with an optional residual.
cudaError_t launch_gemv(TensorType type, const uint8_t* wb, size_t row_bytes, int64_t rows,
                        int64_t n_chunks, const float* x, int64_t n_tokens, const float* bias,
                        const float* residual, float* y, cudaStream_t stream) {
  const bool known = dispatch_type(type, [&](auto tag) {
    constexpr TensorType T = decltype(tag)::value;
    choose_gemv_split(rows, n_chunks, 4, [&](auto r, auto split) {
      constexpr int kR = decltype(r)::value, kS = decltype(split)::value;
      constexpr int64_t per_block = GemvSplit<kR, kS>::kRowsPerBlock;
      const dim3 grid(static_cast<unsigned>((rows + per_block - 1) / per_block),
                      static_cast<unsigned>(n_tokens));
      gemv_kernel<T, kR, kS><<<grid, kGemvBlockWarps * 32, 0, stream>>>(
          wb, row_bytes, rows, n_chunks, x, bias, residual, y);
    });
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace

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
  if (n_tokens <= kGemvMaxTokens) {
    return launch_gemv(type, wb, row_bytes, rows, n_chunks, x, n_tokens, bias, nullptr, y, stream);
  }
  const bool known = dispatch_type(type, [&](auto tag) {
    constexpr TensorType T = decltype(tag)::value;
    const dim3 grid(static_cast<unsigned>((rows + kTileM - 1) / kTileM),
                    static_cast<unsigned>((n_tokens + kTileN - 1) / kTileN));
    tiled_kernel<T>
        <<<grid, kTileThreads, 0, stream>>>(wb, row_bytes, rows, n_chunks, x, n_tokens, bias, y);
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_gemv_add(TensorType type, const void* w, size_t row_bytes, int64_t rows,
                            int64_t in_dim, const float* x, int64_t n_tokens, const float* bias,
                            const float* residual, float* y, cudaStream_t stream) {
  return launch_gemv(type, static_cast<const uint8_t*>(w), row_bytes, rows, in_dim / kChunk, x,
                     n_tokens, bias, residual, y, stream);
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
