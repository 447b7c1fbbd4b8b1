#include "backend/cpu/norm_rope.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MINFER_AVX2 __attribute__((target("avx2,fma")))
#endif

// ggml's expressions are evaluated unfused; keep the compiler from contracting.
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace minfer::cpu::detail {
namespace {

#if defined(MINFER_AVX2)
bool use_avx2(Isa isa) {
  return isa == Isa::kAvx2 && isa_supported(Isa::kAvx2);
}

// Squares of 16 floats per step, widened to double in 4 accumulators of 4
// lanes; returns the sum of the first (n & ~15) squares, *done that count.
MINFER_AVX2 double sum_squares_avx2(const float* x, int64_t n, int64_t* done) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i);
    const __m256 b = _mm256_loadu_ps(x + i + 8);
    const __m256 aa = _mm256_mul_ps(a, a);
    const __m256 bb = _mm256_mul_ps(b, b);
    acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(aa)));
    acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(aa, 1)));
    acc[2] = _mm256_add_pd(acc[2], _mm256_cvtps_pd(_mm256_castps256_ps128(bb)));
    acc[3] = _mm256_add_pd(acc[3], _mm256_cvtps_pd(_mm256_extractf128_ps(bb, 1)));
  }
  *done = i;
  const __m256d s = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
  const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

MINFER_AVX2 int64_t scale_avx2(const float* x, const float* w, int64_t n, float s, float* y) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  if (w != nullptr) {
    for (; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
      _mm256_storeu_ps(y + i, _mm256_mul_ps(v, _mm256_loadu_ps(w + i)));
    }
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  }
  return i;
}

// NeoX: pair i is (x[i], x[i + half]); 8 pairs per step. Returns pairs done.
MINFER_AVX2 int64_t rotate_neox_avx2(const float* x, int64_t half, const float* cos_v,
                                     const float* sin_v, float* y) {
  int64_t i = 0;
  for (; i + 8 <= half; i += 8) {
    const __m256 x0 = _mm256_loadu_ps(x + i);
    const __m256 x1 = _mm256_loadu_ps(x + i + half);
    const __m256 c = _mm256_loadu_ps(cos_v + i);
    const __m256 s = _mm256_loadu_ps(sin_v + i);
    _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
    _mm256_storeu_ps(y + i + half, _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
  }
  return i;
}

// Normal: pair i is (x[2i], x[2i + 1]); 4 pairs (8 floats) per step. With
// cos/sin duplicated per pair, addsub gives x0*c - x1*s in even lanes and
// x1*c + x0*s (= x0*s + x1*c, addition commutes exactly) in odd lanes.
MINFER_AVX2 int64_t rotate_normal_avx2(const float* x, int64_t half, const float* cos_v,
                                       const float* sin_v, float* y) {
  int64_t i = 0;
  for (; i + 4 <= half; i += 4) {
    const __m128 c4 = _mm_loadu_ps(cos_v + i);
    const __m128 s4 = _mm_loadu_ps(sin_v + i);
    const __m256 c = _mm256_set_m128(_mm_unpackhi_ps(c4, c4), _mm_unpacklo_ps(c4, c4));
    const __m256 s = _mm256_set_m128(_mm_unpackhi_ps(s4, s4), _mm_unpacklo_ps(s4, s4));
    const __m256 v = _mm256_loadu_ps(x + 2 * i);
    const __m256 swapped = _mm256_permute_ps(v, 0xb1);  // (x1, x0) per pair
    _mm256_storeu_ps(y + 2 * i, _mm256_addsub_ps(_mm256_mul_ps(v, c), _mm256_mul_ps(swapped, s)));
  }
  return i;
}
#endif

// ggml's rope_yarn angle for pair i: the ramp is 1 below corr_low (keep the
// trained frequency) and 0 from corr_high (interpolate), linear between; the
// float operations are ggml's, in its order, so the angle matches its bits.
float yarn_theta(float interp, float extrap, int64_t i, const RopeYarn& yarn) {
  const float y =
      (static_cast<float>(i) - yarn.corr_low) / std::max(0.001f, yarn.corr_high - yarn.corr_low);
  const float ramp = 1.0f - std::clamp(y, 0.0f, 1.0f);  // ggml's MIN(1, MAX(0, y)), NaN too
  const float mix = ramp * yarn.ext_factor;
  return interp * (1.0f - mix) + extrap * mix;
}

}  // namespace

double rms_sum_squares_f64(const float* x, int64_t n, Isa isa) {
  double sum = 0.0;
  int64_t i = 0;
#if defined(MINFER_AVX2)
  if (use_avx2(isa)) sum = sum_squares_avx2(x, n, &i);
#else
  (void)isa;
#endif
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

void rms_scale_f32(const float* x, const float* w, int64_t n, float s, float* y, Isa isa) {
  int64_t i = 0;
#if defined(MINFER_AVX2)
  if (use_avx2(isa)) i = scale_avx2(x, w, n, s, y);
#else
  (void)isa;
#endif
  if (w != nullptr) {
    for (; i < n; ++i) y[i] = (x[i] * s) * w[i];
  } else {
    for (; i < n; ++i) y[i] = x[i] * s;
  }
}

float rms_inv_scale(double sum_squares, int64_t n, float eps) {
  const float mean = static_cast<float>(sum_squares / static_cast<double>(n));
  return 1.0f / std::sqrt(mean + eps);
}

void rms_norm_row_f32(const float* x, const float* w, int64_t n, float eps, float* y, Isa isa) {
  const float s = rms_inv_scale(rms_sum_squares_f64(x, n, isa), n, eps);
  rms_scale_f32(x, w, n, s, y, isa);
}

void rope_cache_f32(float pos, int64_t n_rot, float freq_base, float freq_scale,
                    const float* freq_factors, float* cos_out, float* sin_out,
                    const RopeYarn& yarn) {
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  float theta = pos;
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const float ff = freq_factors != nullptr ? freq_factors[i] : 1.0f;
    const float extrap = theta / ff;
    const float interp = freq_scale * extrap;
    if (yarn.ext_factor == 0.0f) {
      // Plain RoPE: the angle as is and no magnitude scale (bit for bit the
      // cache of every model without YaRN).
      cos_out[i] = std::cos(interp);
      sin_out[i] = std::sin(interp);
    } else {
      const float t = yarn_theta(interp, extrap, i, yarn);
      cos_out[i] = std::cos(t) * yarn.mscale;
      sin_out[i] = std::sin(t) * yarn.mscale;
    }
    theta *= theta_scale;
  }
}

void rope_rotate_f32(const float* x, int64_t head_dim, int64_t n_rot, RopeMode mode,
                     const float* cos_v, const float* sin_v, float* y, Isa isa) {
  const int64_t half = n_rot / 2;
  int64_t i = 0;
#if defined(MINFER_AVX2)
  if (use_avx2(isa)) {
    i = mode == RopeMode::kNeox ? rotate_neox_avx2(x, half, cos_v, sin_v, y)
                                : rotate_normal_avx2(x, half, cos_v, sin_v, y);
  }
#else
  (void)isa;
#endif
  for (; i < half; ++i) {
    const int64_t i0 = mode == RopeMode::kNormal ? 2 * i : i;
    const int64_t i1 = mode == RopeMode::kNormal ? 2 * i + 1 : i + half;
    const float c = cos_v[i];
    const float s = sin_v[i];
    const float x0 = x[i0];
    const float x1 = x[i1];
    y[i0] = x0 * c - x1 * s;
    y[i1] = x0 * s + x1 * c;
  }
  for (int64_t k = n_rot; k < head_dim; ++k) y[k] = x[k];
}

}  // namespace minfer::cpu::detail
