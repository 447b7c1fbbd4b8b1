// Matrix products of Q4_0 / Q8_0 weights with int8-quantized activations on
// the int8 tensor cores (mma.sync m16n8k32 s8): the batched-decode and
// batch-invariant path (launchers in kernels.h).
//
// The activations come quantized by launch_quantize_q8 (per 32 values: int8
// q and scale d_x). A weight block (32 values, scale d_w, values q_w: Q8_0's
// int8, Q4_0's nibbles minus 8) against an activation block gives the exact
// integer sum s = sum q_w q_x from one mma; the output adds d_w * d_x * s
// in f32. Every output (row, token) sums its blocks in one fixed order: the
// row's blocks are cut into S contiguous slices (S from the matrix shape and
// the SM count only), each slice summed in block order, then the slices
// added in order. Nothing in that order depends on the batch — how many
// tokens, which, or where a token sits — so a token's outputs are bit for
// bit the same in any batch (the engine's batch invariance), and __fmul_rn /
// __fadd_rn keep the compiler from contracting any of it into FMAs.
//
// A block has 8 warps: 8 / S tiles of 16 weight rows, each tile's S warps
// taking one slice each. A warp holds 8 * NJ tokens (NJ n8-tiles of the
// mma, NJ 1 or 2; grid y covers the batch) and, per weight block, loads its A fragment straight
// from the GGUF rows (2-byte aligned words), the B fragments and d_x from the quantized activations
// (L1-resident), issues NJ mmas and scales their results. The slices meet in shared memory; the
// epilogue adds the bias, then the residual (the unfused order's value). Rows and tokens past the
// end are clamped for loads and never written.
#include <cuda_fp16.h>

#include <type_traits>

#include "backend/cuda/kernels.h"

namespace minfer::cuda {
namespace {

constexpr int kWarps = 8;

__host__ __device__ __forceinline__ int64_t mini(int64_t a, int64_t b) {
  return a < b ? a : b;
}

__device__ __forceinline__ uint32_t load_u32_2aligned(const uint8_t* p) {
  const auto* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint32_t>(__ldg(h)) | (static_cast<uint32_t>(__ldg(h + 1)) << 16);
}

__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(p))));
}

// The A fragment words of one row's block b for this lane: elements k =
// 4 * tig .. + 3 (lo) and 16 + 4 * tig .. + 3 (hi), as signed int8; and d_w.
template <quant::TensorType T>
struct BlockA;

template <>
struct BlockA<quant::TensorType::Q4_0> {
  static constexpr int kBytes = 18;
  __device__ static void load(const uint8_t* blk, int tig, uint32_t& lo, uint32_t& hi, float& d) {
    const uint32_t w = load_u32_2aligned(blk + 2 + 4 * tig);
    lo = __vsub4(w & 0x0f0f0f0fu, 0x08080808u);
    hi = __vsub4((w >> 4) & 0x0f0f0f0fu, 0x08080808u);
    d = half_at(blk);
  }
};

template <>
struct BlockA<quant::TensorType::Q8_0> {
  static constexpr int kBytes = 34;
  __device__ static void load(const uint8_t* blk, int tig, uint32_t& lo, uint32_t& hi, float& d) {
    lo = load_u32_2aligned(blk + 2 + 4 * tig);
    hi = load_u32_2aligned(blk + 18 + 4 * tig);
    d = half_at(blk);
  }
};

__device__ __forceinline__ void mma_s8(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                       uint32_t a3, uint32_t b0, uint32_t b1) {
  c[0] = c[1] = c[2] = c[3] = 0;
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

struct MmqArgs {
  const uint8_t* w;
  size_t row_bytes;
  int64_t rows, n_blocks;  // weight rows, 32-value blocks per row
  const int8_t* xq;        // [n_tokens][x_stride bytes]: q [in_dim], then d [n_blocks]
  int64_t x_stride, n_tokens;
  int slices;  // S: 1, 2, 4 or 8
  const float* bias;
  const float* residual;
  float* y;
};

// At most 80 registers: three blocks (24 warps) per SM instead of two at the
// 101 the compiler would take for NJ = 2 (a few bytes spill); these kernels
// wait on load latency, so resident warps are what makes them fast.
template <quant::TensorType T, int NJ>
__global__ void __launch_bounds__(kWarps * 32, 3) mmq_kernel(MmqArgs a) {
  __shared__ float part[kWarps][NJ * 4][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
  const int S = a.slices;
  const int tile = warp / S, slice = warp % S;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / S) + tile) * 16;
  const int64_t tok0 = static_cast<int64_t>(blockIdx.y) * 8 * NJ;
  const int64_t per = (a.n_blocks + S - 1) / S;
  const int64_t b_begin = mini(a.n_blocks, slice * per);
  const int64_t b_end = mini(a.n_blocks, b_begin + per);
  const int64_t last_row = a.rows - 1, last_tok = a.n_tokens - 1;
  const uint8_t* w0 = a.w + mini(row0 + g, last_row) * a.row_bytes;
  const uint8_t* w1 = a.w + mini(row0 + g + 8, last_row) * a.row_bytes;
  const int8_t* xb[NJ];    // B fragment token (column g of n-tile j)
  const float* xd[NJ][2];  // d_x of the C fragment's columns 2 tig, 2 tig + 1
  const int64_t d_off = a.n_blocks * 32;
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    xb[j] = a.xq + mini(tok0 + 8 * j + g, last_tok) * a.x_stride;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int8_t* t = a.xq + mini(tok0 + 8 * j + 2 * tig + c, last_tok) * a.x_stride;
      xd[j][c] = reinterpret_cast<const float*>(t + d_off);
    }
  }
  float acc[NJ][4];
#pragma unroll
  for (int j = 0; j < NJ; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  // One block's products into the sums, in block order.
  const auto step = [&](int64_t b, const uint32_t(&aw)[4], float d0, float d1) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const auto* xw = reinterpret_cast<const uint32_t*>(xb[j] + b * 32);
      int c[4];
      mma_s8(c, aw[0], aw[1], aw[2], aw[3], __ldg(xw + tig), __ldg(xw + 4 + tig));
      const float dx0 = __ldg(xd[j][0] + b), dx1 = __ldg(xd[j][1] + b);
      acc[j][0] = __fadd_rn(acc[j][0], __fmul_rn(__fmul_rn(d0, dx0), __int2float_rn(c[0])));
      acc[j][1] = __fadd_rn(acc[j][1], __fmul_rn(__fmul_rn(d0, dx1), __int2float_rn(c[1])));
      acc[j][2] = __fadd_rn(acc[j][2], __fmul_rn(__fmul_rn(d1, dx0), __int2float_rn(c[2])));
      acc[j][3] = __fadd_rn(acc[j][3], __fmul_rn(__fmul_rn(d1, dx1), __int2float_rn(c[3])));
    }
  };
  // Four blocks' weights loaded before any is used (loads in flight).
  constexpr int kAhead = 4;
  int64_t b = b_begin;
  for (; b + kAhead <= b_end; b += kAhead) {
    uint32_t aw[kAhead][4];
    float d[kAhead][2];
#pragma unroll
    for (int q = 0; q < kAhead; ++q) {
      BlockA<T>::load(w0 + (b + q) * BlockA<T>::kBytes, tig, aw[q][0], aw[q][2], d[q][0]);
      BlockA<T>::load(w1 + (b + q) * BlockA<T>::kBytes, tig, aw[q][1], aw[q][3], d[q][1]);
    }
#pragma unroll
    for (int q = 0; q < kAhead; ++q) step(b + q, aw[q], d[q][0], d[q][1]);
  }
  for (; b < b_end; ++b) {
    uint32_t aw[4];
    float d0, d1;
    BlockA<T>::load(w0 + b * BlockA<T>::kBytes, tig, aw[0], aw[2], d0);
    BlockA<T>::load(w1 + b * BlockA<T>::kBytes, tig, aw[1], aw[3], d1);
    step(b, aw, d0, d1);
  }
  // Slices in order: the tile's first warp adds the others' sums to its own.
  if (S > 1) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) part[warp][4 * j + i][lane] = acc[j][i];
    }
  }
  __syncthreads();         // S is the same for the whole block: every thread gets here
  if (slice != 0) return;  // past the only barrier
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = acc[j][i];
      for (int s = 1; s < S; ++s) v = __fadd_rn(v, part[warp + s][4 * j + i][lane]);
      const int64_t r = row0 + g + (i >= 2 ? 8 : 0);
      const int64_t t = tok0 + 8 * j + 2 * tig + (i & 1);
      if (r < a.rows && t < a.n_tokens) {
        if (a.bias != nullptr) v = __fadd_rn(v, a.bias[r]);
        const int64_t o = t * a.rows + r;
        if (a.residual != nullptr) v = __fadd_rn(v, a.residual[o]);
        a.y[o] = v;  // y may alias residual
      }
    }
  }
}

// S (1, 2, 4 or 8): more slices for matrices with few row tiles, so that
// several warps per SM have work even for one token (a function of the
// shape and the device only, never of the batch).
int slices_for(int64_t rows, int64_t n_blocks) {
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return 132;
    }
    return n;
  }();
  const int64_t tiles = (rows + 15) / 16;
  int s = tiles >= 4 * sms ? 1 : (tiles >= 2 * sms ? 2 : (tiles >= sms / 2 ? 4 : 8));
  while (s > 1 && n_blocks < 2 * s) s /= 2;
  return s;
}

// Tokens per warp: 8 or 16 (more tokens go to more blocks, which keeps
// many warps busy on a decode batch; each re-reads its rows from L2).
template <class F>
void choose_nj(int64_t n_tokens, F&& f) {
  if (n_tokens > 8) {
    f(std::integral_constant<int, 2>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

}  // namespace

bool has_mmq(quant::TensorType type, int64_t in_dim) {
  return (type == quant::TensorType::Q4_0 || type == quant::TensorType::Q8_0) && in_dim > 0 &&
         in_dim % 32 == 0;
}

cudaError_t launch_mmq(quant::TensorType type, const void* w, size_t row_bytes, int64_t rows,
                       int64_t in_dim, const int8_t* quantized, int64_t n_tokens, const float* bias,
                       const float* residual, float* y, cudaStream_t stream) {
  if (!has_mmq(type, in_dim) || quantized == nullptr || n_tokens < 1 || rows < 1) {
    return cudaErrorInvalidValue;
  }
  MmqArgs a{static_cast<const uint8_t*>(w),
            row_bytes,
            rows,
            in_dim / 32,
            quantized,
            static_cast<int64_t>(q8_activation_bytes(in_dim)),
            n_tokens,
            slices_for(rows, in_dim / 32),
            bias,
            residual,
            y};
  const int64_t tiles_per_block = kWarps / a.slices;
  const auto grid_x =
      static_cast<unsigned>((rows + 16 * tiles_per_block - 1) / (16 * tiles_per_block));
  choose_nj(n_tokens, [&](auto nj) {
    constexpr int NJ = decltype(nj)::value;
    const auto grid_y = static_cast<unsigned>((n_tokens + 8 * NJ - 1) / (8 * NJ));
    const dim3 grid(grid_x, grid_y);
    if (type == quant::TensorType::Q4_0) {
      mmq_kernel<quant::TensorType::Q4_0, NJ><<<grid, kWarps * 32, 0, stream>>>(a);
    } else {
      mmq_kernel<quant::TensorType::Q8_0, NJ><<<grid, kWarps * 32, 0, stream>>>(a);
    }
  });
  return cudaGetLastError();
}

}  // namespace minfer::cuda
