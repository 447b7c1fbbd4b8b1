// Element-wise ops, RMSNorm, RoPE, KV store and the row gather of the CUDA
// backend (launchers declared in backend/cuda/kernels.h).
//
// Numerics (f32 throughout): silu x / (1 + expf(-x)); gelu the tanh
// approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) evaluated in f32
// (the CPU backend's f16 lookup table is not reproduced: each path has its own
// reference); swiglu_oai the CPU kernel's f32 operations in its order (expf is
// CUDA's, within 2 ulp of libm's); rms_norm sums squares in f32 with a tree
// reduction; RoPE angles pos * base^(-2i/n_rot) / factor * freq_scale (YaRN:
// blended with the unscaled angle, device_math.cuh) and their sin/cos are
// computed in double, then rounded to f32 (YaRN: times mscale); KV cache rows
// are stored as kv_cache.cuh states (f16 rounds to nearest even; q8_0 is the
// CPU quantizer's bits).
#include <cuda_fp16.h>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_cache.cuh"

namespace minfer::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

template <Ew kOp>
__global__ void elementwise_kernel(const float* a, const float* b, float s, int64_t n, float* y) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float av = a[i];
    float r;
    if constexpr (kOp == Ew::kAdd)
      r = av + b[i];
    else if constexpr (kOp == Ew::kMul)
      r = av * b[i];
    else if constexpr (kOp == Ew::kScale)
      r = av * s;
    else if constexpr (kOp == Ew::kSilu)
      r = silu_f(av);
    else if constexpr (kOp == Ew::kGelu)
      r = gelu_f(av);
    else if constexpr (kOp == Ew::kSwiGLU)
      r = silu_f(av) * b[i];
    else
      r = gelu_f(av) * b[i];
    y[i] = r;
  }
}

// gpt-oss's clamped GLU, element by element (launch_swiglu_oai). The clamps
// are comparisons so that a NaN passes through as on the CPU (fminf/fmaxf
// would replace it by the limit).
__global__ void swiglu_oai_kernel(const float* gate, const float* up, float alpha, float limit,
                                  int64_t n, float* y) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i], u = up[i];
    const float x = limit < g ? limit : g;
    const float v = u < -limit ? -limit : (limit < u ? limit : u);
    const float glu = x / (1.0f + expf(alpha * (-x)));
    y[i] = glu * (v + 1.0f);
  }
}

// One block per row. Each thread normalizes exactly the elements it summed,
// so y may alias x.
__global__ void rms_norm_kernel(const float* x, const float* weight, int64_t dim, float eps,
                                float* y) {
  __shared__ float partial[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * dim;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i] * xr[i];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_warps = (blockDim.x + 31) >> 5;
  if (lane == 0) partial[warp] = sum;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < n_warps; ++w) total += partial[w];
  const float s = rsqrtf(total / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = xr[i] * s;
    yr[i] = weight != nullptr ? v * weight[i] : v;
  }
}

// One thread per (token, head, pair); pairs past n_rot/2 copy the tail dims.
__global__ void rope_kernel(const float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                            int64_t n_rot, const int32_t* positions, float freq_base,
                            float freq_scale, const float* freq_factors, YarnArgs yarn, bool neox,
                            float* y) {
  const int64_t half_dim = head_dim / 2;
  const int64_t total = n_tokens * n_heads * half_dim;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % half_dim;
    const int64_t th = idx / half_dim;  // token * n_heads + head
    const int64_t t = th / n_heads;
    const float* xh = x + th * head_dim;
    float* yh = y + th * head_dim;
    const int64_t half = n_rot / 2;
    if (i < half) {
      float c, s;
      rope_cos_sin(positions[t], i, n_rot, freq_base, freq_scale, freq_factors, yarn, &c, &s);
      const int64_t i0 = neox ? i : 2 * i;
      const int64_t i1 = neox ? i + half : 2 * i + 1;
      const float x0 = xh[i0], x1 = xh[i1];
      yh[i0] = x0 * c - x1 * s;
      yh[i1] = x0 * s + x1 * c;
    } else {
      // Dims [n_rot, head_dim) are copied; pair i (>= half) covers two of them.
      const int64_t d0 = n_rot + 2 * (i - half);
      if (d0 < head_dim) yh[d0] = xh[d0];
      if (d0 + 1 < head_dim) yh[d0 + 1] = xh[d0 + 1];
    }
  }
}

// One block of threads per (chunk of the row, token); a warp covers 32
// consecutive elements (one Q8_0 block), so with row % 32 == 0 every warp is
// wholly inside or outside the row, as kv_store_element needs.
template <TensorType KT, TensorType VT>
__global__ void kv_store_kernel(const float* k, const float* v, const int32_t* positions,
                                int64_t row, int64_t n_ctx, void* k_cache, void* v_cache,
                                int* err) {
  const int64_t t = blockIdx.y;
  const int32_t pos = positions[t];
  if (pos < 0 || pos >= n_ctx) {  // uniform per block; no barrier in this kernel
    if (threadIdx.x == 0 && blockIdx.x == 0 &&
        atomicCAS(err, kErrNone, kErrPositionRange) == kErrNone) {
      err[1] = pos;
      err[2] = static_cast<int>(n_ctx);
    }
    return;
  }
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < row;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    kv_store_element<KT>(k_cache, pos, row, i, k[t * row + i], err);
    kv_store_element<VT>(v_cache, pos, row, i, v[t * row + i], err);
  }
}

__global__ void gather_rows_kernel(const float* x, const int32_t* rows, int64_t width, float* out) {
  const int64_t r = blockIdx.x;
  const float* src = x + static_cast<int64_t>(rows[r]) * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) out[r * width + i] = src[i];
}

// Chunks of 4096 elements per row (a long row is many blocks' work: one
// block per row would walk 150k logits alone), at most 256.
int64_t argmax_chunks(int64_t width) {
  const int64_t c = (width + 4095) / 4096;
  return c < 1 ? 1 : (c > 256 ? 256 : c);
}

// The better of two (value, index) candidates: the larger value, the lower
// index among equals (index -1: no candidate).
__device__ __forceinline__ void better(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi >= 0 && (i < 0 || oi < i))) {
    v = ov;
    i = oi;
  }
}

// Blocks of (row, chunk): each thread the first maximum of its strided
// elements of the chunk (strict >, so NaN and -inf never win), then warp and
// block reductions; the block's (value, index) goes to part, and with one
// chunk per row straight to out. The choice (largest, then lowest index) does
// not depend on how the row is split.
__global__ void argmax_kernel(const float* __restrict__ x, int64_t width, int64_t chunk,
                              float* part_v, int* part_i, int32_t* out) {
  __shared__ float sv[kThreads / 32];
  __shared__ int si[kThreads / 32];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * width;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t end = begin + chunk < width ? begin + chunk : width;
  float v = -INFINITY;
  int idx = -1;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (row[i] > v) {
      v = row[i];
      idx = static_cast<int>(i);
    }
  }
  for (int o = 16; o > 0; o /= 2) {
    better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = idx;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) better(v, idx, sv[w], si[w]);
    if (gridDim.y == 1) {
      out[blockIdx.x] = idx;
    } else {
      part_v[blockIdx.x * gridDim.y + blockIdx.y] = v;
      part_i[blockIdx.x * gridDim.y + blockIdx.y] = idx;
    }
  }
}

// One warp per row: the best of the row's n_chunks partial results.
__global__ void argmax_merge_kernel(const float* part_v, const int* part_i, int n_chunks,
                                    int32_t* out) {
  float v = -INFINITY;
  int idx = -1;
  for (int c = threadIdx.x; c < n_chunks; c += 32) {
    better(v, idx, part_v[blockIdx.x * n_chunks + c], part_i[blockIdx.x * n_chunks + c]);
  }
  for (int o = 16; o > 0; o /= 2) {
    better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
  }
  if (threadIdx.x == 0) out[blockIdx.x] = idx;
}

}  // namespace

size_t argmax_scratch_bytes(int64_t n_rows, int64_t width) {
  return static_cast<size_t>(n_rows * argmax_chunks(width)) * 8;
}

cudaError_t launch_argmax(const float* x, int64_t n_rows, int64_t width, void* scratch,
                          int32_t* out, cudaStream_t stream) {
  if (n_rows <= 0) return cudaSuccess;
  const int64_t chunks = argmax_chunks(width);
  const int64_t chunk = (width + chunks - 1) / chunks;
  auto* part_v = static_cast<float*>(scratch);
  auto* part_i = reinterpret_cast<int*>(part_v + n_rows * chunks);
  argmax_kernel<<<dim3(static_cast<unsigned>(n_rows), static_cast<unsigned>(chunks)), kThreads, 0,
                  stream>>>(x, width, chunk, part_v, part_i, out);
  if (chunks > 1) {
    argmax_merge_kernel<<<static_cast<unsigned>(n_rows), 32, 0, stream>>>(
        part_v, part_i, static_cast<int>(chunks), out);
  }
  return cudaGetLastError();
}

cudaError_t launch_elementwise(Ew op, const float* a, const float* b, float s, int64_t n, float* y,
                               cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const unsigned grid = std::min<unsigned>(blocks_for(n, kThreads), 65535u);
  switch (op) {
    case Ew::kAdd:
      elementwise_kernel<Ew::kAdd><<<grid, kThreads, 0, stream>>>(a, b, s, n, y);
      break;
    case Ew::kMul:
      elementwise_kernel<Ew::kMul><<<grid, kThreads, 0, stream>>>(a, b, s, n, y);
      break;
    case Ew::kScale:
      elementwise_kernel<Ew::kScale><<<grid, kThreads, 0, stream>>>(a, b, s, n, y);
      break;
    case Ew::kSilu:
      elementwise_kernel<Ew::kSilu><<<grid, kThreads, 0, stream>>>(a, b, s, n, y);
      break;
    case Ew::kGelu:
      elementwise_kernel<Ew::kGelu><<<grid, kThreads, 0, stream>>>(a, b, s, n, y);
      break;
    case Ew::kSwiGLU:
      elementwise_kernel<Ew::kSwiGLU><<<grid, kThreads, 0, stream>>>(a, b, s, n, y);
      break;
    case Ew::kGeGLU:
      elementwise_kernel<Ew::kGeGLU><<<grid, kThreads, 0, stream>>>(a, b, s, n, y);
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_swiglu_oai(const float* gate, const float* up, int64_t n, float alpha,
                              float limit, float* y, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const unsigned grid = std::min<unsigned>(blocks_for(n, kThreads), 65535u);
  swiglu_oai_kernel<<<grid, kThreads, 0, stream>>>(gate, up, alpha, limit, n, y);
  return cudaGetLastError();
}

cudaError_t launch_rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t dim,
                            float eps, float* y, cudaStream_t stream) {
  if (n_rows <= 0) return cudaSuccess;
  const int threads = dim >= 1024 ? 256 : (dim >= 256 ? 128 : 32);
  rms_norm_kernel<<<static_cast<unsigned>(n_rows), threads, 0, stream>>>(x, weight, dim, eps, y);
  return cudaGetLastError();
}

cudaError_t launch_rope(const float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                        int64_t n_rot, const int32_t* positions, float freq_base, float freq_scale,
                        const float* freq_factors, const YarnArgs& yarn, bool neox, float* y,
                        cudaStream_t stream) {
  const int64_t total = n_tokens * n_heads * (head_dim / 2);
  if (total <= 0) return cudaSuccess;
  const unsigned grid = std::min<unsigned>(blocks_for(total, kThreads), 65535u);
  rope_kernel<<<grid, kThreads, 0, stream>>>(x, n_tokens, n_heads, head_dim, n_rot, positions,
                                             freq_base, freq_scale, freq_factors, yarn, neox, y);
  return cudaGetLastError();
}

cudaError_t launch_kv_store(const float* k, const float* v, const int32_t* positions,
                            int64_t n_tokens, int64_t row, int64_t n_ctx, TensorType k_type,
                            TensorType v_type, void* k_cache, void* v_cache, int* err,
                            cudaStream_t stream) {
  if ((k_type == TensorType::Q8_0 || v_type == TensorType::Q8_0) && row % kKvQ8Elems != 0) {
    return cudaErrorInvalidValue;
  }
  if (n_tokens <= 0) return cudaSuccess;
  const dim3 grid(blocks_for(row, kThreads), static_cast<unsigned>(n_tokens));
  bool known = false;
  dispatch_kv_type(k_type, [&](auto kt) {
    known = dispatch_kv_type(v_type, [&](auto vt) {
      kv_store_kernel<decltype(kt)::value, decltype(vt)::value>
          <<<grid, kThreads, 0, stream>>>(k, v, positions, row, n_ctx, k_cache, v_cache, err);
    });
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_gather_rows(const float* x, const int32_t* rows, int64_t n_rows, int64_t width,
                               float* out, cudaStream_t stream) {
  if (n_rows <= 0) return cudaSuccess;
  gather_rows_kernel<<<static_cast<unsigned>(n_rows), kThreads, 0, stream>>>(x, rows, width, out);
  return cudaGetLastError();
}

}  // namespace minfer::cuda
