// AVX2 tile kernels behind backend/cpu/matmul_gemm.h. Every function carries
// the target attribute (as in vec_dot_avx2.cpp), so nothing here runs on a
// CPU without AVX2; gemm_kernel() checks the CPU first.
#include "backend/cpu/matmul_gemm.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cpu/vec_dot.h"
#include "quant/blocks.h"
#include "quant/kquant_layout.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define MINFER_AVX2 __attribute__((target("avx2,fma,f16c")))
#define MINFER_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace minfer::cpu {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ4_K;
using quant::BlockQ5_0;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::BlockQ8_K;

MINFER_AVX2_INLINE float hsum_ps(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

MINFER_AVX2_INLINE float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

MINFER_AVX2_INLINE __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

MINFER_AVX2_INLINE __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(lo, 4), lo);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

MINFER_AVX2_INLINE __m256i expand_bits(uint32_t bits) {
  const __m256i v = _mm256_set1_epi32(static_cast<int>(bits));
  const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i mask = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i bytes = _mm256_and_si256(_mm256_shuffle_epi8(v, pick), mask);
  return _mm256_cmpeq_epi8(bytes, mask);
}

// ---- 32-element formats against Q8_0: a block unpacks to 32 signed bytes
// and an f32 scale; the integer sum uses the sign trick of the dot kernels.

struct Q0Weight {
  __m256i q;  // signed quants
  __m256 d;   // the block scale in every lane
};

// A token's Q8_0 block, prepared once per tile and shared by the tile's rows:
// maddubs needs an unsigned operand, so |y| goes there and y's sign moves
// onto the weight quants (|y| <= 127 keeps the pair sums unsaturated).
struct Q0Token {
  __m256i y;
  __m256i ay;
  __m256 d;
};

struct Q0Format {
  static constexpr size_t kXBlock = sizeof(BlockQ8_0);
  static constexpr int64_t kBlockElems = quant::kQK;
  // 4 x 3: 12 accumulators; 3 x 4, 2 x 6 and 4 x 4 measured the same or up
  // to 5% slower (docs/PERFORMANCE.md).
  static constexpr int kRows = 4, kTokens = 3;
};

struct Q4_0Format : Q0Format {
  static constexpr size_t kWBlock = sizeof(BlockQ4_0);
  MINFER_AVX2_INLINE static __m256i quants(const uint8_t* pw) {
    return _mm256_sub_epi8(unpack_nibbles(pw + 2), _mm256_set1_epi8(8));
  }
};

struct Q5_0Format : Q0Format {
  static constexpr size_t kWBlock = sizeof(BlockQ5_0);
  MINFER_AVX2_INLINE static __m256i quants(const uint8_t* pw) {
    uint32_t qh;
    std::memcpy(&qh, pw + 2, 4);
    const __m256i hi = _mm256_and_si256(expand_bits(qh), _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles(pw + 6), hi), _mm256_set1_epi8(16));
  }
};

struct Q8_0Format : Q0Format {
  static constexpr size_t kWBlock = sizeof(BlockQ8_0);
  MINFER_AVX2_INLINE static __m256i quants(const uint8_t* pw) { return load256(pw + 2); }
};

template <typename F>
struct Q0Kernel {
  using Weight = Q0Weight;
  using Token = Q0Token;
  static constexpr size_t kWBlock = F::kWBlock, kXBlock = F::kXBlock;
  static constexpr int64_t kBlockElems = F::kBlockElems;
  static constexpr int kRows = F::kRows, kTokens = F::kTokens;
  MINFER_AVX2_INLINE static void unpack(const uint8_t* pw, Weight& w) {
    w.q = F::quants(pw);
    w.d = _mm256_set1_ps(half_at(pw));
  }
  MINFER_AVX2_INLINE static void prepare(const uint8_t* px, Token& t) {
    t.y = load256(px + 2);
    t.ay = _mm256_sign_epi8(t.y, t.y);
    t.d = _mm256_set1_ps(half_at(px));
  }
  // acc += d_w * d_x * sum(q * y) over one block.
  MINFER_AVX2_INLINE static __m256 accumulate(const Weight& w, const Token& t, __m256 acc) {
    const __m256i p = _mm256_maddubs_epi16(t.ay, _mm256_sign_epi8(w.q, t.y));
    const __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
    return _mm256_fmadd_ps(_mm256_mul_ps(w.d, t.d), s, acc);
  }
};

// ---- K-quants against Q8_K: a 256-element super-block unpacks to eight
// 32-byte groups of unsigned quants plus 16-bit scale vectors.

struct KWeight {
  __m256i q[8];   // unsigned quants of elements 32k..32k+31
  __m256i sc[8];  // 16-bit scales matching q[k]'s maddubs pairs
  __m256i off;    // 16-bit multipliers of the Q8_K bsums (the min/offset term)
  float d;
  float dmin;  // Q4_K: the min scale; Q6_K: 32 (the offset), as a factor of d
};

struct Q4_KKernel {
  using Weight = KWeight;
  using Token = const uint8_t*;
  MINFER_AVX2_INLINE static void prepare(const uint8_t* px, Token& t) { t = px; }
  static constexpr size_t kWBlock = sizeof(BlockQ4_K), kXBlock = sizeof(BlockQ8_K);
  static constexpr int64_t kBlockElems = quant::kQK_K;
  static constexpr int kRows = 2, kTokens = 4;
  MINFER_AVX2_INLINE static void unpack(const uint8_t* pw, Weight& w) {
    const uint8_t* packed = pw + offsetof(BlockQ4_K, scales);
    alignas(32) int16_t mins[16];
    for (int j = 0; j < 8; ++j) {
      int scale, min;
      quant::detail::get_k4_scale_min(packed, j, &scale, &min);
      w.sc[j] = _mm256_set1_epi16(static_cast<int16_t>(scale));
      mins[2 * j] = mins[2 * j + 1] = static_cast<int16_t>(min);
    }
    w.off = _mm256_load_si256(reinterpret_cast<const __m256i*>(mins));
    const uint8_t* qs = pw + offsetof(BlockQ4_K, qs);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int j = 0; j < 4; ++j) {
      const __m256i q4 = load256(qs + 32 * j);
      w.q[2 * j] = _mm256_and_si256(q4, low4);
      w.q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4);
    }
    w.d = half_at(pw + offsetof(BlockQ4_K, d));
    w.dmin = half_at(pw + offsetof(BlockQ4_K, dmin));
  }
  // acc += d*yd * sum(sc * q * y) - dmin*yd * sum(min * bsum) over one super-block.
  MINFER_AVX2_INLINE static __m256 accumulate(const Weight& w, const uint8_t* px, __m256 acc) {
    const uint8_t* q8 = px + offsetof(BlockQ8_K, qs);
    __m256i sumi = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i p = _mm256_maddubs_epi16(w.q[k], load256(q8 + 32 * k));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, w.sc[k]));
    }
    const __m256i summ = _mm256_madd_epi16(load256(px + offsetof(BlockQ8_K, bsums)), w.off);
    float yd;
    std::memcpy(&yd, px + offsetof(BlockQ8_K, d), 4);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(w.d * yd), _mm256_cvtepi32_ps(sumi), acc);
    return _mm256_fnmadd_ps(_mm256_set1_ps(w.dmin * yd), _mm256_cvtepi32_ps(summ), acc);
  }
};

struct Q6_KKernel {
  using Weight = KWeight;
  using Token = const uint8_t*;
  MINFER_AVX2_INLINE static void prepare(const uint8_t* px, Token& t) { t = px; }
  static constexpr size_t kWBlock = sizeof(BlockQ6_K), kXBlock = sizeof(BlockQ8_K);
  static constexpr int64_t kBlockElems = quant::kQK_K;
  static constexpr int kRows = 2, kTokens = 4;
  MINFER_AVX2_INLINE static void unpack(const uint8_t* pw, Weight& w) {
    const auto* scales = reinterpret_cast<const int8_t*>(pw + offsetof(BlockQ6_K, scales));
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i two_bits = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {  // halves of 128 elements
      const __m256i ql0 = load256(pw + offsetof(BlockQ6_K, ql) + 64 * h);
      const __m256i ql1 = load256(pw + offsetof(BlockQ6_K, ql) + 64 * h + 32);
      const __m256i qh = load256(pw + offsetof(BlockQ6_K, qh) + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i ql = k % 2 == 0 ? ql0 : ql1;
        const __m256i lo =
            k < 2 ? _mm256_and_si256(ql, low4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), two_bits);
        w.q[4 * h + k] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
        const int j = 8 * h + 2 * k;
        w.sc[4 * h + k] =
            _mm256_set_m128i(_mm_set1_epi16(scales[j + 1]), _mm_set1_epi16(scales[j]));
      }
    }
    w.off = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
    w.d = half_at(pw + offsetof(BlockQ6_K, d));
  }
  // sum(sc * (q - 32) * y) = sum(sc * q * y) - 32 * sum(sc * bsum), exactly.
  MINFER_AVX2_INLINE static __m256 accumulate(const Weight& w, const uint8_t* px, __m256 acc) {
    const uint8_t* q8 = px + offsetof(BlockQ8_K, qs);
    __m256i sumi = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i p = _mm256_maddubs_epi16(w.q[k], load256(q8 + 32 * k));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, w.sc[k]));
    }
    const __m256i offset = _mm256_madd_epi16(load256(px + offsetof(BlockQ8_K, bsums)), w.off);
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 5));
    float yd;
    std::memcpy(&yd, px + offsetof(BlockQ8_K, d), 4);
    return _mm256_fmadd_ps(_mm256_set1_ps(w.d * yd), _mm256_cvtepi32_ps(sumi), acc);
  }
};

// One tile of RM weight rows x RN tokens: each weight block is unpacked once
// and dotted against the RN tokens' activation blocks.
template <typename K, int RM, int RN>
MINFER_AVX2 void tile(const GemmProblem& p, int64_t r0, int64_t t0) {
  __m256 acc[RM][RN];
  for (int i = 0; i < RM; ++i) {
    for (int j = 0; j < RN; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  const uint8_t* w0 = p.w + static_cast<size_t>(r0) * p.w_stride;
  const uint8_t* x0 = p.x + static_cast<size_t>(t0) * p.x_stride;
  const int64_t nb = p.row_len / K::kBlockElems;
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (RN == 1) {
      // Decode reads a tile's rows as RM interleaved streams, which the
      // hardware prefetcher does not follow from DRAM; fetch the next tile's
      // rows (contiguous when packed) at the rate this one is consumed.
      const uint8_t* next = w0 + RM * p.w_stride + b * RM * K::kWBlock;
      for (size_t off = 0; off < RM * K::kWBlock; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next + off), _MM_HINT_T0);
      }
    }
    typename K::Weight w[RM];
    for (int i = 0; i < RM; ++i) K::unpack(w0 + i * p.w_stride + b * K::kWBlock, w[i]);
    for (int j = 0; j < RN; ++j) {
      typename K::Token t;
      K::prepare(x0 + j * p.x_stride + b * K::kXBlock, t);
      for (int i = 0; i < RM; ++i) acc[i][j] = K::accumulate(w[i], t, acc[i][j]);
    }
  }
  for (int j = 0; j < RN; ++j) {
    for (int i = 0; i < RM; ++i) p.y[(t0 + j) * p.ldy + r0 + i] = hsum_ps(acc[i][j]);
  }
}

using TileFn = void (*)(const GemmProblem&, int64_t, int64_t);

template <typename K, int RM, int... RN>
constexpr std::array<TileFn, sizeof...(RN)> tile_row(std::integer_sequence<int, RN...>) {
  return {&tile<K, RM, RN + 1>...};
}

template <typename K, int... RM>
constexpr auto tile_table(std::integer_sequence<int, RM...>) {
  return std::array<std::array<TileFn, K::kTokens>, sizeof...(RM)>{
      tile_row<K, RM + 1>(std::make_integer_sequence<int, K::kTokens>())...};
}

// Covers the range with full tiles and smaller edge tiles. Row tiles are the
// outer loop, so a tile's weight rows stay in L1 while the tokens go by.
template <typename K>
MINFER_AVX2 void gemm(const GemmProblem& p, int64_t r_begin, int64_t r_end, int64_t t_begin,
                      int64_t t_end) {
  static constexpr auto kTable = tile_table<K>(std::make_integer_sequence<int, K::kRows>());
  for (int64_t r0 = r_begin; r0 < r_end; r0 += K::kRows) {
    const int64_t rm = std::min<int64_t>(K::kRows, r_end - r0);
    for (int64_t t0 = t_begin; t0 < t_end; t0 += K::kTokens) {
      const int64_t rn = std::min<int64_t>(K::kTokens, t_end - t0);
      kTable[static_cast<size_t>(rm - 1)][static_cast<size_t>(rn - 1)](p, r0, t0);
    }
  }
}

// Q4_0/Q5_0 for a batch: a task's weight rows are first widened to Q8_0
// blocks (the same signed quants and the same f16 scale, so the same integer
// sums and products) in a per-thread buffer, then run through the Q8_0 tiles.
// A row tile is otherwise unpacked again for every group of tokens (21 times
// for a 64-token task); widened once, it is only loaded.
template <typename F>
MINFER_AVX2 void gemm_widened(const GemmProblem& p, int64_t r_begin, int64_t r_end, int64_t t_begin,
                              int64_t t_end) {
  thread_local std::vector<uint8_t> rows;
  const int64_t nb = p.row_len / quant::kQK;
  const size_t row_bytes = static_cast<size_t>(nb) * sizeof(BlockQ8_0);
  rows.resize(static_cast<size_t>(r_end - r_begin) * row_bytes);
  for (int64_t r = r_begin; r < r_end; ++r) {
    const uint8_t* src = p.w + static_cast<size_t>(r) * p.w_stride;
    uint8_t* dst = rows.data() + static_cast<size_t>(r - r_begin) * row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* pw = src + b * F::kWBlock;
      uint8_t* pq = dst + b * sizeof(BlockQ8_0);
      std::memcpy(pq, pw, 2);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(pq + 2), F::quants(pw));
    }
  }
  GemmProblem wide = p;
  wide.w = rows.data() - static_cast<size_t>(r_begin) * row_bytes;
  wide.w_stride = row_bytes;
  gemm<Q0Kernel<Q8_0Format>>(wide, r_begin, r_end, t_begin, t_end);
}

}  // namespace

GemmKernel gemm_kernel(quant::TensorType weight, int64_t n_tokens) {
  if (!isa_supported(Isa::kAvx2) || n_tokens < 1) return nullptr;
  switch (weight) {
    case quant::TensorType::Q4_0:
      return n_tokens > 1 ? gemm_widened<Q4_0Format> : gemm<Q0Kernel<Q4_0Format>>;
    case quant::TensorType::Q5_0:
      return n_tokens > 1 ? gemm_widened<Q5_0Format> : gemm<Q0Kernel<Q5_0Format>>;
    case quant::TensorType::Q8_0:
      return gemm<Q0Kernel<Q8_0Format>>;
    case quant::TensorType::Q4_K:
      return n_tokens > 1 ? gemm<Q4_KKernel> : nullptr;
    case quant::TensorType::Q6_K:
      return n_tokens > 1 ? gemm<Q6_KKernel> : nullptr;
    default:
      return nullptr;
  }
}

}  // namespace minfer::cpu

#else  // not x86

namespace minfer::cpu {
GemmKernel gemm_kernel(quant::TensorType, int64_t) {
  return nullptr;
}
}  // namespace minfer::cpu

#endif
