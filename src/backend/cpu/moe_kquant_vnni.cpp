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
using vnni_x::XBlock;

constexpr int kRows = 4;  // weight rows per pass sharing the activation loads

struct Consts {
  vnni_x::Q4KConsts q4;
  vnni_x::Q6KConsts q6;
};

MINFER_VNNI_INLINE Consts make_consts() {
  return {vnni_x::make_q4k_consts(), vnni_x::make_q6k_consts()};
}

using RowAcc = vnni_x::Q4KRow;  // Q6_K rows use acc only

// One super-block of one Q4_K row.
MINFER_VNNI_INLINE void q4k_block(const uint8_t* pb, const XBlock& x, const Consts& k,
                                  RowAcc& row) {
  vnni_x::q4k_block(pb, x, k.q4, row);
}

// One super-block of one Q6_K row.
MINFER_VNNI_INLINE void q6k_block(const uint8_t* pb, const XBlock& x, const Consts& k,
                                  RowAcc& row) {
  row.acc = vnni_x::q6k_block(pb, x, k.q6, row.acc);
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
