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
using vnni_x::q4k_block;
using vnni_x::Q4KConsts;
using vnni_x::Q4KRow;
using vnni_x::q6k_block;
using vnni_x::Q6KConsts;
using vnni_x::XBlock;

constexpr int kGroup = 4;  // rows per pass sharing the activation loads

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
  const Q4KConsts k4 = vnni_x::make_q4k_consts();
  const Q6KConsts k6 = vnni_x::make_q6k_consts();
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
