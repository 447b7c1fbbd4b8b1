#include "backend/cpu/quantize_acts.h"

#include <cstring>
#include <type_traits>

#include "backend/cpu/vec_dot.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/reference.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace minfer::cpu {

#if defined(__x86_64__)
namespace detail {
namespace {

#define MINFER_AVX2 __attribute__((target("avx2,fma,f16c")))
#define MINFER_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::BlockQ8_K;
using quant::kQK;
using quant::kQK_K;

MINFER_AVX2_INLINE __m256 abs_ps(__m256 v) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

MINFER_AVX2_INLINE float hmax_ps(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

MINFER_AVX2_INLINE int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// All-ones exponent: an infinity or a NaN.
MINFER_AVX2_INLINE bool any_non_finite(const __m256* v, int count) {
  const __m256i exp = _mm256_set1_epi32(0x7f800000);
  __m256i bad = _mm256_setzero_si256();
  for (int i = 0; i < count; ++i) {
    const __m256i e = _mm256_and_si256(_mm256_castps_si256(v[i]), exp);
    bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, exp));
  }
  return _mm256_testz_si256(bad, bad) == 0;
}

// round(p) half away from zero, exactly: truncate, then the fraction (exact
// in f32) decides. For |p| <= 127 the result is an integer in f32.
MINFER_AVX2_INLINE __m256 round_away(__m256 p) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(p, t));
  const __m256 away = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(sign, p));
  const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  return _mm256_add_ps(t, _mm256_and_ps(up, away));
}

// Four vectors of int32 (each within int8 range or saturated to it) as 32
// bytes in element order.
MINFER_AVX2_INLINE __m256i pack_bytes(const __m256i q[4]) {
  const __m256i ab = _mm256_packs_epi32(q[0], q[1]);
  const __m256i cd = _mm256_packs_epi32(q[2], q[3]);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// One 32-element Q8_0/Q8_1 block: qs, and d (f32) and sum(qs) returned. False
// on a non-finite input.
MINFER_AVX2 bool q8_block(const float* x, int8_t* qs, float* d_out, int* sum_out) {
  __m256 v[4];
  for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
  if (any_non_finite(v, 4)) return false;
  const __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(v[0]), abs_ps(v[1])),
                                 _mm256_max_ps(abs_ps(v[2]), abs_ps(v[3])));
  const float d = hmax_ps(m) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const __m256 vid = _mm256_set1_ps(id);
  const __m256 lim = _mm256_set1_ps(127.0f), neg_lim = _mm256_set1_ps(-127.0f);
  __m256i q[4];
  __m256i sum = _mm256_setzero_si256();
  for (int i = 0; i < 4; ++i) {
    __m256 r = round_away(_mm256_mul_ps(v[i], vid));
    r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q));  // NaN (0 * inf) -> 0, as the reference
    r = _mm256_min_ps(_mm256_max_ps(r, neg_lim), lim);
    q[i] = _mm256_cvttps_epi32(r);
    sum = _mm256_add_epi32(sum, q[i]);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), pack_bytes(q));
  *d_out = d;
  *sum_out = hsum_epi32(sum);
  return true;
}

// A row of Q8_0 or Q8_1 blocks (Q8_1 also keeps d * sum(qs)).
template <class Block>
MINFER_AVX2 bool q8_legacy_row(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    Block blk;
    float d = 0.0f;
    int sum = 0;
    if (!q8_block(x, blk.qs, &d, &sum)) return false;
    blk.d = quant::f32_to_f16(d);
    if constexpr (std::is_same_v<Block, BlockQ8_1>) {
      blk.s = quant::f32_to_f16(static_cast<float>(sum) * d);  // the unrounded d, as the reference
    }
    std::memcpy(dst + b * sizeof(Block), &blk, sizeof(Block));
  }
  return true;
}

// One Q8_K block (256 elements): iscale = -127 / (the first element of
// largest magnitude), q = round half to even of iscale * x, clamped to int8.
MINFER_AVX2 bool q8_k_block(const float* x, BlockQ8_K* blk) {
  constexpr int kVecs = kQK_K / 8;
  __m256 v[kVecs];
  for (int i = 0; i < kVecs; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
  if (any_non_finite(v, kVecs)) return false;
  __m256 m = abs_ps(v[0]);
  for (int i = 1; i < kVecs; ++i) m = _mm256_max_ps(m, abs_ps(v[i]));
  const float amax = hmax_ps(m);
  std::memset(blk, 0, sizeof(BlockQ8_K));
  if (amax == 0.0f) return true;
  const __m256 vamax = _mm256_set1_ps(amax);
  int first = 0;
  for (int i = 0; i < kVecs; ++i) {
    const int hit = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(v[i]), vamax, _CMP_EQ_OQ));
    if (hit != 0) {
      first = 8 * i + __builtin_ctz(static_cast<unsigned>(hit));
      break;
    }
  }
  const float iscale = -127.0f / x[first];
  const __m256 vis = _mm256_set1_ps(iscale);
  for (int g = 0; g < kQK_K / 32; ++g) {
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      const __m256 p = _mm256_mul_ps(v[4 * g + i], vis);
      q[i] = _mm256_cvttps_epi32(_mm256_round_ps(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // pack_bytes saturates to [-128, 127], the reference's clamp; a NaN
    // (0 * inf) converts to INT_MIN and so becomes -128, as there.
    const __m256i bytes = pack_bytes(q);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk->qs + 32 * g), bytes);
    const __m256i lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(bytes));
    const __m256i hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(bytes, 1));
    const __m256i ones = _mm256_set1_epi16(1);
    blk->bsums[2 * g] = static_cast<int16_t>(hsum_epi32(_mm256_madd_epi16(lo, ones)));
    blk->bsums[2 * g + 1] = static_cast<int16_t>(hsum_epi32(_mm256_madd_epi16(hi, ones)));
  }
  blk->d = 1.0f / iscale;
  return true;
}

MINFER_AVX2 bool q8_k_row(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    BlockQ8_K blk;
    if (!q8_k_block(x, &blk)) return false;
    std::memcpy(dst + b * sizeof(BlockQ8_K), &blk, sizeof(BlockQ8_K));
  }
  return true;
}

}  // namespace

bool quantize_activations_avx2(quant::TensorType type, const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  switch (type) {
    case quant::TensorType::Q8_0:
      return q8_legacy_row<BlockQ8_0>(x, out, n / kQK);
    case quant::TensorType::Q8_1:
      return q8_legacy_row<BlockQ8_1>(x, out, n / kQK);
    case quant::TensorType::Q8_K:
      return q8_k_row(x, out, n / kQK_K);
    default:
      return false;
  }
}

}  // namespace detail
#endif  // __x86_64__

Status quantize_activations(quant::TensorType type, const float* x, void* dst, int64_t n) {
#if defined(__x86_64__)
  const bool fast_type = type == quant::TensorType::Q8_0 || type == quant::TensorType::Q8_1 ||
                         type == quant::TensorType::Q8_K;
  if (fast_type && active_isa() == Isa::kAvx2 && x != nullptr && dst != nullptr && n > 0 &&
      n % quant::type_traits(type).block_size == 0 &&
      detail::quantize_activations_avx2(type, x, dst, n)) {
    return Status::ok();
  }
#endif
  // Other types, bad arguments and non-finite rows: the reference, which
  // also names what was wrong.
  return quant::quantize_row(type, x, dst, n);
}

}  // namespace minfer::cpu
