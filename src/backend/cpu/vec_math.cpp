#include "backend/cpu/vec_math.h"

#include <bit>
#include <cmath>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MINFER_AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace minfer::cpu::detail {
namespace {

// Constants of ggml's vector expf: 1.5 * 2^23 (round-to-integer shifter),
// log2(e), ln(2) split in a high and a low part, and the polynomial for
// exp(b) - 1 on the reduced range.
constexpr float kShift = 0x1.8p23f;
constexpr float kLog2e = 0x1.715476p+0f;
constexpr float kLn2Hi = 0x1.62e4p-1f;
constexpr float kLn2Lo = 0x1.7f7d1cp-20f;
constexpr float kC1 = 0x1.ffffecp-1f;
constexpr float kC2 = 0x1.fffdb6p-2f;
constexpr float kC3 = 0x1.555e66p-3f;
constexpr float kC4 = 0x1.573e2ep-5f;
constexpr float kC5 = 0x1.0e4020p-7f;

inline float silu_libm(float x) {
  return x / (1.0f + std::exp(-x));
}

inline float silu_lane(float x) {
  return x / (1.0f + ggml_vec_expf_lane(0.0f - x));
}

// ggml's 8-lane horizontal sum: halves, then pairs, then the last two.
inline float hsum8(const float v[8]) {
  const float a0 = v[4] + v[0], a1 = v[5] + v[1], a2 = v[6] + v[2], a3 = v[7] + v[3];
  return (a0 + a2) + (a1 + a3);
}

#if defined(MINFER_AVX2)
MINFER_AVX2 __m256 expf_avx2(__m256 x) {
  const __m256 r = _mm256_set1_ps(kShift);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(kLog2e), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b =
      _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 c = _mm256_cmp_ps(abs_n, _mm256_set1_ps(126), _CMP_GT_OQ);
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 poly_hi = _mm256_fmadd_ps(_mm256_set1_ps(kC5), b, _mm256_set1_ps(kC4));
  const __m256 poly_lo = _mm256_fmadd_ps(_mm256_set1_ps(kC3), b, _mm256_set1_ps(kC2));
  const __m256 j = _mm256_fmadd_ps(_mm256_fmadd_ps(poly_hi, u, poly_lo), u,
                                   _mm256_mul_ps(_mm256_set1_ps(kC1), b));
  const __m256 normal = _mm256_fmadd_ps(j, k, k);
  if (!_mm256_movemask_ps(c)) return normal;
  // Scale in two steps where 2^n alone would leave the f32 exponent range.
  const __m256i g =
      _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                       _mm256_set1_epi32(static_cast<int>(0x82000000u)));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  const __m256 d = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192), _CMP_GT_OQ);
  const __m256 big = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
  const __m256 in_range = _mm256_blendv_ps(normal, big, c);
  return _mm256_blendv_ps(in_range, _mm256_mul_ps(s1, s1), d);
}

MINFER_AVX2 __m256 silu_avx2(__m256 x) {
  const __m256 e = expf_avx2(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

MINFER_AVX2 int64_t silu_chunks_avx2(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, silu_avx2(_mm256_loadu_ps(x + i)));
  return i;
}

MINFER_AVX2 int64_t swiglu_chunks_avx2(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 s = silu_avx2(_mm256_loadu_ps(gate + i));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
  }
  return i;
}

MINFER_AVX2 int64_t softmax_chunks_avx2(const float* x, int64_t n, float max, float* y,
                                        double* sum) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = expf_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(max)));
    _mm256_storeu_ps(y + i, v);
    __m128 h = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    *sum += static_cast<double>(_mm_cvtss_f32(h));
  }
  return i;
}

bool use_avx2(Isa isa) {
  return isa == Isa::kAvx2 && isa_supported(Isa::kAvx2);
}
#endif

}  // namespace

float ggml_vec_expf_lane(float x) {
  const float z = std::fma(x, kLog2e, kShift);
  const float n = z - kShift;
  const float b = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, x));
  const uint32_t e = std::bit_cast<uint32_t>(z) << 23;
  const float k = std::bit_cast<float>(e + 0x3f800000u);
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(kC5, b, kC4), u, std::fma(kC3, b, kC2)), u, kC1 * b);
  const float abs_n = std::fabs(n);
  if (!(abs_n > 126.0f)) return std::fma(j, k, k);
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = std::bit_cast<float>(g + 0x7f000000u);
  const float s2 = std::bit_cast<float>(e - g);
  if (abs_n > 192.0f) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

void silu_f32(const float* x, int64_t n, float* y, Isa isa) {
  int64_t i = 0;
#if defined(MINFER_AVX2)
  if (use_avx2(isa)) i = silu_chunks_avx2(x, n, y);
#endif
  for (; i < (n & ~int64_t{7}); ++i) y[i] = silu_lane(x[i]);
  for (; i < n; ++i) y[i] = silu_libm(x[i]);
}

void swiglu_f32(const float* gate, const float* up, int64_t n, float* out, Isa isa) {
  int64_t i = 0;
#if defined(MINFER_AVX2)
  if (use_avx2(isa)) i = swiglu_chunks_avx2(gate, up, n, out);
#endif
  for (; i < (n & ~int64_t{7}); ++i) out[i] = silu_lane(gate[i]) * up[i];
  for (; i < n; ++i) out[i] = silu_libm(gate[i]) * up[i];
}

double softmax_exp_f32(const float* x, int64_t n, float max, float* y, Isa isa) {
  double sum = 0.0;
  int64_t i = 0;
#if defined(MINFER_AVX2)
  if (use_avx2(isa)) i = softmax_chunks_avx2(x, n, max, y, &sum);
#endif
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) y[i + l] = ggml_vec_expf_lane(x[i + l] - max);
    sum += static_cast<double>(hsum8(y + i));
  }
  for (; i < n; ++i) {
    y[i] = std::exp(x[i] - max);
    sum += static_cast<double>(y[i]);
  }
  return sum;
}

}  // namespace minfer::cpu::detail
