// AVX-512 VNNI single-token GEMV behind backend/cpu/matmul_gemv_vnni.h.
// Every function that uses AVX-512 carries the target attribute, so this file
// is compiled for the baseline ISA and nothing here runs unless
// vnni_gemm_available() found the instructions.
#include "backend/cpu/matmul_gemv_vnni.h"

#include <algorithm>
#include <cstring>

#include "quant/blocks.h"

namespace minfer::cpu {
namespace {

using quant::kQK_K;
using quant::TensorType;

// The prepared activation super-block (see the header).
constexpr size_t kXBlock = 320;
constexpr size_t kXPairSums = 16;
constexpr size_t kXSums = 32;
constexpr size_t kXQuants = 64;

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

constexpr int kGroup = 4;  // rows per pass sharing the activation loads

// One super-block of activations, loaded once per pass.
struct XBlock {
  __m512i q[4];   // 64 quants each, in the weight type's order
  __m128i pairs;  // 8 i16 sums of 32 quants
  __m256i sums;   // 16 i16 sums of 16 quants (the Q8_K bsums)
  float d;
};

MINFER_VNNI_INLINE XBlock load_x(const uint8_t* xb) {
  XBlock x;
  for (int k = 0; k < 4; ++k) x.q[k] = _mm512_loadu_si512(xb + kXQuants + 64 * k);
  x.pairs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + kXPairSums));
  x.sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + kXSums));
  std::memcpy(&x.d, xb, sizeof(float));
  return x;
}

// i32 lanes 0-7 pick byte a of each 128-bit lane zero-extended, lanes 8-15
// byte b (a vpshufb control; 0xff bytes give zero).
MINFER_VNNI_INLINE __m512i pick_bytes(int a, int b) {
  const int ia = static_cast<int>(0xffffff00u | static_cast<unsigned>(a));
  const int ib = static_cast<int>(0xffffff00u | static_cast<unsigned>(b));
  return _mm512_set_epi32(ib, ib, ib, ib, ib, ib, ib, ib, ia, ia, ia, ia, ia, ia, ia, ia);
}

// i32 lane l picks word base + l / 4 in its low half and word 16 (zero) in
// its high half (a vpermw index).
MINFER_VNNI_INLINE __m512i pick_words(int base) {
  alignas(64) int32_t idx[16];
  for (int l = 0; l < 16; ++l) idx[l] = (16 << 16) | (base + l / 4);
  return _mm512_load_si512(idx);
}

// Q4_K's first 16 bytes {d, dmin, 12 packed scale bytes s} -> bytes
// [scale 0..7, min 0..7]: j < 4 take the low 6 bits of s[j] and s[j + 4];
// j >= 4 take a nibble of s[j + 4] and the top 2 bits of s[j - 4] / s[j].
MINFER_VNNI_INLINE __m128i q4k_scales_mins(__m128i head) {
  const __m128i x = _mm_shuffle_epi8(
      head, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15));
  const __m128i y = _mm_shuffle_epi8(
      head, _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11));
  const __m128i x2 = _mm_mask_blend_epi8(0xf000, x, _mm_srli_epi16(x, 4));
  const __m128i lo = _mm_and_si128(
      x2, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
  const __m128i hi = _mm_and_si128(
      _mm_srli_epi16(y, 2), _mm_setr_epi8(0, 0, 0, 0, 48, 48, 48, 48, 0, 0, 0, 0, 48, 48, 48, 48));
  return _mm_or_si128(lo, hi);
}

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
