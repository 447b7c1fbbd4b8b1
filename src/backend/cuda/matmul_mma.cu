// Tensor-core matrix product for multi-token batches (prefill), every weight
// type of backend/cuda/dequant.cuh, on f32 activations:
//
//   1. the weight matrix is decoded once to bf16 into stream-ordered scratch
//      (skipped for BF16 weights whose rows are 16-byte aligned), and the f32
//      activations are rounded to bf16 (round to nearest even) beside it;
//   2. a bf16 GEMM with f32 accumulation: 128 tokens x 128 weight rows per
//      block of 8 warps (each 64 tokens x 32 rows), k-steps of 32 staged in
//      shared memory by cp.async, kStages deep, read with ldmatrix and
//      multiplied with mma.sync m16n8k16; the bias is added in f32 at the end.
//
// bf16 keeps the f32 exponent range (large activations, as in Gemma, cannot
// overflow) but rounds every operand to 8 significant bits, so outputs differ
// from the f32 path by ~2^-9 of the dot product's norm (docs/CUDA.md states
// the measured error). The scratch (bf16 weights + activations) comes from a
// per-device memory pool (scratch_alloc, also used by attention.cu) and is
// freed with cudaFreeAsync on the stream;
// when it cannot be had the launcher returns cudaErrorMemoryAllocation with
// the error cleared, and the caller runs its f32 kernel instead.
// Why decode to global memory rather than into each tile: every weight element
// is decoded once instead of once per 128-token tile, and the GEMM's loads are
// plain 16-byte copies; the extra pass costs a read and a write of the bf16
// weights (~5% of the GEMM at 2048 tokens, docs/PERFORMANCE.md).
#include <cuda_bf16.h>

#include <cstdint>
#include <mutex>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"

namespace minfer::cuda {
namespace {

constexpr int kBM = 128;  // tokens per block
constexpr int kBN = 128;  // weight rows per block
constexpr int kBK = 32;   // k per stage
constexpr int kStages = 4;
constexpr int kThreads = 256;
constexpr int kPitch =
    kBK + 8;  // bf16 per shared row: 80 bytes, so ldmatrix rows miss each other's banks
constexpr int kStageElems = (kBM + kBN) * kPitch;
constexpr size_t kSmemBytes = size_t{kStages} * kStageElems * sizeof(__nv_bfloat16);

// --- conversion passes --------------------------------------------------------

template <TensorType T>
__global__ void decode_bf16_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t rows,
                                   int64_t n_chunks, __nv_bfloat16* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * n_chunks) return;  // no barrier in this kernel
  const int64_t r = i / n_chunks, c = i % n_chunks;
  float v[kChunk];
  dequant_chunk<T>(w + r * row_bytes, c, v);
  uint4* o = reinterpret_cast<uint4*>(out + r * n_chunks * kChunk + c * kChunk);
#pragma unroll
  for (int q = 0; q < kChunk / 8; ++q) {
    uint4 u;
    uint32_t* p = reinterpret_cast<uint32_t*>(&u);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const __nv_bfloat162 b = __floats2bfloat162_rn(v[8 * q + 2 * e], v[8 * q + 2 * e + 1]);
      p[e] = *reinterpret_cast<const uint32_t*>(&b);
    }
    o[q] = u;
  }
}

__global__ void f32_to_bf16_kernel(const float4* __restrict__ x, int64_t n4,
                                   uint2* __restrict__ out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 v = x[i];
    const __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y);
    const __nv_bfloat162 b = __floats2bfloat162_rn(v.z, v.w);
    out[i] =
        make_uint2(*reinterpret_cast<const uint32_t*>(&a), *reinterpret_cast<const uint32_t*>(&b));
  }
}

// --- the GEMM ---------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; zero-filled when !valid (src is then not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Stage one k-step: x rows [tok0, tok0 + kBM) and w rows [row0, row0 + kBN),
// columns [k0, k0 + kBK); rows past the edges are zero-filled.
__device__ __forceinline__ void load_stage(__nv_bfloat16* s, const __nv_bfloat16* __restrict__ x,
                                           const __nv_bfloat16* __restrict__ w, int64_t n_tokens,
                                           int64_t rows, int64_t in_dim, int64_t tok0, int64_t row0,
                                           int64_t k0) {
  constexpr int kPieces = kBK / 8;  // 16-byte pieces per row
#pragma unroll
  for (int i = 0; i < (kBM + kBN) * kPieces / kThreads; ++i) {
    const int idx = static_cast<int>(threadIdx.x) + i * kThreads;
    const int r = idx / kPieces, piece = idx % kPieces;
    const bool is_x = r < kBM;
    const int64_t g = is_x ? tok0 + r : row0 + (r - kBM);
    const bool valid = g < (is_x ? n_tokens : rows);
    const __nv_bfloat16* src = (is_x ? x : w) + (valid ? g : 0) * in_dim + k0 + piece * 8;
    cp_async16(s + r * kPitch + piece * 8, src, valid);
  }
}

__global__ void __launch_bounds__(kThreads, 2)
    gemm_bf16_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                     int64_t n_tokens, int64_t rows, int64_t in_dim, const float* __restrict__ bias,
                     float* __restrict__ y) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* smem = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / 4, wn = warp % 4;  // warp tile: tokens [64 wm, +64), rows [32 wn, +32)
  // Consecutive blocks share a weight tile and sweep the tokens (x stays in L2).
  const int64_t tok0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int64_t k_steps = in_dim / kBK;

  float acc[4][4][4] = {};  // [m16 tile][n8 tile][fragment]

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_steps) {
      load_stage(smem + s * kStageElems, x, w, n_tokens, rows, in_dim, tok0, row0, s * kBK);
    }
    cp_async_commit();
  }
  // ldmatrix lane addressing (see the PTX fragment layouts of m16n8k16):
  // A (x4): lanes 0-15 rows 0-15 at k 0, lanes 16-31 rows 0-15 at k 8.
  // B (x4): two n8 tiles; lanes 0-7 n 0-7 k 0, 8-15 n 0-7 k 8, 16-23 n 8-15 k 0, 24-31 n 8-15 k 8.
  const int a_row = lane & 15, a_k = (lane >> 4) * 8;
  const int b_row = (lane & 7) + ((lane >> 4) << 3), b_k = ((lane >> 3) & 1) * 8;

  for (int64_t kt = 0; kt < k_steps; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int64_t next = kt + kStages - 1;
    if (next < k_steps) {
      load_stage(smem + (next % kStages) * kStageElems, x, w, n_tokens, rows, in_dim, tok0, row0,
                 next * kBK);
    }
    cp_async_commit();
    const __nv_bfloat16* sa = smem + (kt % kStages) * kStageElems;
    const __nv_bfloat16* sb = sa + kBM * kPitch;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t a[4][4], b[4][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        ldmatrix_x4(a[mi], sa + (wm * 64 + mi * 16 + a_row) * kPitch + kk + a_k);
      }
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) {
        uint32_t r[4];
        ldmatrix_x4(r, sb + (wn * 32 + nj * 16 + b_row) * kPitch + kk + b_k);
        b[2 * nj][0] = r[0];
        b[2 * nj][1] = r[1];
        b[2 * nj + 1][0] = r[2];
        b[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_bf16(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
      }
    }
  }
  cp_async_wait<0>();

  // Fragment (mi, ni): d0, d1 at token g, rows 2c, 2c+1; d2, d3 at token g + 8.
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int ni = 0; ni < 4; ++ni) {
    const int64_t r = row0 + wn * 32 + ni * 8 + 2 * c;
    const float b0 = bias != nullptr && r < rows ? bias[r] : 0.0f;
    const float b1 = bias != nullptr && r + 1 < rows ? bias[r + 1] : 0.0f;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t t = tok0 + wm * 64 + mi * 16 + g + 8 * h;
        if (t >= n_tokens) continue;
        float* yt = y + t * rows;
        if (r < rows) yt[r] = acc[mi][ni][2 * h] + b0;
        if (r + 1 < rows) yt[r + 1] = acc[mi][ni][2 * h + 1] + b1;
      }
    }
  }
}

// --- scratch --------------------------------------------------------------------

constexpr int kMaxDevices = 16;
// Kept by the pool between calls, so a prefill does not map memory anew per matmul.
constexpr uint64_t kPoolKeepBytes = uint64_t{1} << 30;

// The calling thread's current device's scratch pool, created on first use.
cudaError_t scratch_pool(cudaMemPool_t* pool) {
  static std::mutex mu;
  static cudaMemPool_t pools[kMaxDevices] = {};
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (dev < 0 || dev >= kMaxDevices) return cudaErrorInvalidDevice;
  std::lock_guard<std::mutex> lock(mu);
  if (pools[dev] == nullptr) {
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t p = nullptr;
    if (cudaError_t e = cudaMemPoolCreate(&p, &props); e != cudaSuccess) return e;
    uint64_t keep = kPoolKeepBytes;
    if (cudaError_t e = cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep);
        e != cudaSuccess) {
      cudaMemPoolDestroy(p);
      return e;
    }
    pools[dev] = p;
  }
  *pool = pools[dev];
  return cudaSuccess;
}

cudaError_t set_gemm_smem_once() {
  static std::once_flag once;
  static cudaError_t status = cudaSuccess;
  std::call_once(once, [] {
    status = cudaFuncSetAttribute(gemm_bf16_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kSmemBytes));
  });
  return status;
}

}  // namespace

cudaError_t scratch_alloc(void** p, size_t bytes, cudaStream_t stream) {
  cudaMemPool_t pool = nullptr;
  cudaError_t e = scratch_pool(&pool);
  if (e == cudaSuccess) e = cudaMallocFromPoolAsync(p, bytes, pool, stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // callers fall back; leave no error behind
    return cudaErrorMemoryAllocation;
  }
  return cudaSuccess;
}

cudaError_t launch_matmul_mma(TensorType type, const void* w, size_t row_bytes, int64_t rows,
                              int64_t in_dim, const float* x, int64_t n_tokens, const float* bias,
                              float* y, cudaStream_t stream) {
  if (!has_decoder(type) || in_dim % kBK != 0 || rows <= 0 || n_tokens <= 0) {
    return cudaErrorInvalidValue;
  }
  if (set_gemm_smem_once() != cudaSuccess) {  // a device with less shared memory: f32 path
    (void)cudaGetLastError();
    return cudaErrorMemoryAllocation;
  }
  const bool direct_bf16 = type == TensorType::BF16 &&
                           row_bytes == static_cast<size_t>(in_dim) * 2 &&
                           reinterpret_cast<uintptr_t>(w) % 16 == 0;
  const size_t x_bytes = static_cast<size_t>(n_tokens * in_dim) * sizeof(__nv_bfloat16);
  const size_t w_bytes = direct_bf16 ? 0 : static_cast<size_t>(rows * in_dim) * 2;
  void* scratch = nullptr;
  cudaError_t e = scratch_alloc(&scratch, x_bytes + w_bytes, stream);
  if (e != cudaSuccess) return e;
  auto* xb = static_cast<__nv_bfloat16*>(scratch);
  const __nv_bfloat16* wb = static_cast<const __nv_bfloat16*>(w);
  if (!direct_bf16) {
    auto* wd = reinterpret_cast<__nv_bfloat16*>(static_cast<uint8_t*>(scratch) + x_bytes);
    const int64_t n_chunks = in_dim / kChunk;
    const int64_t jobs = rows * n_chunks;
    const auto blocks = static_cast<unsigned>((jobs + 255) / 256);
    dispatch_type(type, [&](auto tag) {
      constexpr TensorType T = decltype(tag)::value;
      decode_bf16_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<const uint8_t*>(w), row_bytes,
                                                        rows, n_chunks, wd);
    });
    wb = wd;
  }
  const int64_t n4 = n_tokens * in_dim / 4;
  const auto cvt_blocks = static_cast<unsigned>(n4 / 256 + 1 < 4096 ? n4 / 256 + 1 : 4096);
  f32_to_bf16_kernel<<<cvt_blocks, 256, 0, stream>>>(reinterpret_cast<const float4*>(x), n4,
                                                     reinterpret_cast<uint2*>(xb));
  const dim3 grid(static_cast<unsigned>((n_tokens + kBM - 1) / kBM),
                  static_cast<unsigned>((rows + kBN - 1) / kBN));
  gemm_bf16_kernel<<<grid, kThreads, kSmemBytes, stream>>>(xb, wb, n_tokens, rows, in_dim, bias, y);
  e = cudaGetLastError();
  const cudaError_t f = cudaFreeAsync(scratch, stream);
  return e != cudaSuccess ? e : f;
}

}  // namespace minfer::cuda
