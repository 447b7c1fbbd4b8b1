// The packed AVX2 matmul of backend/cpu/matmul_packed.h. Every kernel
// function carries the AVX2 target attribute; packable() checks the CPU.
#include "backend/cpu/matmul_packed.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "backend/cpu/vec_dot.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/kquant_layout.h"
#include "quant/reference.h"

namespace minfer::cpu {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ4_K;
using quant::BlockQ5_0;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::BlockQ8_K;
using quant::TensorType;

constexpr int64_t kGroup = 8;           // rows per group
constexpr int64_t kGroupsPerTask = 2;   // 16 rows, as matmul()'s tasks
constexpr int64_t kTokensPerTask = 64;  // a task's tokens share its rows in L1
constexpr size_t kScaleBytes = kGroup * sizeof(uint16_t);
// Q4_K: d[8] and dmin[8] (f16), the 6-bit scales as bytes [sub-block][row],
// the mins as bytes [sub-block pair][row][2].
constexpr size_t kKHeaderBytes = 2 * kScaleBytes + 64 + 64;
// Q6_K: d[8] (f16), the int8 scales as bytes [sub-block pair][row][2], then
// 16 triples of registers {high bits, nibbles, nibbles} (pack_q6_k).
constexpr size_t kQ6HeaderBytes = kScaleBytes + 128;
constexpr size_t kQ6TripleBytes = 3 * 32;

constexpr size_t group_block_bytes(TensorType t) {
  switch (t) {
    case TensorType::Q4_0:
      return kScaleBytes + 128;
    case TensorType::Q5_0:
      return kScaleBytes + 160;
    case TensorType::Q8_0:
      return kScaleBytes + 256;
    case TensorType::Q4_K:
      return kKHeaderBytes + 1024;
    case TensorType::Q6_K:
      return kQ6HeaderBytes + 16 * kQ6TripleBytes;
    default:
      return 0;
  }
}

constexpr bool k_quant(TensorType t) {
  return t == TensorType::Q4_K || t == TensorType::Q6_K;
}

// Elements per (group-)block: 32, or a K-quant's 256-element super-block.
constexpr int64_t block_elems(TensorType t) {
  return k_quant(t) ? quant::kQK_K : quant::kQK;
}

// The 4/5-bit quants enter unsigned: the activation block's sum times this
// is subtracted from the integer sum.
int32_t quant_offset(TensorType t) {
  return t == TensorType::Q4_0 ? 8 : t == TensorType::Q5_0 ? 16 : 0;
}

// One Q4_K group-superblock (layout above kKHeaderBytes; quants: sub-block
// pair j, register k, lane r = row r's qs[32j+4k..32j+4k+3]).
void pack_q4_k(const uint8_t* const* rows, int64_t n_rows, int64_t b, uint8_t* out) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* blk = reinterpret_cast<const BlockQ4_K*>(rows[r]) + b;
    std::memcpy(out + r * 2, &blk->d, 2);
    std::memcpy(out + kScaleBytes + r * 2, &blk->dmin, 2);
    uint8_t* sc = out + 2 * kScaleBytes;
    uint8_t* mins = sc + 64;
    for (int s = 0; s < 8; ++s) {
      int scale = 0, min = 0;
      quant::detail::get_k4_scale_min(blk->scales, s, &scale, &min);
      sc[s * 8 + r] = static_cast<uint8_t>(scale);
      mins[(s / 2) * 16 + r * 2 + s % 2] = static_cast<uint8_t>(min);
    }
    uint8_t* regs = out + kKHeaderBytes;
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 8; ++k) {
        std::memcpy(regs + (j * 8 + k) * 32 + r * 4, blk->qs + 32 * j + 4 * k, 4);
      }
    }
  }
}

// One Q6_K group-superblock. Sub-block pair j (elements 32j..32j+31) has
// nibble registers i = 0..3: lane r, byte b holds the low four bits of row
// r's element 32j + 4i + b (sub-block 2j) in its low nibble and of element
// 32j + 16 + 4i + b (sub-block 2j + 1) in its high nibble. Triple t = 2j + m
// (m = 0, 1) is {the high bits of nibble registers 2m and 2m + 1, those two
// registers}, in the order the kernel reads them (one stream): a high-bit
// byte holds the top two bits of the first register's low element (bits
// 0-1), its high element (2-3), the second's low (4-5) and high (6-7), so
// that shifts by 4, 2, 0 and -2 put each at bits 4-5.
void pack_q6_k(const uint8_t* const* rows, int64_t n_rows, int64_t b, uint8_t* out) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* blk = reinterpret_cast<const BlockQ6_K*>(rows[r]) + b;
    std::memcpy(out + r * 2, &blk->d, 2);
    uint8_t* sc = out + kScaleBytes;
    for (int s = 0; s < 16; ++s) {
      sc[(s / 2) * 16 + r * 2 + s % 2] = static_cast<uint8_t>(blk->scales[s]);
    }
    for (int e = 0; e < 256; ++e) {
      const int u = quant::detail::get_q6_low(blk->ql, e) | quant::detail::get_2bit(blk->qh, e)
                                                                << 4;
      const int j = e / 32, in_sub = e % 16, hi = (e % 32) / 16;  // hi: sub-block 2j + 1
      const int i = in_sub / 4, byte = in_sub % 4;
      uint8_t* triple = out + kQ6HeaderBytes + static_cast<size_t>(2 * j + i / 2) * kQ6TripleBytes;
      const size_t lane = static_cast<size_t>(r) * 4 + static_cast<size_t>(byte);
      triple[32 * (1 + i % 2) + lane] |= static_cast<uint8_t>((u & 0x0f) << (4 * hi));
      triple[lane] |= static_cast<uint8_t>((u >> 4) << (4 * (i % 2) + 2 * hi));
    }
  }
}

// One group-block from the eight (or fewer: the rest stay zero) source rows.
void pack_group_block(TensorType t, const uint8_t* const* rows, int64_t n_rows, int64_t b,
                      uint8_t* out) {
  std::memset(out, 0, group_block_bytes(t));
  if (t == TensorType::Q4_K) return pack_q4_k(rows, n_rows, b, out);
  if (t == TensorType::Q6_K) return pack_q6_k(rows, n_rows, b, out);
  for (int64_t r = 0; r < n_rows; ++r) {
    uint8_t* regs = out + kScaleBytes;
    const size_t lane = static_cast<size_t>(r) * 4;
    if (t == TensorType::Q8_0) {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(rows[r]) + b;
      std::memcpy(out + r * 2, &blk->d, 2);
      for (int c = 0; c < 8; ++c) std::memcpy(regs + c * 32 + lane, blk->qs + 4 * c, 4);
      continue;
    }
    const uint8_t* qs = nullptr;
    if (t == TensorType::Q4_0) {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(rows[r]) + b;
      std::memcpy(out + r * 2, &blk->d, 2);
      qs = blk->qs;
    } else {
      const auto* blk = reinterpret_cast<const BlockQ5_0*>(rows[r]) + b;
      std::memcpy(out + r * 2, &blk->d, 2);
      qs = blk->qs;
      uint32_t qh;
      std::memcpy(&qh, blk->qh, 4);
      uint8_t* hi = regs + 128 + lane;
      for (int e = 0; e < 32; ++e) {
        if ((qh >> e & 1u) != 0) hi[e % 4] |= static_cast<uint8_t>(1u << (e / 4));
      }
    }
    for (int m = 0; m < 4; ++m) std::memcpy(regs + m * 32 + lane, qs + 4 * m, 4);
  }
}

// What a tile needs of one token's activation block besides its quants.
struct TokenBlock {
  float d = 0;
  int32_t offset_sum = 0;  // quant_offset * sum of the block's quants
};

// A Q8_K super-block's scale and its eight 32-element sums.
struct KTokenBlock {
  float d = 0;
  int16_t sums[8] = {};
};

struct Acts {
  const uint8_t* q = nullptr;  // [n_tokens][nb] BlockQ8_0 (BlockQ8_K for K-quants)
  const TokenBlock* tb = nullptr;
  const KTokenBlock* ktb = nullptr;
  const uint8_t* abs = nullptr;  // [n_tokens][nb][32] |quants| (Q8_0 weights)
  int64_t nb = 0;
};

}  // namespace

bool packable(TensorType type) {
  return group_block_bytes(type) != 0 && isa_supported(Isa::kAvx2);
}

}  // namespace minfer::cpu

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define MINFER_AVX2 __attribute__((target("avx2,fma,f16c")))
#define MINFER_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace minfer::cpu {
namespace {

constexpr int kTileTokens = 4;  // tokens sharing one register load

MINFER_AVX2_INLINE __m256i bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

MINFER_AVX2_INLINE __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The fifth bits of chunk c (elements 4c..4c+3 of each row) as 0x10 per byte.
template <int C>
MINFER_AVX2_INLINE __m256i high_bits(__m256i h) {
  if constexpr (C < 4) h = _mm256_slli_epi32(h, 4 - C);
  if constexpr (C > 4) h = _mm256_srli_epi32(h, C - 4);
  return _mm256_and_si256(h, _mm256_set1_epi8(0x10));
}

// Register M of a Q4_0/Q5_0 group-block (elements 4M.. and 16+4M.. of each
// row, fifth bits added for Q5_0) against N tokens: int16 pair sums into
// lo (the low nibbles) and hi (the high ones).
template <TensorType T, int N, int M>
MINFER_AVX2_INLINE void nibble_chunk(const uint8_t* regs, __m256i h, const uint8_t* const* yq,
                                     __m256i* lo, __m256i* hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i v = load256(regs + 32 * M);
  __m256i ql = _mm256_and_si256(v, m4);
  __m256i qh = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  if constexpr (T == TensorType::Q5_0) {
    ql = _mm256_or_si256(ql, high_bits<M>(h));
    qh = _mm256_or_si256(qh, high_bits<M + 4>(h));
  }
  for (int j = 0; j < N; ++j) {
    lo[j] = _mm256_add_epi16(lo[j], _mm256_maddubs_epi16(ql, bcast32(yq[j] + 4 * M)));
    hi[j] = _mm256_add_epi16(hi[j], _mm256_maddubs_epi16(qh, bcast32(yq[j] + 16 + 4 * M)));
  }
}

// Eight rows' integer sums of one block against N tokens' blocks yq[j].
template <TensorType T, int N>
MINFER_AVX2_INLINE void block_sums(const uint8_t* regs, const uint8_t* const* yq,
                                   const uint8_t* const* ya, __m256i* s) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (T == TensorType::Q8_0) {
    for (int j = 0; j < N; ++j) s[j] = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      const __m256i w = load256(regs + 32 * c);
      for (int j = 0; j < N; ++j) {
        const __m256i p = _mm256_maddubs_epi16(bcast32(ya[j] + 4 * c),
                                               _mm256_sign_epi8(w, bcast32(yq[j] + 4 * c)));
        s[j] = _mm256_add_epi32(s[j], _mm256_madd_epi16(p, ones));
      }
    }
  } else {
    // Q4_0: 8 pair sums of at most 2*15*127 fit an int16 lane; Q5_0: 4 of
    // 2*31*127, so its low and high nibbles are summed apart.
    __m256i lo[N], hi[N];
    for (int j = 0; j < N; ++j) lo[j] = hi[j] = _mm256_setzero_si256();
    [[maybe_unused]] const __m256i h = T == TensorType::Q5_0 ? load256(regs + 128) : __m256i{};
    nibble_chunk<T, N, 0>(regs, h, yq, lo, hi);
    nibble_chunk<T, N, 1>(regs, h, yq, lo, hi);
    nibble_chunk<T, N, 2>(regs, h, yq, lo, hi);
    nibble_chunk<T, N, 3>(regs, h, yq, lo, hi);
    for (int j = 0; j < N; ++j) {
      s[j] = T == TensorType::Q4_0
                 ? _mm256_madd_epi16(_mm256_add_epi16(lo[j], hi[j]), ones)
                 : _mm256_add_epi32(_mm256_madd_epi16(lo[j], ones), _mm256_madd_epi16(hi[j], ones));
    }
  }
}

struct Problem {
  const PackedWeight* w = nullptr;
  Acts x;
  float* y = nullptr;
};

// Writes a tile's outputs: the group's rows (not its padding) of N tokens.
template <int N>
MINFER_AVX2_INLINE void store_tile(const Problem& p, int64_t g, int64_t t0, const __m256* acc) {
  const int64_t r0 = g * kGroup;
  const int64_t n_rows = std::min(kGroup, p.w->rows - r0);
  for (int j = 0; j < N; ++j) {
    float* out = p.y + (t0 + j) * p.w->rows + r0;
    if (n_rows == kGroup) {
      _mm256_storeu_ps(out, acc[j]);
    } else {
      alignas(32) float tmp[kGroup];
      _mm256_store_ps(tmp, acc[j]);
      std::memcpy(out, tmp, static_cast<size_t>(n_rows) * sizeof(float));
    }
  }
}

// Eight rows' byte scales, each in both int16 halves of its row's lane.
MINFER_AVX2_INLINE __m256i lane_scales(const uint8_t* p) {
  const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(x, _mm256_slli_epi32(x, 16));
}

// Q4_K: one super-block of 8 rows against N tokens; s gets each row's
// sum over sub-blocks of scale * dot, m its sum of min * block sum.
template <int N>
MINFER_AVX2_INLINE void q4_k_sums(const uint8_t* blk, const uint8_t* const* yq,
                                  const KTokenBlock* const* tb, __m256i* s, __m256i* m) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const uint8_t* sc = blk + 2 * kScaleBytes;
  const uint8_t* mins = sc + 64;
  const uint8_t* regs = blk + kKHeaderBytes;
  for (int j = 0; j < N; ++j) s[j] = m[j] = _mm256_setzero_si256();
  for (int jp = 0; jp < 4; ++jp) {
    // 8 pair sums of at most 2*15*127 per int16 lane.
    __m256i lo[N], hi[N];
    for (int j = 0; j < N; ++j) lo[j] = hi[j] = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i v = load256(regs + (jp * 8 + k) * 32);
      const __m256i ql = _mm256_and_si256(v, m4);
      const __m256i qh = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      for (int j = 0; j < N; ++j) {
        const uint8_t* y = yq[j] + 64 * jp + 4 * k;
        lo[j] = _mm256_add_epi16(lo[j], _mm256_maddubs_epi16(ql, bcast32(y)));
        hi[j] = _mm256_add_epi16(hi[j], _mm256_maddubs_epi16(qh, bcast32(y + 32)));
      }
    }
    const __m256i sc_lo = lane_scales(sc + (2 * jp) * 8);
    const __m256i sc_hi = lane_scales(sc + (2 * jp + 1) * 8);
    for (int j = 0; j < N; ++j) {
      s[j] = _mm256_add_epi32(
          s[j], _mm256_add_epi32(_mm256_madd_epi16(lo[j], sc_lo), _mm256_madd_epi16(hi[j], sc_hi)));
    }
  }
  for (int i = 0; i < 4; ++i) {
    const __m256i mp =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mins + 16 * i)));
    for (int j = 0; j < N; ++j)
      m[j] = _mm256_add_epi32(m[j], _mm256_madd_epi16(mp, bcast32(tb[j]->sums + 2 * i)));
  }
}

// Q4_K: adds one super-block of 8 rows to N tokens' accumulators; token j's
// block is tok0 + j * nb.
template <int N>
MINFER_AVX2_INLINE void q4_k_block(const Problem& p, const uint8_t* blk, int64_t tok0, int64_t nb,
                                   __m256* acc) {
  const uint8_t* yq[N];
  const KTokenBlock* tb[N];
  for (int j = 0; j < N; ++j) {
    const int64_t tok = tok0 + j * nb;
    yq[j] = p.x.q + static_cast<size_t>(tok) * sizeof(BlockQ8_K) + sizeof(float);
    tb[j] = p.x.ktb + tok;
  }
  __m256i s[N], m[N];
  q4_k_sums<N>(blk, yq, tb, s, m);
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
  const __m256 dmin =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kScaleBytes)));
  for (int j = 0; j < N; ++j) {
    const __m256 dx = _mm256_set1_ps(tb[j]->d);
    acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(s[j]), acc[j]);
    acc[j] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(m[j]), acc[j]);
  }
}

// Q6_K: one super-block of 8 rows against N tokens' Q8_K blocks xb[j]; s
// gets each row's sum over sub-blocks of scale * dot(q + 32, x), o its sum
// of scale * block sum (the caller subtracts 32 * o).
template <int N>
MINFER_AVX2_INLINE void q6_k_sums(const uint8_t* blk, const BlockQ8_K* const* xb, __m256i* s,
                                  __m256i* o) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m45 = _mm256_set1_epi8(0x30);
  const uint8_t* triples = blk + kQ6HeaderBytes;
  for (int j = 0; j < N; ++j) s[j] = o[j] = _mm256_setzero_si256();
  for (int jp = 0; jp < 8; ++jp) {
    // Scales of sub-blocks 2jp and 2jp + 1 as i16 pairs, lane = row.
    const __m256i sp = _mm256_cvtepi8_epi16(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kScaleBytes + 16 * jp)));
    const __m256i sc_a = _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(sp, 0xa0), 0xa0);
    const __m256i sc_b = _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(sp, 0xf5), 0xf5);
    for (int m = 0; m < 2; ++m) {
      // Two pair sums of at most 2*63*127 per int16 lane and sub-block.
      const uint8_t* t = triples + (2 * jp + m) * kQ6TripleBytes;
      const __m256i h = load256(t);
      const __m256i v0 = load256(t + 32);
      const __m256i v1 = load256(t + 64);
      const __m256i lo0 =
          _mm256_or_si256(_mm256_and_si256(v0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m45));
      const __m256i hi0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v0, 4), m4),
                                          _mm256_and_si256(_mm256_slli_epi16(h, 2), m45));
      const __m256i lo1 = _mm256_or_si256(_mm256_and_si256(v1, m4), _mm256_and_si256(h, m45));
      const __m256i hi1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v1, 4), m4),
                                          _mm256_and_si256(_mm256_srli_epi16(h, 2), m45));
      for (int j = 0; j < N; ++j) {
        const int8_t* y = xb[j]->qs + 32 * jp + 8 * m;
        const __m256i a = _mm256_add_epi16(_mm256_maddubs_epi16(lo0, bcast32(y)),
                                           _mm256_maddubs_epi16(lo1, bcast32(y + 4)));
        const __m256i b = _mm256_add_epi16(_mm256_maddubs_epi16(hi0, bcast32(y + 16)),
                                           _mm256_maddubs_epi16(hi1, bcast32(y + 20)));
        s[j] = _mm256_add_epi32(
            s[j], _mm256_add_epi32(_mm256_madd_epi16(a, sc_a), _mm256_madd_epi16(b, sc_b)));
      }
    }
    for (int j = 0; j < N; ++j)
      o[j] = _mm256_add_epi32(o[j], _mm256_madd_epi16(sp, bcast32(xb[j]->bsums + 2 * jp)));
  }
}

// Q6_K: adds one super-block of 8 rows to N tokens' accumulators; token j's
// block is tok0 + j * nb.
template <int N>
MINFER_AVX2_INLINE void q6_k_block(const Problem& p, const uint8_t* blk, int64_t tok0, int64_t nb,
                                   __m256* acc) {
  const BlockQ8_K* xb[N];
  for (int j = 0; j < N; ++j) {
    xb[j] = reinterpret_cast<const BlockQ8_K*>(p.x.q) + (tok0 + j * nb);
  }
  __m256i s[N], o[N];
  q6_k_sums<N>(blk, xb, s, o);
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
  for (int j = 0; j < N; ++j) {
    const __m256i sum = _mm256_sub_epi32(s[j], _mm256_slli_epi32(o[j], 5));
    acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(xb[j]->d)), _mm256_cvtepi32_ps(sum),
                             acc[j]);
  }
}

// Q4_0/Q5_0/Q8_0: the same for one 32-element block.
template <TensorType T, int N>
MINFER_AVX2_INLINE void q0_block(const Problem& p, const uint8_t* blk, int64_t tok0, int64_t nb,
                                 __m256* acc) {
  const uint8_t* yq[N];
  const uint8_t* ya[N];
  const TokenBlock* tb[N];
  for (int j = 0; j < N; ++j) {
    const int64_t tok = tok0 + j * nb;
    yq[j] = p.x.q + static_cast<size_t>(tok) * sizeof(BlockQ8_0) + 2;
    ya[j] = T == TensorType::Q8_0 ? p.x.abs + static_cast<size_t>(tok) * 32 : nullptr;
    tb[j] = p.x.tb + tok;
  }
  __m256i s[N];
  block_sums<T, N>(blk + kScaleBytes, yq, ya, s);
  const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
  for (int j = 0; j < N; ++j) {
    if constexpr (T != TensorType::Q8_0) {
      s[j] = _mm256_sub_epi32(s[j], _mm256_set1_epi32(tb[j]->offset_sum));
    }
    acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(tb[j]->d)), _mm256_cvtepi32_ps(s[j]),
                             acc[j]);
  }
}

// One group of 8 rows x N tokens from token t0, over every block.
template <TensorType T, int N>
MINFER_AVX2 void tile(const Problem& p, int64_t g, int64_t t0) {
  const size_t gb = group_block_bytes(T);
  const uint8_t* wg = p.w->data.data() + static_cast<size_t>(g) * p.w->group_bytes;
  const int64_t nb = p.x.nb;
  __m256 acc[N];
  for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * gb;
    if constexpr (T == TensorType::Q4_K) {
      q4_k_block<N>(p, blk, t0 * nb + b, nb, acc);
    } else if constexpr (T == TensorType::Q6_K) {
      q6_k_block<N>(p, blk, t0 * nb + b, nb, acc);
    } else {
      q0_block<T, N>(p, blk, t0 * nb + b, nb, acc);
    }
  }
  store_tile<N>(p, g, t0, acc);
}

template <TensorType T>
MINFER_AVX2 void run_range(const Problem& p, int64_t g_begin, int64_t g_end, int64_t t_begin,
                           int64_t t_end) {
  for (int64_t g = g_begin; g < g_end; ++g) {
    int64_t t = t_begin;
    for (; t + kTileTokens <= t_end; t += kTileTokens) tile<T, kTileTokens>(p, g, t);
    switch (t_end - t) {
      case 3:
        tile<T, 3>(p, g, t);
        break;
      case 2:
        tile<T, 2>(p, g, t);
        break;
      case 1:
        tile<T, 1>(p, g, t);
        break;
      default:
        break;
    }
  }
}

using RangeFn = void (*)(const Problem&, int64_t, int64_t, int64_t, int64_t);

RangeFn range_fn(TensorType t) {
  switch (t) {
    case TensorType::Q4_0:
      return run_range<TensorType::Q4_0>;
    case TensorType::Q5_0:
      return run_range<TensorType::Q5_0>;
    case TensorType::Q8_0:
      return run_range<TensorType::Q8_0>;
    case TensorType::Q4_K:
      return run_range<TensorType::Q4_K>;
    case TensorType::Q6_K:
      return run_range<TensorType::Q6_K>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace minfer::cpu

#else  // not x86: packable() is false, so nothing reaches the kernels

namespace minfer::cpu {
namespace {
struct Problem {
  const PackedWeight* w = nullptr;
  Acts x;
  float* y = nullptr;
};
using RangeFn = void (*)(const Problem&, int64_t, int64_t, int64_t, int64_t);
RangeFn range_fn(TensorType) {
  return nullptr;
}
}  // namespace
}  // namespace minfer::cpu

#endif

namespace minfer::cpu {
namespace {

std::string dims(const PackedWeight& p, int64_t n_tokens) {
  return std::string(quant::type_name(p.type)) + " [" + std::to_string(p.rows) + " x " +
         std::to_string(p.row_len) + "], " + std::to_string(n_tokens) + " tokens";
}

// Records the first token whose activations could not be quantized.
void note_bad(std::atomic<int64_t>& first_bad, int64_t t) {
  int64_t cur = first_bad.load();
  while (t < cur && !first_bad.compare_exchange_weak(cur, t)) {
  }
}

// Q8_0 activations with each block's scale and offset sum, and |quants|
// for Q8_0 weights.
void prepare_q8_0_row(const PackedWeight& p, const BlockQ8_0* q, TokenBlock* tb, uint8_t* abs,
                      int64_t nb) {
  const int32_t offset = quant_offset(p.type);
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sum = 0;
    for (int8_t v : q[b].qs) sum += v;
    tb[b] = {quant::f16_to_f32(q[b].d), offset * sum};
    if (abs != nullptr) {
      for (int e = 0; e < 32; ++e) abs[b * 32 + e] = static_cast<uint8_t>(std::abs(q[b].qs[e]));
    }
  }
}

// Q8_K activations with each super-block's scale and 32-element sums.
void prepare_q8_k_row(const BlockQ8_K* q, KTokenBlock* tb, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    tb[b].d = q[b].d;
    for (int s = 0; s < 8; ++s) {
      tb[b].sums[s] = static_cast<int16_t>(q[b].bsums[2 * s] + q[b].bsums[2 * s + 1]);
    }
  }
}

// Quantizes the activations (as matmul() does: Q8_0, or Q8_K for K-quants)
// into scratch, with what the tiles need of each block.
Status prepare_acts(const PackedWeight& p, const float* x, int64_t n_tokens, ThreadPool& pool,
                    std::vector<uint8_t>& scratch, Acts& acts) {
  const bool kq = k_quant(p.type);
  const TensorType xt = kq ? TensorType::Q8_K : TensorType::Q8_0;
  const int64_t nb = p.row_len / block_elems(p.type);
  const size_t xblock = kq ? sizeof(BlockQ8_K) : sizeof(BlockQ8_0);
  const size_t q_bytes = static_cast<size_t>(n_tokens * nb) * xblock;
  const size_t tb_bytes =
      static_cast<size_t>(n_tokens * nb) * (kq ? sizeof(KTokenBlock) : sizeof(TokenBlock));
  const bool want_abs = p.type == TensorType::Q8_0;
  const size_t abs_bytes = want_abs ? static_cast<size_t>(n_tokens * nb) * 32 : 0;
  const size_t tb_at = (q_bytes + 63) / 64 * 64;
  scratch.resize(tb_at + tb_bytes + abs_bytes);
  uint8_t* q = scratch.data();
  uint8_t* tb = scratch.data() + tb_at;
  uint8_t* abs = want_abs ? tb + tb_bytes : nullptr;
  std::atomic<int64_t> first_bad{n_tokens};
  pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      uint8_t* qt = q + static_cast<size_t>(t * nb) * xblock;
      if (!quant::quantize_row(xt, x + t * p.row_len, qt, p.row_len).is_ok()) {
        note_bad(first_bad, t);
      } else if (kq) {
        prepare_q8_k_row(reinterpret_cast<const BlockQ8_K*>(qt),
                         reinterpret_cast<KTokenBlock*>(tb) + t * nb, nb);
      } else {
        prepare_q8_0_row(p, reinterpret_cast<const BlockQ8_0*>(qt),
                         reinterpret_cast<TokenBlock*>(tb) + t * nb,
                         abs != nullptr ? abs + t * nb * 32 : nullptr, nb);
      }
    }
  });
  const int64_t bad = first_bad.load();
  if (bad < n_tokens) {
    std::vector<uint8_t> row(static_cast<size_t>(nb) * xblock);
    return quant::quantize_row(xt, x + bad * p.row_len, row.data(), p.row_len)
        .with_context("matmul " + dims(p, n_tokens) + ": activation row " + std::to_string(bad));
  }
  acts.q = q;
  acts.tb = kq ? nullptr : reinterpret_cast<const TokenBlock*>(tb);
  acts.ktb = kq ? reinterpret_cast<const KTokenBlock*>(tb) : nullptr;
  acts.abs = abs;
  acts.nb = nb;
  return Status::ok();
}

}  // namespace

Result<PackedWeight> pack_weight(const MatmulWeight& w, ThreadPool& pool) {
  if (!packable(w.type)) {
    return Status::invalid_argument(std::string("no packed matmul for ") +
                                    std::string(quant::type_name(w.type)) + " on this CPU");
  }
  if (w.rows <= 0 || w.row_len <= 0 || w.row_len % block_elems(w.type) != 0 || w.data == nullptr) {
    return Status::invalid_argument("cannot pack " + std::string(quant::type_name(w.type)) + " [" +
                                    std::to_string(w.rows) + " x " + std::to_string(w.row_len) +
                                    "]");
  }
  MINFER_ASSIGN_OR_RETURN(const size_t row_bytes, quant::row_bytes(w.type, w.row_len));
  const size_t stride = w.row_stride != 0 ? w.row_stride : row_bytes;
  if (stride < row_bytes) return Status::invalid_argument("row stride shorter than a row");
  PackedWeight p;
  p.type = w.type;
  p.rows = w.rows;
  p.row_len = w.row_len;
  const int64_t nb = w.row_len / block_elems(w.type);
  const size_t gb = group_block_bytes(w.type);
  p.group_bytes = gb * static_cast<size_t>(nb);
  const int64_t groups = (w.rows + kGroup - 1) / kGroup;
  p.data.resize(p.group_bytes * static_cast<size_t>(groups));
  const auto* src = static_cast<const uint8_t*>(w.data);
  pool.parallel_for(groups, [&](int64_t begin, int64_t end, int) {
    for (int64_t g = begin; g < end; ++g) {
      const uint8_t* rows[kGroup];
      const int64_t n_rows = std::min(kGroup, w.rows - g * kGroup);
      for (int64_t r = 0; r < n_rows; ++r)
        rows[r] = src + static_cast<size_t>(g * kGroup + r) * stride;
      uint8_t* out = p.data.data() + static_cast<size_t>(g) * p.group_bytes;
      for (int64_t b = 0; b < nb; ++b) pack_group_block(w.type, rows, n_rows, b, out + b * gb);
    }
  });
  return p;
}

Status packed_matmul(const PackedWeight& p, const float* x, int64_t n_tokens, float* y,
                     ThreadPool& pool, std::vector<uint8_t>& scratch) {
  const RangeFn run = range_fn(p.type);
  if (run == nullptr || !packable(p.type)) {
    return Status::internal("packed matmul " + dims(p, n_tokens) + ": not available on this CPU");
  }
  if (n_tokens < 0) return Status::internal("packed matmul: negative token count");
  if (n_tokens == 0) return Status::ok();
  if (x == nullptr || y == nullptr) return Status::internal("packed matmul: null buffer");
  Problem prob;
  prob.w = &p;
  prob.y = y;
  MINFER_RETURN_IF_ERROR(prepare_acts(p, x, n_tokens, pool, scratch, prob.x));
  const int64_t groups = (p.rows + kGroup - 1) / kGroup;
  const int64_t g_blocks = (groups + kGroupsPerTask - 1) / kGroupsPerTask;
  const int64_t t_blocks = (n_tokens + kTokensPerTask - 1) / kTokensPerTask;
  pool.parallel_for(g_blocks * t_blocks, [&](int64_t begin, int64_t end, int) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t g0 = (task / t_blocks) * kGroupsPerTask;
      const int64_t t0 = (task % t_blocks) * kTokensPerTask;
      run(prob, g0, std::min(groups, g0 + kGroupsPerTask), t0,
          std::min(n_tokens, t0 + kTokensPerTask));
    }
  });
  return Status::ok();
}

}  // namespace minfer::cpu
