// AVX-512 VNNI tile kernels behind backend/cpu/matmul_gemm_vnni.h. Every
// function that uses AVX-512 carries the target attribute, so this file is
// compiled for the baseline ISA and nothing here runs unless
// vnni_gemm_available() found the instructions.
#include "backend/cpu/matmul_gemm_vnni.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_options.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/kquant_layout.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

#include "backend/cpu/vnni_target.h"

namespace minfer::cpu {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ5_0;
using quant::BlockQ8_0;
using quant::TensorType;

constexpr int kRows = 16;   // weight rows per repacked group (one zmm of i32 lanes)
constexpr int kTokens = 8;  // tokens per tile (8 i32 + 8 f32 accumulators)
constexpr size_t kPackBlock = kRows * 4 + 8 * 64;  // 16 scales + 8 groups of 64 quants
constexpr size_t kXBlock = 8 + quant::kQK;         // d, -c*sum, 32 quants

bool cpu_has_avx512_vnni() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!(osxsave && fma && f16c)) return false;
  // The OS must save the opmask and all 512-bit registers (XCR0 bits 1,2,5,6,7).
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xe6u) != 0xe6u) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
  const bool vnni = c & (1u << 11);
  return f && dq && bw && vl && vnni;
}

// The unsigned offset c of each type's repacked quants: q_w + c >= 0.
int weight_offset(TensorType weight) {
  switch (weight) {
    case TensorType::Q4_0:
      return 8;
    case TensorType::Q5_0:
      return 16;
    default:  // Q8_0
      return 128;
  }
}

MINFER_VNNI_INLINE __m512 half16(__m512i lanes) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(lanes));
}

// ---- Repacking one group of up to 16 rows: lane r of every gather reads
// row r (index r * w_stride); lanes past `valid` read nothing and stay 0.

struct Gather {
  __m512i idx;
  __mmask16 valid;
  MINFER_VNNI_INLINE __m512i at(const uint8_t* p) const {
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, idx, p, 1);
  }
};

MINFER_VNNI void repack_q8_0(const uint8_t* w0, const Gather& g, int64_t nb, uint8_t* out) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b, out += kPackBlock) {
    const uint8_t* pb = w0 + b * sizeof(BlockQ8_0);
    _mm512_store_ps(out, half16(g.at(pb)));
    for (int k = 0; k < 8; ++k) {
      const __m512i q = _mm512_xor_si512(g.at(pb + 2 + 4 * k), flip);
      _mm512_store_si512(out + 64 + 64 * k, q);
    }
  }
}

MINFER_VNNI void repack_q4_0(const uint8_t* w0, const Gather& g, int64_t nb, uint8_t* out) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < nb; ++b, out += kPackBlock) {
    const uint8_t* pb = w0 + b * sizeof(BlockQ4_0);
    _mm512_store_ps(out, half16(g.at(pb)));
    for (int k = 0; k < 4; ++k) {
      // Bytes 4k..4k+3 hold elements 4k.. (low nibbles) and 16+4k.. (high).
      const __m512i q = g.at(pb + 2 + 4 * k);
      _mm512_store_si512(out + 64 + 64 * k, _mm512_and_si512(q, low4));
      _mm512_store_si512(out + 64 + 64 * (k + 4), _mm512_and_si512(_mm512_srli_epi16(q, 4), low4));
    }
  }
}

MINFER_VNNI void repack_q5_0(const uint8_t* w0, const Gather& g, int64_t nb, uint8_t* out) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i spread = _mm512_set1_epi32(0x00204081);  // bit i -> bit 8i (i < 4)
  const __m512i ones = _mm512_set1_epi32(0x01010101);
  for (int64_t b = 0; b < nb; ++b, out += kPackBlock) {
    const uint8_t* pb = w0 + b * sizeof(BlockQ5_0);
    _mm512_store_ps(out, half16(g.at(pb)));
    const __m512i qh = g.at(pb + 2);
    for (int k = 0; k < 8; ++k) {
      // Elements 4k..4k+3: their fifth bits are qh bits 4k..4k+3.
      const __m512i nib = _mm512_and_si512(_mm512_srli_epi32(qh, 4 * k), _mm512_set1_epi32(15));
      const __m512i hi =
          _mm512_slli_epi32(_mm512_and_si512(_mm512_mullo_epi32(nib, spread), ones), 4);
      const __m512i q = g.at(pb + 6 + 4 * (k % 4));
      const __m512i lo =
          k < 4 ? _mm512_and_si512(q, low4) : _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
      _mm512_store_si512(out + 64 + 64 * k, _mm512_or_si512(lo, hi));
    }
  }
}

// ---- The tile: 16 repacked rows x N tokens.

MINFER_VNNI_INLINE int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <int N>
MINFER_VNNI void tile(const uint8_t* pack, int64_t nb, const uint8_t* x0, size_t x_stride, float* y,
                      int64_t ldy, __mmask16 valid) {
  __m512 acc[N];
  for (int t = 0; t < N; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pw = pack + b * kPackBlock;
    const uint8_t* px = x0 + b * kXBlock;
    __m512i sum[N];
    // Start from -c * sum(q_x): the offset's contribution, taken out exactly.
    for (int t = 0; t < N; ++t) sum[t] = _mm512_set1_epi32(load_i32(px + t * x_stride + 4));
    for (int k = 0; k < 8; ++k) {
      const __m512i w = _mm512_load_si512(pw + 64 + 64 * k);
      for (int t = 0; t < N; ++t) {
        const __m512i xk = _mm512_set1_epi32(load_i32(px + t * x_stride + 8 + 4 * k));
        sum[t] = _mm512_dpbusd_epi32(sum[t], w, xk);
      }
    }
    const __m512 dw = _mm512_load_ps(pw);
    for (int t = 0; t < N; ++t) {
      float dx;
      std::memcpy(&dx, px + t * x_stride, 4);
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(dx));
      acc[t] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(sum[t]), acc[t]);
    }
  }
  for (int t = 0; t < N; ++t) _mm512_mask_storeu_ps(y + t * ldy, valid, acc[t]);
}

using TileFn = void (*)(const uint8_t*, int64_t, const uint8_t*, size_t, float*, int64_t,
                        __mmask16);

template <int... N>
constexpr std::array<TileFn, sizeof...(N)> tile_table(std::integer_sequence<int, N...>) {
  return {&tile<N + 1>...};
}

// ---- K-quants against Q8_K rows (used as they are). A super-block of 16
// repacked rows: f32 d and dmin (Q4_K) lanes, per sub-block i32 scales, i32
// lanes of 16-bit pairs for the bsums term (vpdpwssd), then the quants as
// unsigned bytes in 4-element groups, sub-block by sub-block.

struct KLayout {
  int subs;    // sub-blocks per super-block
  int groups;  // 4-element groups per sub-block
  int pairs;   // 16-bit pair lanes of the bsums term
  size_t bytes() const { return 128 + 64 * static_cast<size_t>(subs + pairs + subs * groups); }
  size_t scales() const { return 128; }
  size_t pair_lanes() const { return 128 + 64 * static_cast<size_t>(subs); }
  size_t quants() const { return 128 + 64 * static_cast<size_t>(subs + pairs); }
};
constexpr KLayout kQ4K{8, 8, 8};
constexpr KLayout kQ6K{16, 4, 8};

// Q4_K and Q5_K (their headers are laid out alike; Q5_K's fifth bit of
// element e is bit e / 32 of qh[e % 32]).
template <typename Block>
MINFER_VNNI void repack_k4(const uint8_t* w0, size_t w_stride, const Gather& g, int rows,
                           int64_t nsb, uint8_t* out) {
  constexpr bool kQ5 = std::is_same_v<Block, quant::BlockQ5_K>;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  [[maybe_unused]] const __m512i one = _mm512_set1_epi8(1);
  for (int64_t b = 0; b < nsb; ++b, out += kQ4K.bytes()) {
    const uint8_t* pb = w0 + b * sizeof(Block);
    const __m512i dd = g.at(pb);  // d | dmin << 16
    _mm512_store_ps(out, half16(dd));
    _mm512_store_ps(out + 64, half16(_mm512_srli_epi32(dd, 16)));
    auto* sc = reinterpret_cast<int32_t*>(out + kQ4K.scales());
    auto* mp = reinterpret_cast<int32_t*>(out + kQ4K.pair_lanes());
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* packed = pb + r * w_stride + offsetof(Block, scales);
      for (int j = 0; j < 8; ++j) {
        int scale = 0, min = 0;
        if (r < rows) quant::detail::get_k4_scale_min(packed, j, &scale, &min);
        sc[j * kRows + r] = scale;
        mp[j * kRows + r] = min | (min << 16);  // (min, min) . (bsums[2j], bsums[2j+1])
      }
    }
    uint8_t* q = out + kQ4K.quants();
    for (int c = 0; c < 4; ++c) {  // sub-blocks 2c (low nibbles) and 2c+1 (high)
      for (int k = 0; k < 8; ++k) {
        const __m512i v = g.at(pb + offsetof(Block, qs) + 32 * c + 4 * k);
        __m512i lo = _mm512_and_si512(v, low4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        if constexpr (kQ5) {
          // Elements 64c + 4k + i and 64c + 32 + 4k + i: bits 2c and 2c + 1 of qh[4k + i].
          const __m512i h = g.at(pb + offsetof(quant::BlockQ5_K, qh) + 4 * k);
          lo = _mm512_or_si512(
              lo, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * c), one), 4));
          hi = _mm512_or_si512(
              hi, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * c + 1), one), 4));
        }
        _mm512_store_si512(q + 64 * (16 * c + k), lo);
        _mm512_store_si512(q + 64 * (16 * c + 8 + k), hi);
      }
    }
  }
}

MINFER_VNNI void repack_q6_k(const uint8_t* w0, size_t w_stride, const Gather& g, int rows,
                             int64_t nsb, uint8_t* out) {
  const __m512i low4 = _mm512_set1_epi8(0x0f), two = _mm512_set1_epi8(3);
  for (int64_t b = 0; b < nsb; ++b, out += kQ6K.bytes()) {
    const uint8_t* pb = w0 + b * sizeof(quant::BlockQ6_K);
    // d is the block's last 2 bytes: gather the dword ending there.
    _mm512_store_ps(out,
                    half16(_mm512_srli_epi32(g.at(pb + offsetof(quant::BlockQ6_K, d) - 2), 16)));
    auto* sc = reinterpret_cast<int32_t*>(out + kQ6K.scales());
    auto* sp = reinterpret_cast<int32_t*>(out + kQ6K.pair_lanes());
    for (int r = 0; r < kRows; ++r) {
      const auto* scales =
          reinterpret_cast<const int8_t*>(pb + r * w_stride + offsetof(quant::BlockQ6_K, scales));
      for (int i = 0; i < 16; ++i) sc[i * kRows + r] = r < rows ? scales[i] : 0;
      for (int i = 0; i < 8; ++i) {
        const int lo = r < rows ? scales[2 * i] : 0, hi = r < rows ? scales[2 * i + 1] : 0;
        sp[i * kRows + r] = static_cast<int32_t>(
            static_cast<uint16_t>(lo) | (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
      }
    }
    uint8_t* q = out + kQ6K.quants();
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; l += 4) {
        const __m512i qh = g.at(pb + offsetof(quant::BlockQ6_K, qh) + 32 * h + l);
        for (int half = 0; half < 2; ++half) {
          const __m512i ql = g.at(pb + offsetof(quant::BlockQ6_K, ql) + 64 * h + 32 * half + l);
          for (int hi_nib = 0; hi_nib < 2; ++hi_nib) {
            const int k = half + 2 * hi_nib;  // element 128h + 32k + l
            const __m512i lo = hi_nib == 0 ? _mm512_and_si512(ql, low4)
                                           : _mm512_and_si512(_mm512_srli_epi16(ql, 4), low4);
            const __m512i top = _mm512_and_si512(_mm512_srli_epi16(qh, 2 * k), two);
            const int e =
                128 * h + 32 * k + l;  // group e / 4 = sub-block e / 16, group (e % 16) / 4
            _mm512_store_si512(q + 64 * (e / 4), _mm512_or_si512(lo, _mm512_slli_epi16(top, 4)));
          }
        }
      }
    }
  }
}

// 16 repacked rows x N tokens of Q8_K. Per sub-block: the unsigned block sum
// by vpdpbusd, times the row's scale (vpmulld); the bsums term by vpdpwssd.
template <bool kQ6, int N>
MINFER_VNNI void tile_k(const uint8_t* pack, int64_t nsb, const uint8_t* x0, size_t x_stride,
                        float* y, int64_t ldy, __mmask16 valid) {
  constexpr KLayout L = kQ6 ? kQ6K : kQ4K;
  __m512 acc[N];
  for (int t = 0; t < N; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* pw = pack + b * L.bytes();
    const uint8_t* px = x0 + b * sizeof(quant::BlockQ8_K);
    const uint8_t* qx = px + offsetof(quant::BlockQ8_K, qs);
    const uint8_t* bs = px + offsetof(quant::BlockQ8_K, bsums);
    __m512i tot[N], off[N];
    for (int t = 0; t < N; ++t) tot[t] = off[t] = _mm512_setzero_si512();
    for (int i = 0; i < L.subs; ++i) {
      __m512i s[N];
      for (int t = 0; t < N; ++t) s[t] = _mm512_setzero_si512();
      for (int k = 0; k < L.groups; ++k) {
        const __m512i w = _mm512_load_si512(pw + L.quants() + 64 * (i * L.groups + k));
        for (int t = 0; t < N; ++t) {
          const int e = 4 * (i * L.groups + k);
          s[t] = _mm512_dpbusd_epi32(s[t], w, _mm512_set1_epi32(load_i32(qx + t * x_stride + e)));
        }
      }
      const __m512i sc = _mm512_load_si512(pw + L.scales() + 64 * i);
      for (int t = 0; t < N; ++t) tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(s[t], sc));
    }
    for (int i = 0; i < L.pairs; ++i) {
      const __m512i m = _mm512_load_si512(pw + L.pair_lanes() + 64 * i);
      for (int t = 0; t < N; ++t) {
        off[t] =
            _mm512_dpwssd_epi32(off[t], m, _mm512_set1_epi32(load_i32(bs + t * x_stride + 4 * i)));
      }
    }
    const __m512 d = _mm512_load_ps(pw);
    for (int t = 0; t < N; ++t) {
      float yd;
      std::memcpy(&yd, px + t * x_stride, 4);
      const __m512 vyd = _mm512_set1_ps(yd);
      if constexpr (kQ6) {
        // sum(sc * (q - 32) * y) = sum(sc * q * y) - 32 * sum(sc * bsum).
        const __m512i sum = _mm512_sub_epi32(tot[t], _mm512_slli_epi32(off[t], 5));
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, vyd), _mm512_cvtepi32_ps(sum), acc[t]);
      } else {
        const __m512 dmin = _mm512_load_ps(pw + 64);
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, vyd), _mm512_cvtepi32_ps(tot[t]), acc[t]);
        acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, vyd), _mm512_cvtepi32_ps(off[t]), acc[t]);
      }
    }
  }
  for (int t = 0; t < N; ++t) _mm512_mask_storeu_ps(y + t * ldy, valid, acc[t]);
}

constexpr int kKTokens = 4;

template <bool kQ6, int... N>
constexpr std::array<TileFn, sizeof...(N)> tile_k_table(std::integer_sequence<int, N...>) {
  return {&tile_k<kQ6, N + 1>...};
}

MINFER_VNNI void gemm_range_k(TensorType weight, const GemmProblem& p, int64_t r_begin,
                              int64_t r_end, int64_t t_begin, int64_t t_end) {
  static constexpr auto kTable4 = tile_k_table<false>(std::make_integer_sequence<int, kKTokens>());
  static constexpr auto kTable6 = tile_k_table<true>(std::make_integer_sequence<int, kKTokens>());
  const bool q6 = weight == TensorType::Q6_K;
  const KLayout layout = q6 ? kQ6K : kQ4K;
  const int64_t nsb = p.row_len / quant::kQK_K;
  thread_local std::vector<uint8_t> buffer;
  buffer.resize(static_cast<size_t>(nsb) * layout.bytes() + 64);
  uint8_t* pack = buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;
  Gather g;
  g.idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(p.w_stride)));
  for (int64_t r0 = r_begin; r0 < r_end; r0 += kRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kRows, r_end - r0));
    g.valid = static_cast<__mmask16>((1u << rows) - 1);
    const uint8_t* w0 = p.w + static_cast<size_t>(r0) * p.w_stride;
    if (q6) {
      repack_q6_k(w0, p.w_stride, g, rows, nsb, pack);
    } else if (weight == TensorType::Q5_K) {
      repack_k4<quant::BlockQ5_K>(w0, p.w_stride, g, rows, nsb, pack);
    } else {
      repack_k4<quant::BlockQ4_K>(w0, p.w_stride, g, rows, nsb, pack);
    }
    const auto& table = q6 ? kTable6 : kTable4;
    for (int64_t t0 = t_begin; t0 < t_end; t0 += kKTokens) {
      const int64_t n = std::min<int64_t>(kKTokens, t_end - t0);
      table[static_cast<size_t>(n - 1)](pack, nsb, p.x + static_cast<size_t>(t0) * p.x_stride,
                                        p.x_stride, p.y + t0 * p.ldy + r0, p.ldy, g.valid);
    }
  }
}

MINFER_VNNI void gemm_range(TensorType weight, const GemmProblem& p, int64_t r_begin, int64_t r_end,
                            int64_t t_begin, int64_t t_end) {
  static constexpr auto kTable = tile_table(std::make_integer_sequence<int, kTokens>());
  const int64_t nb = p.row_len / quant::kQK;
  thread_local std::vector<uint8_t> buffer;
  buffer.resize(static_cast<size_t>(nb) * kPackBlock + 64);
  uint8_t* pack = buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;
  Gather g;
  g.idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(p.w_stride)));
  for (int64_t r0 = r_begin; r0 < r_end; r0 += kRows) {
    const int64_t rows = std::min<int64_t>(kRows, r_end - r0);
    g.valid = static_cast<__mmask16>((1u << rows) - 1);
    const uint8_t* w0 = p.w + static_cast<size_t>(r0) * p.w_stride;
    switch (weight) {
      case TensorType::Q4_0:
        repack_q4_0(w0, g, nb, pack);
        break;
      case TensorType::Q5_0:
        repack_q5_0(w0, g, nb, pack);
        break;
      default:
        repack_q8_0(w0, g, nb, pack);
        break;
    }
    for (int64_t t0 = t_begin; t0 < t_end; t0 += kTokens) {
      const int64_t n = std::min<int64_t>(kTokens, t_end - t0);
      kTable[static_cast<size_t>(n - 1)](pack, nb, p.x + static_cast<size_t>(t0) * p.x_stride,
                                         p.x_stride, p.y + t0 * p.ldy + r0, p.ldy, g.valid);
    }
  }
}

MINFER_VNNI void prepare_x(int offset, const uint8_t* q8_row, int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b, out += kXBlock) {
    const uint8_t* pb = q8_row + b * sizeof(BlockQ8_0);
    uint16_t h;
    std::memcpy(&h, pb, 2);
    const float d = _cvtsh_ss(h);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 2));
    // sum(q): widen to 16 bits, pair-add to 32, reduce.
    const __m512i q16 = _mm512_cvtepi8_epi16(q);
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_madd_epi16(q16, _mm512_set1_epi16(1)));
    const int32_t bias = -offset * sum;
    std::memcpy(out, &d, 4);
    std::memcpy(out + 4, &bias, 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), q);
  }
}

// quant::quantize_row's Q8_0 (ggml's quantize_row_q8_0_ref) written into the
// prepared layout, operation for operation: d = amax / 127, id = 1 / d,
// q = roundf(x * id) (half away from zero: trunc, then the exact fraction
// decides), the f16 d. False if the row has a NaN or infinity.
MINFER_VNNI bool quantize_x(int offset, const float* x, int64_t nb, uint8_t* out) {
  const __m512 sign_bit = _mm512_set1_ps(-0.0f);
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  const __m512 lim = _mm512_set1_ps(127.0f);
  for (int64_t b = 0; b < nb; ++b, x += quant::kQK, out += kXBlock) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    // QNaN, +inf, -inf, SNaN.
    if ((_mm512_fpclass_ps_mask(v0, 0x99) | _mm512_fpclass_ps_mask(v1, 0x99)) != 0) return false;
    const float amax = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_andnot_ps(sign_bit, v0), _mm512_andnot_ps(sign_bit, v1)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t d16 = quant::f32_to_f16(d);
    const __m512 vid = _mm512_set1_ps(id);
    __m512i q[2];
    for (int h = 0; h < 2; ++h) {
      const __m512 v = _mm512_mul_ps(h == 0 ? v0 : v1, vid);
      const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m512 frac = _mm512_andnot_ps(sign_bit, _mm512_sub_ps(v, t));
      const __m512 away = _mm512_or_ps(one, _mm512_and_ps(sign_bit, v));  // +-1 with v's sign
      const __mmask16 up = _mm512_cmp_ps_mask(frac, half, _CMP_GE_OQ);
      __m512 r = _mm512_mask_add_ps(t, up, t, away);
      r = _mm512_min_ps(_mm512_max_ps(r, _mm512_sub_ps(_mm512_setzero_ps(), lim)), lim);
      q[h] = _mm512_cvtps_epi32(r);
    }
    const __m256i q8 = _mm256_set_m128i(_mm512_cvtepi32_epi8(q[1]), _mm512_cvtepi32_epi8(q[0]));
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
    const int32_t bias = -offset * sum;
    const float dq = _cvtsh_ss(d16);
    std::memcpy(out, &dq, 4);
    std::memcpy(out + 4, &bias, 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), q8);
  }
  return true;
}

}  // namespace

bool vnni_gemm_available() {
  static const bool available = [] {
    return !process_section<CpuOptions>().cpu_no_avx512 && cpu_has_avx512_vnni();
  }();
  return available;
}

bool vnni_gemm_type(TensorType weight) {
  return weight == TensorType::Q4_0 || weight == TensorType::Q5_0 || weight == TensorType::Q8_0 ||
         weight == TensorType::Q4_K || weight == TensorType::Q5_K || weight == TensorType::Q6_K;
}

size_t vnni_x_row_bytes(int64_t row_len) {
  return static_cast<size_t>(row_len / quant::kQK) * kXBlock;
}

void vnni_prepare_x(TensorType weight, const uint8_t* q8_row, int64_t row_len, uint8_t* out) {
  prepare_x(weight_offset(weight), q8_row, row_len / quant::kQK, out);
}

bool vnni_quantize_x(TensorType weight, const float* x, int64_t row_len, uint8_t* out) {
  return quantize_x(weight_offset(weight), x, row_len / quant::kQK, out);
}

void vnni_gemm(TensorType weight, const GemmProblem& p, int64_t r_begin, int64_t r_end,
               int64_t t_begin, int64_t t_end) {
  if (weight == TensorType::Q4_K || weight == TensorType::Q5_K || weight == TensorType::Q6_K) {
    gemm_range_k(weight, p, r_begin, r_end, t_begin, t_end);
  } else {
    gemm_range(weight, p, r_begin, r_end, t_begin, t_end);
  }
}

}  // namespace minfer::cpu

#else  // not x86-64

namespace minfer::cpu {
bool vnni_gemm_available() {
  return false;
}
bool vnni_gemm_type(quant::TensorType) {
  return false;
}
size_t vnni_x_row_bytes(int64_t) {
  return 0;
}
void vnni_prepare_x(quant::TensorType, const uint8_t*, int64_t, uint8_t*) {}
bool vnni_quantize_x(quant::TensorType, const float*, int64_t, uint8_t*) {
  return false;
}
void vnni_gemm(quant::TensorType, const GemmProblem&, int64_t, int64_t, int64_t, int64_t) {}
}  // namespace minfer::cpu

#endif
