// One token through the tensor-core products' arithmetic, without the
// tensor cores (mmq.cu, its only includer, launches it for one token of
// every type it takes).
//
// The engine's batch invariance asks that a token's outputs be the same bit
// for bit whatever its batch, so one token must round exactly as mmq_kernel
// rounds it in a batch of 70. That kernel's sums are fixed by the format's
// f32 steps (mmq_formats.cuh) on exact integer sums, added in block order
// within each of the row's S slices, the slices then added in order. Any
// integer arithmetic gives the same integers, and a term (its d_x and the
// f32 value it scales) does not depend on the running sum, so here a group
// of G lanes owns one (row, slice): per step, lane j of the group reads
// unit j's bytes (the group's loads one contiguous run of the row) and
// takes its dot with dp4a. Q4_0 / Q8_0 (a block is a unit; G = 8 blocks a
// step): each lane's term's f32 steps, then every lane of the group folds
// the step's terms into the sum in unit order (shuffles, the same fma
// chain). The K-quants (a step is one block: G = 8 units of a Q4_K / Q5_K
// super-block, 4 of a Q6_K half): the group adds its lanes' scaled integer
// sums (shuffles, exact in any order), then takes the block's one f32 term.
// The slices of a row meet in shared memory and are added in order, then
// the bias and the residual.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/mmq_formats.cuh"
#include "backend/cuda/mmq_segments.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8_quantize.cuh"

namespace minfer::cuda::mmq_one {

using mmq::big_float;
using mmq::byte_s;
using mmq::byte_u;
using mmq::exact_float;

struct OneArgs {
  const uint8_t* w;
  size_t row_bytes;
  int64_t rows, n_blocks;  // weight rows, blocks (of the format) per row
  const int8_t* xq;        // the token, in launch_quantize_q8's layout (or null: `in`)
  int64_t n_units;
  int slices;  // S, as mmq_kernel cuts the same matrix
  const float* bias;
  const float* residual;
  float* y;
  // The token in f32 (with its input norm) when xq is null: each block
  // quantizes it into shared memory first (q8_quantize.cuh, the same bytes
  // as launch_quantize_q8's), which saves that launch.
  Q8Input in;
};

// The token's unit u (of the quantized token at xq, in global or shared
// memory): its 32 values as 8 words, d_x and the integer sum of its q.
struct XUnit {
  int q[8];
  float d;
  int s;
};

__device__ __forceinline__ XUnit x_unit(const OneArgs& a, const int8_t* xq, int64_t u, bool sums) {
  XUnit o;
  const auto* p = reinterpret_cast<const int4*>(xq + 32 * u);
  const int4 lo = p[0], hi = p[1];
  o.q[0] = lo.x, o.q[1] = lo.y, o.q[2] = lo.z, o.q[3] = lo.w;
  o.q[4] = hi.x, o.q[5] = hi.y, o.q[6] = hi.z, o.q[7] = hi.w;
  const auto* d = reinterpret_cast<const float*>(xq + 32 * a.n_units);
  o.d = d[u];
  o.s = sums ? reinterpret_cast<const int*>(d + a.n_units)[u] : 0;
  return o;
}

// The sum of v over the G lanes of this lane's group (G a power of two,
// groups aligned to G lanes; only the group need be converged), on every
// lane of the group.
template <int G>
__device__ __forceinline__ int group_sum(int v) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const unsigned mask = ((1u << G) - 1u) << (lane & ~(G - 1));
#pragma unroll
  for (int o = 1; o < G; o *= 2) v += __shfl_xor_sync(mask, v, o);
  return v;
}

// A unit's term: acc = fma(a, b, acc) in the tensor-core kernel.
struct Term {
  float a, b;
};

__device__ __forceinline__ void words8(const uint4& a, const uint4& b, uint32_t (&w)[8]) {
  w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
  w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
}

// --- Q4_K and Q5_K: lane j of the group takes sub-block j ------------------
template <bool kFifth>
struct KQuant4 {
  using Mma = mmq::KQuant4<kFifth>;
  static constexpr int kGroup = Mma::kUnits;  // 8
  static constexpr int kStepBlocks = 1;       // blocks a step of the group
  static constexpr int kTerms = 1;            // terms a step (the same on every lane)
  struct Bytes {                              // what lane j reads of a super-block
    uint4 head;  // d, dmin, the 12 scale bytes (the same for the group)
    uint4 q[2];  // the 32 qs bytes of sub-blocks 2 (j / 2), + 1
    uint4 h[2];  // Q5_K: the 32 qh bytes (the same for the group)
  };
  __device__ static void load(const uint8_t* row, int64_t b, int64_t /*b_end*/, int j, Bytes& k) {
    const auto* p = reinterpret_cast<const uint4*>(row + b * Mma::kBytes);
    k.head = __ldg(p);
    k.q[0] = __ldg(p + Mma::kQs / 16 + 2 * (j / 2));
    k.q[1] = __ldg(p + Mma::kQs / 16 + 2 * (j / 2) + 1);
    if constexpr (kFifth) {
      k.h[0] = __ldg(p + 1);
      k.h[1] = __ldg(p + 2);
    }
  }
  // The block's one term (every lane of the group): S and M of
  // mmq_formats.cuh summed over the group's sub-blocks.
  __device__ static Term term(const OneArgs& a, const int8_t* xq, const Bytes& k, int64_t b,
                              int j) {
    const XUnit x = x_unit(a, xq, b * kGroup + j, true);
    uint32_t q[8], h[8] = {};
    words8(k.q[0], k.q[1], q);
    if constexpr (kFifth) words8(k.h[0], k.h[1], h);
    int c = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // values 4 i .. 4 i + 3 of the sub-block
      uint32_t w = (q[i] >> (4 * (j % 2))) & 0x0f0f0f0fu;
      if constexpr (kFifth) w |= ((h[i] >> j) & 0x01010101u) << 4;
      c = __dp4a(static_cast<int>(w), x.q[i], c);
    }
    const typename Mma::Scales s(k.head);
    const uint32_t sc = j < 4 ? s.sc[0] : s.sc[1], m = j < 4 ? s.m[0] : s.m[1];
    const int sum = group_sum<kGroup>(byte_u(sc, j % 4) * c);
    const int mins = group_sum<kGroup>(byte_u(m, j % 4) * x.s);
    const __half2 dm = *reinterpret_cast<const __half2*>(&k.head.x);
    const float v =
        __fmaf_rn(__low2float(dm), big_float(sum), -__fmul_rn(__high2float(dm), exact_float(mins)));
    return {x.d, v};  // every unit of the super-block has its d_x
  }
};

// --- Q6_K: lane t of the group takes unit t of half a super-block ----------
// The super-block is 2-byte aligned: each 32-byte run is read as nine
// aligned words and shifted into place.
struct Q6K {
  static constexpr int kGroup = mmq::Q6K::kUnits;  // 4
  static constexpr int kStepBlocks = 1;
  static constexpr int kTerms = 1;
  struct Bytes {
    uint32_t ql[8];  // the unit's 32 low-nibble bytes
    uint32_t qh[8];  // the half's 32 high-bit bytes
    uint32_t sc[2];  // the half's 8 scales (signed bytes)
    float d;
  };
  // 32 bytes from p (2-byte aligned) as 8 words.
  __device__ static void run32(const uint8_t* p, uint32_t (&w)[8]) {
    const auto* base = reinterpret_cast<const uint32_t*>(reinterpret_cast<uintptr_t>(p) &
                                                         ~static_cast<uintptr_t>(3));
    const unsigned sh = 8u * (reinterpret_cast<uintptr_t>(p) & 3u);
    uint32_t v[9];
#pragma unroll
    for (int i = 0; i < 9; ++i) v[i] = __ldg(base + i);
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = __funnelshift_r(v[i], v[i + 1], sh);
  }
  __device__ static void load(const uint8_t* row, int64_t b, int64_t /*b_end*/, int t, Bytes& k) {
    const uint8_t* sb = row + (b >> 1) * 210;
    const int h = static_cast<int>(b & 1);
    run32(sb + 64 * h + 32 * (t % 2), k.ql);
    run32(sb + 128 + 32 * h, k.qh);
    k.sc[0] = mmq::u32_2aligned(sb + 192 + 8 * h);
    k.sc[1] = mmq::u32_2aligned(sb + 196 + 8 * h);
    k.d = mmq::half_at(sb + 208);
  }
  __device__ static Term term(const OneArgs& a, const int8_t* xq, const Bytes& k, int64_t b,
                              int t) {
    const XUnit x = x_unit(a, xq, b * kGroup + t, false);
    int ca = 0, cb = 0;  // the unit's two 16-value sub-blocks
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t lo = (k.ql[i] >> (4 * (t / 2))) & 0x0f0f0f0fu;
      const uint32_t hi = ((k.qh[i] >> (2 * t)) & 0x03030303u) << 4;
      const int w = static_cast<int>(mmq::minus32(lo | hi));
      if (i < 4) {
        ca = __dp4a(w, x.q[i], ca);
      } else {
        cb = __dp4a(w, x.q[i], cb);
      }
    }
    const uint32_t sc = t < 2 ? k.sc[0] : k.sc[1];  // scales 2 t and 2 t + 1
    const int sum =
        group_sum<kGroup>(byte_s(sc, (2 * t) % 4) * ca + byte_s(sc, (2 * t + 1) % 4) * cb);
    return {x.d, __fmul_rn(k.d, big_float(sum))};  // d_x: the super-block's
  }
};

// --- Q4_0 and Q8_0: lane j of the group takes block b0 + j of a step -------
// A block is one unit, 2-byte aligned: read as 16-bit halves (the group's
// eight blocks one contiguous run of the row).
template <quant::TensorType T>
struct Legacy {
  using Mma = mmq::Legacy<T>;
  static constexpr bool kQ4 = T == quant::TensorType::Q4_0;
  static constexpr int kGroup = 8;
  static constexpr int kStepBlocks = 8;
  static constexpr int kTerms = 8;            // lane j's term is block b0 + j's
  static constexpr int kWords = kQ4 ? 4 : 8;  // qs words
  struct Bytes {
    uint32_t q[kWords];
    float d;
  };
  __device__ static void load(const uint8_t* row, int64_t b0, int64_t b_end, int j, Bytes& k) {
    const int64_t b = b0 + j < b_end ? b0 + j : b_end - 1;  // past the slice: read, never added
    const uint8_t* p = row + b * Mma::kBytes;
    k.d = mmq::half_at(p);
#pragma unroll
    for (int i = 0; i < kWords; ++i) k.q[i] = mmq::u32_2aligned(p + 2 + 4 * i);
  }
  __device__ static Term term(const OneArgs& a, const int8_t* xq, const Bytes& k, int64_t b0,
                              int j) {
    const int64_t u = b0 + j < a.n_units ? b0 + j : a.n_units - 1;
    const XUnit x = x_unit(a, xq, u, false);
    int c = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (kQ4) {  // values i: low nibbles of qs[0..15], 16 + i: high nibbles
        c = __dp4a(static_cast<int>(mmq::minus8(k.q[i] & 0x0f0f0f0fu)), x.q[i], c);
        c = __dp4a(static_cast<int>(mmq::minus8((k.q[i] >> 4) & 0x0f0f0f0fu)), x.q[4 + i], c);
      } else {
        c = __dp4a(static_cast<int>(k.q[i]), x.q[i], c);
        c = __dp4a(static_cast<int>(k.q[4 + i]), x.q[4 + i], c);
      }
    }
    return {__fmul_rn(k.d, x.d), exact_float(c)};
  }
};

template <quant::TensorType T>
struct OneFormatOf;
template <>
struct OneFormatOf<quant::TensorType::Q4_0> {
  using F = Legacy<quant::TensorType::Q4_0>;
};
template <>
struct OneFormatOf<quant::TensorType::Q8_0> {
  using F = Legacy<quant::TensorType::Q8_0>;
};
template <>
struct OneFormatOf<quant::TensorType::Q4_K> {
  using F = KQuant4<false>;
};
template <>
struct OneFormatOf<quant::TensorType::Q5_K> {
  using F = KQuant4<true>;
};
template <>
struct OneFormatOf<quant::TensorType::Q6_K> {
  using F = Q6K;
};

constexpr int kOneWarps = 8;  // warps a block

// Groups a block: 256 / G; (row, slice) pairs in order, a row's S slices in
// consecutive groups of the same block (S divides the group count).
template <quant::TensorType T>
__host__ __device__ constexpr int groups_per_block() {
  return kOneWarps * 32 / OneFormatOf<T>::F::kGroup;
}

// Each segment as its own launch of the kernel would compute it. kPrologue:
// the segments' token comes in f32 (OneArgs::in, the same for every
// segment) and each block quantizes it into its dynamic shared memory
// (q8_activation_bytes(in_dim)) once its first weight loads are issued, so
// that their latency hides behind the quantizing.
template <quant::TensorType T, bool kPrologue>
__global__ void __launch_bounds__(kOneWarps * 32)
    one_token_kernel(const __grid_constant__ mmq::Segments<OneArgs> segs) {
  static_assert(kOneWarps * 32 == q8act::kQuantThreads, "the quantizer's block size");
  unsigned bx = blockIdx.x;
  const OneArgs& a = segs.pick(bx);
  const int8_t* xq = a.xq;
  using F = typename OneFormatOf<T>::F;
  constexpr int G = F::kGroup;
  constexpr int kGroups = groups_per_block<T>();
  __shared__ float part[kGroups];
  const int lane = threadIdx.x & 31, j = lane % G;
  const int gi = threadIdx.x / G;  // the group in the block
  const unsigned mask = ((1u << G) - 1u) << (lane - j);
  const int S = a.slices;
  const int64_t row = static_cast<int64_t>(bx) * (kGroups / S) + gi / S;
  const int s = gi % S;
  const int64_t per = (a.n_blocks + S - 1) / S;
  const int64_t b_begin = s * per < a.n_blocks ? s * per : a.n_blocks;
  const int64_t b_end = b_begin + per < a.n_blocks ? b_begin + per : a.n_blocks;
  const uint8_t* w = a.w + (row < a.rows ? row : a.rows - 1) * a.row_bytes;
  float acc = 0.0f;
  typename F::Bytes cur;
  constexpr int kStep = F::kStepBlocks;
  // A PDL launch (pdl.cuh): the first weights are asked for while the
  // kernel before it finishes; nothing it wrote is read before pdl_wait.
  pdl_launch_dependents();
  if (b_begin < b_end) F::load(w, b_begin, b_end, j, cur);
  pdl_wait();
  if constexpr (kPrologue) {  // the first weights are in flight meanwhile
    extern __shared__ int4 one_smem[];
    auto* base = reinterpret_cast<int8_t*>(one_smem);
    q8act::quantize_activation(a.in, q8act::q8_at(base, a.in.in_dim));  // ends in a barrier
    xq = base;
  }
  for (int64_t b = b_begin; b < b_end; b += kStep) {
    typename F::Bytes next;
    if (b + kStep < b_end) F::load(w, b + kStep, b_end, j, next);  // in flight meanwhile
    const Term t = F::term(a, xq, cur, b, j);
    if constexpr (F::kTerms == 1) {  // the block's term, the same on every lane
      acc = __fmaf_rn(t.a, t.b, acc);
    } else {
      // The step's blocks in order, as mmq_kernel adds them (the slice's
      // last step may hold fewer than G blocks).
      const int n = b + G <= b_end ? G : static_cast<int>(b_end - b);
#pragma unroll
      for (int k = 0; k < F::kTerms; ++k) {
        const int src = (lane - j) + k;
        const float ta = __shfl_sync(mask, t.a, src), tb = __shfl_sync(mask, t.b, src);
        if (k < n) acc = __fmaf_rn(ta, tb, acc);
      }
    }
    cur = next;
  }
  if (j == 0) part[gi] = acc;
  __syncthreads();
  if (j != 0 || s != 0 || row >= a.rows) return;  // past the only barrier
  float v = acc;                                  // slices in order, as mmq.cu's finish adds them
  for (int t = 1; t < S; ++t) v = __fadd_rn(v, part[gi + t]);
  if (a.bias != nullptr) v = __fadd_rn(v, a.bias[row]);
  if (a.residual != nullptr) v = __fadd_rn(v, a.residual[row]);
  a.y[row] = v;  // y may alias residual
}

}  // namespace minfer::cuda::mmq_one
