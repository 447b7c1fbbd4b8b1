// AVX-512 VNNI single-token GEMV behind backend/cpu/matmul_gemv_vnni.h.
// Every function that uses AVX-512 carries the target attribute, so this file
// is compiled for the baseline ISA and nothing here runs unless
// vnni_gemm_available() found the instructions.
#include "backend/cpu/matmul_gemv_vnni.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/vnni_x_block.h"
#include "quant/blocks.h"

namespace minfer::cpu {
namespace {

using quant::kQK_K;
using quant::TensorType;

using vnni_x::kXBlock;
using vnni_x::kXPairSums;
using vnni_x::kXQuants;
using vnni_x::kXSums;

}  // namespace

size_t vnni_gemv_x_bytes(int64_t row_len) {
  return static_cast<size_t>(row_len / kQK_K) * kXBlock;
}

void vnni_gemv_prepare_x(TensorType weight, const uint8_t* q8k_row, int64_t row_len, uint8_t* out) {
  for (int64_t i = 0; i < row_len / kQK_K; ++i, out += kXBlock) {
    quant::BlockQ8_K b;
    std::memcpy(&b, q8k_row + i * static_cast<int64_t>(sizeof(b)), sizeof(b));
    std::memset(out, 0, kXQuants);
    std::memcpy(out, &b.d, sizeof(b.d));
    int16_t pairs[8];
    for (int j = 0; j < 8; ++j) {
      pairs[j] = static_cast<int16_t>(b.bsums[2 * j] + b.bsums[2 * j + 1]);
    }
    std::memcpy(out + kXPairSums, pairs, sizeof(pairs));
    std::memcpy(out + kXSums, b.bsums, sizeof(b.bsums));
    uint8_t* q = out + kXQuants;
    if (weight != TensorType::Q4_K) {
      std::memcpy(q, b.qs, kQK_K);
      continue;
    }
    // Q4_K: byte l of a 64-byte group of packed quants holds, in its low
    // nibble, element l (l < 32) or 64 + l - 32, and in its high nibble
    // element 32 + l or 96 + l - 32 of the group's 128 elements; the quants
    // go to [0..31, 64..95] then [32..63, 96..127], per 128 elements.
    for (int c = 0; c < 2; ++c) {
      const int8_t* src = b.qs + 128 * c;
      std::memcpy(q + 128 * c, src, 32);
      std::memcpy(q + 128 * c + 32, src + 64, 32);
      std::memcpy(q + 128 * c + 64, src + 32, 32);
      std::memcpy(q + 128 * c + 96, src + 96, 32);
    }
  }
}

}  // namespace minfer::cpu

#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/vnni_target.h"

namespace minfer::cpu {
namespace {

using vnni_x::load_x;
using vnni_x::pick_bytes;
using vnni_x::pick_words;
using vnni_x::q4k_scales_mins;
using vnni_x::XBlock;

constexpr int kGroup = 4;  // rows per pass sharing the activation loads

struct Q4KRow {
  __m512 acc;
  __m128 acc_min;
};

struct Q4KConsts {
  __m512i pick[4];
  __m512i low4;
};

// One super-block of one Q4_K row.
MINFER_VNNI_INLINE void q4k_block(const uint8_t* pb, const XBlock& x, const Q4KConsts& k,
                                  Q4KRow& row) {
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
                            _mm512_shuffle_epi8(sm4, k.pick[c]));
  }
  const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(head), _mm_set1_ps(x.d));  // d * d_x, dmin * d_x
  row.acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_broadcastss_ps(dd), row.acc);
  const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), x.pairs);
  row.acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_shuffle_ps(dd, dd, 0x55), row.acc_min);
}

struct Q6KConsts {
  __m512i pick[4];
  __m512i low4;
  __m512i bits45;
};

// One super-block of one Q6_K row; returns the row's f32 lanes plus it.
MINFER_VNNI_INLINE __m512 q6k_block(const uint8_t* pb, const XBlock& x, const Q6KConsts& k,
                                    __m512 acc) {
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
                            _mm512_permutexvar_epi16(k.pick[2 * h], scz));
    s = _mm512_dpwssd_epi32(s, _mm512_dpbusd_epi32(z, hi, x.q[2 * h + 1]),
                            _mm512_permutexvar_epi16(k.pick[2 * h + 1], scz));
  }
  // The -32 offset: 32 * sum over sub-blocks of scale * bsum.
  const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, x.sums), 5);
  s = _mm512_sub_epi32(s, _mm512_zextsi256_si512(off));
  uint16_t dh;
  std::memcpy(&dh, pb + offsetof(quant::BlockQ6_K, d), sizeof(dh));
  const float d = _cvtsh_ss(dh) * x.d;
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(d), acc);
}

// Prefetches bytes [begin, end) of each of `n` rows starting at `row`.
MINFER_VNNI_INLINE void prefetch_rows(const uint8_t* row, size_t stride, int n, size_t begin,
                                      size_t end) {
  for (int r = 0; r < n; ++r) {
    for (size_t off = begin & ~size_t{63}; off < end; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(row + r * stride + off), _MM_HINT_T0);
    }
  }
}

// R rows from r0: each super-block's activations are loaded once for all R,
// and the next pass's rows (up to kGroup, within the matrix) are prefetched
// at the rate these are read.
template <int R, bool kQ6>
MINFER_VNNI void rows_pass(const GemmProblem& p, int64_t r0) {
  const size_t bb = kQ6 ? sizeof(quant::BlockQ6_K) : sizeof(quant::BlockQ4_K);
  const int64_t nsb = p.row_len / kQK_K;
  const uint8_t* w0 = p.w + static_cast<size_t>(r0) * p.w_stride;
  const int next = static_cast<int>(std::clamp<int64_t>(p.ldy - r0 - R, 0, kGroup));
  const uint8_t* w_next = w0 + R * p.w_stride;
  Q4KConsts k4;
  Q6KConsts k6;
  for (int c = 0; c < 4; ++c) {
    k4.pick[c] = pick_bytes((c & 1) + 4 * (c >> 1), (c & 1) + 4 * (c >> 1) + 2);
    k6.pick[c] = pick_words(4 * c);
  }
  k4.low4 = k6.low4 = _mm512_set1_epi8(0x0f);
  k6.bits45 = _mm512_set1_epi8(0x30);
  Q4KRow rows4[R];
  __m512 acc6[R];
  for (int r = 0; r < R; ++r) {
    acc6[r] = rows4[r].acc = _mm512_setzero_ps();
    rows4[r].acc_min = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < nsb; ++b) {
    prefetch_rows(w_next, p.w_stride, next, b * bb, (b + 1) * bb);
    const XBlock x = load_x(p.x + b * kXBlock);
    for (int r = 0; r < R; ++r) {
      const uint8_t* pb = w0 + r * p.w_stride + b * bb;
      if constexpr (kQ6) {
        acc6[r] = q6k_block(pb, x, k6, acc6[r]);
      } else {
        q4k_block(pb, x, k4, rows4[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    if constexpr (kQ6) {
      p.y[r0 + r] = _mm512_reduce_add_ps(acc6[r]);
    } else {
      const __m128 m = rows4[r].acc_min;
      const __m128 m2 = _mm_add_ps(m, _mm_movehl_ps(m, m));
      p.y[r0 + r] =
          _mm512_reduce_add_ps(rows4[r].acc) - _mm_cvtss_f32(_mm_add_ss(m2, _mm_movehdup_ps(m2)));
    }
  }
}

template <bool kQ6>
MINFER_VNNI void gemv_rows(const GemmProblem& p, int64_t r_begin, int64_t r_end) {
  int64_t r = r_begin;
  for (; r + kGroup <= r_end; r += kGroup) rows_pass<kGroup, kQ6>(p, r);
  switch (r_end - r) {
    case 3:
      rows_pass<3, kQ6>(p, r);
      break;
    case 2:
      rows_pass<2, kQ6>(p, r);
      break;
    case 1:
      rows_pass<1, kQ6>(p, r);
      break;
    default:
      break;
  }
}

}  // namespace

bool vnni_gemv_type(TensorType weight) {
  return weight == TensorType::Q4_K || weight == TensorType::Q6_K;
}

void vnni_gemv(TensorType weight, const GemmProblem& p, int64_t r_begin, int64_t r_end) {
  if (weight == TensorType::Q6_K) {
    gemv_rows<true>(p, r_begin, r_end);
  } else {
    gemv_rows<false>(p, r_begin, r_end);
  }
}

}  // namespace minfer::cpu

#else  // !defined(__x86_64__)

namespace minfer::cpu {

bool vnni_gemv_type(TensorType) {
  return false;
}

void vnni_gemv(TensorType, const GemmProblem&, int64_t, int64_t) {}

}  // namespace minfer::cpu

#endif
