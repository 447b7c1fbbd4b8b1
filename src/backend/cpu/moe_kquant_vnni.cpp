// AVX-512 VNNI Q4_K/Q6_K expert tiles behind backend/cpu/moe_kquant_vnni.h.
// Every function that uses AVX-512 carries the target attribute, so the file
// builds for the baseline ISA and nothing here runs unless
// vnni_gemm_available().
#include "backend/cpu/moe_kquant_vnni.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/moe_prefetch.h"
#include "backend/cpu/vnni_target.h"
#include "backend/cpu/vnni_x_block.h"
#include "quant/blocks.h"

namespace minfer::cpu {
namespace {

using quant::kQK_K;

using vnni_x::kXBlock;
using vnni_x::load_x;
using vnni_x::pick_bytes;
using vnni_x::pick_words;
using vnni_x::q4k_scales_mins;
using vnni_x::XBlock;

constexpr int kRows = 4;  // weight rows per pass sharing the activation loads

struct Consts {
  __m512i pick4[4];  // Q4_K: the scale of each chunk's i32 lanes
  __m512i pick6[4];  // Q6_K: the same as vpermw indices
  __m512i low4;
  __m512i bits45;
};

MINFER_VNNI_INLINE Consts make_consts() {
  Consts k;
  for (int c = 0; c < 4; ++c) {
    k.pick4[c] = pick_bytes((c & 1) + 4 * (c >> 1), (c & 1) + 4 * (c >> 1) + 2);
    k.pick6[c] = pick_words(4 * c);
  }
  k.low4 = _mm512_set1_epi8(0x0f);
  k.bits45 = _mm512_set1_epi8(0x30);
  return k;
}

// A row's f32 lanes; Q4_K also keeps its minimums' 4 lanes apart.
struct RowAcc {
  __m512 acc;
  __m128 acc_min;
};

// One super-block of one Q4_K row.
MINFER_VNNI_INLINE void q4k_block(const uint8_t* pb, const XBlock& x, const Consts& k,
                                  RowAcc& row) {
  const __m128i head = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb));
  const __m128i sm = q4k_scales_mins(head);
  const __m512i sm4 = _mm512_broadcast_i32x4(sm);
  const __m512i q0 = _mm512_loadu_si512(pb + 16);
  const __m512i q1 = _mm512_loadu_si512(pb + 80);
  const __m512i z = _mm512_setzero_si512();
  const __m512i q[4] = {
      _mm512_and_si512(q0, k.low4), _mm512_and_si512(_mm512_srli_epi16(q0, 4), k.low4),
      _mm512_and_si512(q1, k.low4), _mm512_and_si512(_mm512_srli_epi16(q1, 4), k.low4)};
  __m512i s = z;
  for (int c = 0; c < 4; ++c) {
    s = _mm512_dpwssd_epi32(s, _mm512_dpbusd_epi32(z, q[c], x.q[c]),
                            _mm512_shuffle_epi8(sm4, k.pick4[c]));
  }
  const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(head), _mm_set1_ps(x.d));  // d * d_x, dmin * d_x
  row.acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_broadcastss_ps(dd), row.acc);
  const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), x.pairs);
  row.acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_shuffle_ps(dd, dd, 0x55), row.acc_min);
}

// One super-block of one Q6_K row.
MINFER_VNNI_INLINE void q6k_block(const uint8_t* pb, const XBlock& x, const Consts& k,
                                  RowAcc& row) {
  const __m256i sc16 = _mm256_cvtepi8_epi16(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + offsetof(quant::BlockQ6_K, scales))));
  const __m512i scz = _mm512_zextsi256_si512(sc16);  // words 16..31 are zero
  const __m512i z = _mm512_setzero_si512();
  __m512i s = z;
  for (int h = 0; h < 2; ++h) {  // halves of 128 elements
    const __m512i ql = _mm512_loadu_si512(pb + 64 * h);
    const __m256i qh = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(pb + offsetof(quant::BlockQ6_K, qh) + 32 * h));
    // Bytes 0..31 for elements r and 64 + r, bytes 32..63 for 32 + r, 96 + r.
    const __m512i qhz = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
    const __m512i lo = _mm512_or_si512(_mm512_and_si512(ql, k.low4),
                                       _mm512_and_si512(_mm512_slli_epi16(qhz, 4), k.bits45));
    const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), k.low4),
                                       _mm512_and_si512(qhz, k.bits45));
    s = _mm512_dpwssd_epi32(s, _mm512_dpbusd_epi32(z, lo, x.q[2 * h]),
                            _mm512_permutexvar_epi16(k.pick6[2 * h], scz));
    s = _mm512_dpwssd_epi32(s, _mm512_dpbusd_epi32(z, hi, x.q[2 * h + 1]),
                            _mm512_permutexvar_epi16(k.pick6[2 * h + 1], scz));
  }
  // The -32 offset: 32 * sum over sub-blocks of scale * bsum.
  const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, x.sums), 5);
  s = _mm512_sub_epi32(s, _mm512_zextsi256_si512(off));
  uint16_t dh;
  std::memcpy(&dh, pb + offsetof(quant::BlockQ6_K, d), sizeof(dh));
  const float d = _cvtsh_ss(dh) * x.d;
  row.acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(d), row.acc);
}

// The sum of v's two 256-bit halves.
MINFER_VNNI_INLINE __m256 half(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v),
                       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// Sums of four rows' 16 lanes: [sum a, sum b, sum c, sum d].
MINFER_VNNI_INLINE __m128 reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m256 ab = _mm256_hadd_ps(half(a), half(b));
  const __m256 cd = _mm256_hadd_ps(half(c), half(d));
  const __m256 abcd = _mm256_hadd_ps(ab, cd);
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// Sums of four rows' 4 lanes.
MINFER_VNNI_INLINE __m128 reduce4(__m128 a, __m128 b, __m128 c, __m128 d) {
  return _mm_hadd_ps(_mm_hadd_ps(a, b), _mm_hadd_ps(c, d));
}

MINFER_VNNI_INLINE float reduce1(const RowAcc& r, bool q6) {
  float v = _mm512_reduce_add_ps(r.acc);
  if (!q6) {
    const __m128 m = r.acc_min;
    const __m128 m2 = _mm_add_ps(m, _mm_movehl_ps(m, m));
    v -= _mm_cvtss_f32(_mm_add_ss(m2, _mm_movehdup_ps(m2)));
  }
  return v;
}

// R rows from r0 against every token, the tokens one after another.
template <int R, bool kQ6>
MINFER_VNNI void rows_pass(const KQuantExpertTile& p, const Consts& k, int64_t r0,
                           ExpertPrefetch& pf) {
  const size_t bb = kQ6 ? sizeof(quant::BlockQ6_K) : sizeof(quant::BlockQ4_K);
  const int64_t nsb = p.row_len / kQK_K;
  const uint8_t* w0 = p.w + static_cast<size_t>(r0) * p.w_stride;
  const auto base = reinterpret_cast<uintptr_t>(w0);
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    const uint8_t* xt = p.x[t];
    RowAcc rows[R];
    for (int r = 0; r < R; ++r) {
      rows[r].acc = _mm512_setzero_ps();
      rows[r].acc_min = _mm_setzero_ps();
    }
    for (int64_t b = 0; b < nsb; ++b) {
      if (t == 0) pf.upto(base + static_cast<size_t>(b + 1) * R * bb);
      const XBlock x = load_x(xt + b * kXBlock);
      for (int r = 0; r < R; ++r) {
        const uint8_t* pb = w0 + r * p.w_stride + b * bb;
        if constexpr (kQ6) {
          q6k_block(pb, x, k, rows[r]);
        } else {
          q4k_block(pb, x, k, rows[r]);
        }
      }
    }
    float* out = p.out[t] + r0;
    if constexpr (R == kRows) {
      __m128 v = reduce4(rows[0].acc, rows[1].acc, rows[2].acc, rows[3].acc);
      if constexpr (!kQ6) {
        v = _mm_sub_ps(v,
                       reduce4(rows[0].acc_min, rows[1].acc_min, rows[2].acc_min, rows[3].acc_min));
      }
      _mm_storeu_ps(out, v);
    } else {
      for (int r = 0; r < R; ++r) out[r] = reduce1(rows[r], kQ6);
    }
  }
}

template <bool kQ6>
MINFER_VNNI void tile_rows(const KQuantExpertTile& p, int64_t r_begin, int64_t r_end) {
  const Consts k = make_consts();
  ExpertPrefetch pf = ExpertPrefetch::start(p.w + static_cast<size_t>(r_begin) * p.w_stride,
                                            p.w + static_cast<size_t>(p.rows) * p.w_stride);
  int64_t r = r_begin;
  for (; r + kRows <= r_end; r += kRows) {
    rows_pass<kRows, kQ6>(p, k, r, pf);
  }
  switch (r_end - r) {
    case 3:
      rows_pass<3, kQ6>(p, k, r, pf);
      break;
    case 2:
      rows_pass<2, kQ6>(p, k, r, pf);
      break;
    case 1:
      rows_pass<1, kQ6>(p, k, r, pf);
      break;
    default:
      break;
  }
}

}  // namespace

void kquant_expert_tile(const KQuantExpertTile& p, int64_t r_begin, int64_t r_end) {
  if (p.type == quant::TensorType::Q6_K) {
    tile_rows<true>(p, r_begin, r_end);
  } else {
    tile_rows<false>(p, r_begin, r_end);
  }
}

}  // namespace minfer::cpu

#else  // !defined(__x86_64__)

namespace minfer::cpu {

void kquant_expert_tile(const KQuantExpertTile&, int64_t, int64_t) {}

}  // namespace minfer::cpu

#endif
