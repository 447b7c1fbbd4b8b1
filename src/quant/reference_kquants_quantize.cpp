// K-quant weight quantizers (Q2_K..Q6_K).
//
// Two stages per super-block:
//   1. Each sub-block gets a real-valued fit: x ~ scale * q - offset (Q2_K,
//      Q4_K, Q5_K; offset >= 0 because the format can only subtract a minimum)
//      or x ~ scale * q (Q3_K, Q6_K). The fit alternates between rounding q for
//      the current (scale, offset) and solving the 2x2 (or 1x1) least-squares
//      problem for (scale, offset) given q, from several starting ranges (a
//      slightly clipped range often beats the full min..max range), and keeps
//      the fit with the smallest squared error.
//   2. The sub-block scales/offsets are quantized relative to the super-block's
//      f16 d/dmin. With the fit's quants held fixed, the squared error of any
//      other (scale, offset) is a quadratic in the change from the fit, so the
//      candidate d/dmin and the +-1 nudges of each integer scale/min are
//      compared through that quadratic without another pass over the data.
//      For the chosen d/dmin, each sub-block's integer scale (and min) is then
//      nudged by +-1 for real: the elements are re-rounded against the scales
//      the decoder will see and the pair with the smallest error is kept.
// The result minimizes unweighted squared error; it is not ggml's byte output.
//
// Four sub-blocks are fitted at once, one per lane of a 4-wide f32 vector (GNU
// vector extensions; every lane is plain IEEE f32 arithmetic, and all sums run
// in a fixed order, so the bytes do not depend on the target or vectorizer).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/kquant_layout.h"
#include "quant/reference_internal.h"

// The error estimates use the decoder's exact expression; keep it unfused.
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace minfer::quant::detail {
namespace {

// Starting ranges as fractions of the data range, and the number of
// round/solve rounds from each; measured on N(0, 1) to cost well under 1% RMS
// error against more starts and rounds.
constexpr float kStartFactors[] = {0.80f, 0.85f, 0.90f, 0.95f, 1.00f, 1.05f, 1.10f};
constexpr int kAffineRounds = 3;
constexpr int kSymmetricRounds = 2;

using F4 = float __attribute__((vector_size(16)));
using I4 = int32_t __attribute__((vector_size(16)));
constexpr int kLanes = 4;

inline F4 splat(float v) {
  return F4{v, v, v, v};
}
inline F4 select(I4 mask, F4 a, F4 b) {
  return mask ? a : b;
}
inline F4 min4(F4 a, F4 b) {
  return b < a ? b : a;
}
inline F4 max4(F4 a, F4 b) {
  return b > a ? b : a;
}
// 1 / v, or 0 where v is 0.
inline F4 inverse(F4 v) {
  return v != splat(0.0f) ? splat(1.0f) / v : splat(0.0f);
}

// Clamps v to [lo, hi] (NaN becomes lo) and rounds to nearest (ties away from
// lo): lo and hi are integers and lo + 0.5 + (v - lo) stays below 2^23.
inline F4 clamp_round(F4 v, F4 lo, F4 hi) {
  v = v > lo ? (v < hi ? v : hi) : lo;
  const I4 t = __builtin_convertvector((v - lo) + splat(0.5f), I4);  // trunc of a value >= 0.5
  return __builtin_convertvector(t, F4) + lo;
}

// Per-lane sums over a sub-block for quants q and residuals r = model - x.
struct Sums {
  F4 err{};  // sum r^2
  F4 sq{};   // sum q
  F4 sqq{};  // sum q^2
  F4 sqx{};  // sum q * x
  F4 sr{};   // sum r
  F4 sqr{};  // sum q * r
};

// A fit per lane and the sums of its quants, which give the squared error of
// any other (scale, offset) with the quants held fixed:
//   err(scale + a, offset + b) = err + 2 a sqr - 2 b sr + a^2 sqq - 2 a b sq + n b^2.
struct Fit {
  F4 scale{};
  F4 offset{};  // affine fits only; x ~ scale * q - offset
  Sums sums;
};

F4 error_at(const Fit& fit, F4 n, F4 scale, F4 offset) {
  const F4 a = scale - fit.scale;
  const F4 b = offset - fit.offset;
  const Sums& s = fit.sums;
  const F4 two = splat(2.0f);
  return s.err + two * a * s.sqr - two * b * s.sr + a * a * s.sqq - two * a * b * s.sq + n * b * b;
}

// x ~ scale * q - offset with q = clamp(round((x + offset) / scale), lo, hi),
// lane-wise over the `len` elements of xt (element-major). Writes q if asked.
Sums assign(const F4* xt, int len, F4 lo, F4 hi, F4 scale, F4 offset, F4* q) {
  const F4 inv = inverse(scale);
  Sums s;
  for (int i = 0; i < len; ++i) {
    const F4 x = xt[i];
    const F4 v = clamp_round((x + offset) * inv, lo, hi);
    if (q != nullptr) q[i] = v;
    const F4 r = (scale * v - offset) - x;
    s.err += r * r;
    s.sq += v;
    s.sqq += v * v;
    s.sqx += v * x;
    s.sr += r;
    s.sqr += v * r;
  }
  return s;
}

void keep_better(const Fit& fit, Fit* best) {
  const I4 m = fit.sums.err < best->sums.err;
  best->scale = select(m, fit.scale, best->scale);
  best->offset = select(m, fit.offset, best->offset);
  best->sums.err = select(m, fit.sums.err, best->sums.err);
  best->sums.sq = select(m, fit.sums.sq, best->sums.sq);
  best->sums.sqq = select(m, fit.sums.sqq, best->sums.sqq);
  best->sums.sqx = select(m, fit.sums.sqx, best->sums.sqx);
  best->sums.sr = select(m, fit.sums.sr, best->sums.sr);
  best->sums.sqr = select(m, fit.sums.sqr, best->sums.sqr);
}

// Stage 1, affine, q in [0, nmax]: lane l fits elements xt[.][l].
Fit fit_affine(const F4* xt, int len, int nmax) {
  F4 lo = splat(0.0f);
  F4 hi = xt[0];
  F4 sx{};
  for (int i = 0; i < len; ++i) {
    lo = min4(lo, xt[i]);
    hi = max4(hi, xt[i]);
    sx += xt[i];
  }
  const F4 qlo = splat(0.0f), qhi = splat(static_cast<float>(nmax));
  const F4 n = splat(static_cast<float>(len));
  // A constant block at or below zero gets scale 0 and offset -x.
  const F4 range = max4(hi - lo, splat(0.0f));
  Fit best;
  best.sums.err = splat(INFINITY);
  for (const float f : kStartFactors) {
    Fit fit;
    fit.scale = range / qhi * splat(f);
    fit.offset = -lo;
    for (int round = 0; round < kAffineRounds; ++round) {
      fit.sums = assign(xt, len, qlo, qhi, fit.scale, fit.offset, nullptr);
      keep_better(fit, &best);
      if (round + 1 == kAffineRounds) break;
      // Least squares for (scale, intercept) given q, intercept <= 0.
      const Sums& s = fit.sums;
      const F4 det = n * s.sqq - s.sq * s.sq;  // exact: integer sums
      F4 scale = (n * s.sqx - s.sq * sx) / det;
      F4 intercept = (s.sqq * sx - s.sq * s.sqx) / det;
      const I4 clip = intercept > splat(0.0f);
      scale = select(clip, s.sqx / s.sqq, scale);
      intercept = select(clip, splat(0.0f), intercept);
      // Degenerate q (all equal) or a non-positive scale: keep the fit.
      const I4 ok = (det > splat(0.0f)) & (scale > splat(0.0f));
      fit.scale = select(ok, scale, fit.scale);
      fit.offset = select(ok, -intercept, fit.offset);
    }
  }
  return best;
}

// Stage 1, symmetric, q in [-nmax, nmax - 1].
Fit fit_symmetric(const F4* xt, int len, int nmax) {
  F4 max{};  // first element of largest magnitude
  for (int i = 0; i < len; ++i) {
    const F4 a = reinterpret_cast<F4>(reinterpret_cast<I4>(xt[i]) & 0x7fffffff);
    const F4 b = reinterpret_cast<F4>(reinterpret_cast<I4>(max) & 0x7fffffff);
    max = select(a > b, xt[i], max);
  }
  const F4 fmax = splat(static_cast<float>(nmax));
  const F4 qlo = -fmax, qhi = fmax - splat(1.0f);
  Fit best;
  best.sums.err = splat(INFINITY);
  // The extreme can map to the long side (-nmax) or the short side (nmax - 1).
  for (const F4 base : {max / qlo, max / qhi}) {
    for (const float f : kStartFactors) {
      Fit fit;
      fit.scale = base * splat(f);
      for (int round = 0; round < kSymmetricRounds; ++round) {
        fit.sums = assign(xt, len, qlo, qhi, fit.scale, splat(0.0f), nullptr);
        keep_better(fit, &best);
        if (round + 1 == kSymmetricRounds) break;
        const Sums& s = fit.sums;
        fit.scale = select(s.sqq > splat(0.0f), s.sqx / s.sqq, fit.scale);
      }
    }
  }
  return best;
}

float lane_sum(F4 v) {
  return ((v[0] + v[1]) + v[2]) + v[3];
}

// Sub-blocks j = 4g + l of a super-block, element-major per group g.
struct Transposed {
  F4 xt[4][32];
  int groups;
  Transposed(const float* x, int nsub, int len) : groups(nsub / kLanes) {
    for (int g = 0; g < groups; ++g) {
      for (int i = 0; i < len; ++i) {
        for (int l = 0; l < kLanes; ++l) xt[g][i][l] = x[(g * kLanes + l) * len + i];
      }
    }
  }
};

// Stage 2, affine, for one choice of the f16 super-block scales d/dmin:
// integer sub-block scales/mins in [0, smax], each nudged by one step when the
// fixed-quant error says that helps. Returns the estimated squared error.
float choose_affine_scales(const Fit* fits, int groups, int len, int smax, float d, float dmin,
                           F4* sc, F4* mn) {
  const F4 vd = splat(d), vdmin = splat(dmin);
  const F4 inv_d = inverse(vd), inv_dmin = inverse(vdmin);
  const F4 zero = splat(0.0f), top = splat(static_cast<float>(smax));
  const F4 n = splat(static_cast<float>(len));
  float total = 0.0f;
  for (int g = 0; g < groups; ++g) {
    const F4 s0 = clamp_round(fits[g].scale * inv_d, zero, top);
    const F4 m0 = clamp_round(fits[g].offset * inv_dmin, zero, top);
    F4 best = splat(INFINITY);
    for (int ds = -1; ds <= 1; ++ds) {
      for (int dm = -1; dm <= 1; ++dm) {
        const F4 s = clamp_round(s0 + splat(static_cast<float>(ds)), zero, top);
        const F4 m = clamp_round(m0 + splat(static_cast<float>(dm)), zero, top);
        const F4 err = error_at(fits[g], n, vd * s, vdmin * m);
        const I4 better = err < best;
        best = select(better, err, best);
        sc[g] = select(better, s, sc[g]);
        mn[g] = select(better, m, mn[g]);
      }
    }
    total += lane_sum(best);
  }
  return total;
}

// Stage 2 for the affine formats: nsub sub-blocks of `len` elements. The
// largest sub-block scale need not map to exactly smax: a slightly larger
// super-block d trades resolution of the biggest scale for that of the rest
// (and keeps small d out of the f16 subnormal range), so a few divisors are
// tried and the best kept.
void quantize_affine_superblock(const float* x, int nsub, int len, int nmax, int smax,
                                uint16_t* d_out, uint16_t* dmin_out, int* sc, int* mn, int* q) {
  const Transposed t(x, nsub, len);
  Fit fits[4];
  float max_scale = 0.0f;
  float max_offset = 0.0f;
  for (int g = 0; g < t.groups; ++g) {
    fits[g] = fit_affine(t.xt[g], len, nmax);
    for (int l = 0; l < kLanes; ++l) {
      max_scale = std::max(max_scale, fits[g].scale[l]);
      max_offset = std::max(max_offset, fits[g].offset[l]);
    }
  }
  float best_err = INFINITY;
  F4 bsc[4], bmn[4];
  for (int ts = 0; ts < 4; ++ts) {
    for (int tm = 0; tm < 4; ++tm) {
      const uint16_t dh = f32_to_f16(max_scale / static_cast<float>(smax - ts));
      const uint16_t mh = f32_to_f16(max_offset / static_cast<float>(smax - tm));
      F4 tsc[4] = {}, tmn[4] = {};
      const float err =
          choose_affine_scales(fits, t.groups, len, smax, f16_to_f32(dh), f16_to_f32(mh), tsc, tmn);
      if (err < best_err) {
        best_err = err;
        *d_out = dh;
        *dmin_out = mh;
        std::copy(tsc, tsc + t.groups, bsc);
        std::copy(tmn, tmn + t.groups, bmn);
      }
    }
  }
  const F4 d = splat(f16_to_f32(*d_out)), dmin = splat(f16_to_f32(*dmin_out));
  // Re-round against the decoder's scales, trying each +-1 nudge for real.
  const F4 qlo = splat(0.0f), qhi = splat(static_cast<float>(nmax));
  const F4 top = splat(static_cast<float>(smax));
  for (int g = 0; g < t.groups; ++g) {
    F4 qv[32] = {}, tq[32];
    F4 best = splat(INFINITY);
    const F4 s0 = bsc[g], m0 = bmn[g];
    static constexpr int kNs[9] = {0, -1, 1, 0, 0, -1, -1, 1, 1};
    static constexpr int kNm[9] = {0, 0, 0, -1, 1, -1, 1, -1, 1};
    for (int k = 0; k < 9; ++k) {
      const F4 s = clamp_round(s0 + splat(static_cast<float>(kNs[k])), qlo, top);
      const F4 m = clamp_round(m0 + splat(static_cast<float>(kNm[k])), qlo, top);
      const Sums r = assign(t.xt[g], len, qlo, qhi, d * s, dmin * m, tq);
      const I4 better = r.err < best;
      best = select(better, r.err, best);
      bsc[g] = select(better, s, bsc[g]);
      bmn[g] = select(better, m, bmn[g]);
      for (int i = 0; i < len; ++i) qv[i] = select(better, tq[i], qv[i]);
    }
    for (int l = 0; l < kLanes; ++l) {
      const int j = g * kLanes + l;
      sc[j] = static_cast<int>(bsc[g][l]);
      mn[j] = static_cast<int>(bmn[g][l]);
      for (int i = 0; i < len; ++i) q[j * len + i] = static_cast<int>(qv[i][l]);
    }
  }
}

// Stage 2, symmetric, for one f16 d: signed sub-block scales in
// [-smax, smax - 1]. Returns the estimated squared error.
float choose_symmetric_scales(const Fit* fits, int groups, int len, int smax, float d, F4* sc) {
  const F4 vd = splat(d), inv_d = inverse(vd);
  const F4 lo = splat(static_cast<float>(-smax)), hi = splat(static_cast<float>(smax - 1));
  const F4 n = splat(static_cast<float>(len)), zero = splat(0.0f);
  float total = 0.0f;
  for (int g = 0; g < groups; ++g) {
    const F4 s0 = clamp_round(fits[g].scale * inv_d, lo, hi);
    F4 best = splat(INFINITY);
    for (int ds = -1; ds <= 1; ++ds) {
      const F4 s = clamp_round(s0 + splat(static_cast<float>(ds)), lo, hi);
      const F4 err = error_at(fits[g], n, vd * s, zero);
      const I4 better = err < best;
      best = select(better, err, best);
      sc[g] = select(better, s, sc[g]);
    }
    total += lane_sum(best);
  }
  return total;
}

// Stage 2 for the symmetric formats; candidate divisors as in the affine case.
void quantize_symmetric_superblock(const float* x, int nsub, int len, int nmax, int smax,
                                   uint16_t* d_out, int* sc, int* q) {
  const Transposed t(x, nsub, len);
  Fit fits[4];
  float max = 0.0f;
  for (int g = 0; g < t.groups; ++g) {
    fits[g] = fit_symmetric(t.xt[g], len, nmax);
    for (int l = 0; l < kLanes; ++l) {
      if (std::fabs(fits[g].scale[l]) > std::fabs(max)) max = fits[g].scale[l];
    }
  }
  // Divisors just below smax, plus coarse ones: when max / smax falls into the
  // f16 subnormal range, d keeps more significant bits if the sub-block scales
  // use a smaller integer range (matters for small weights in Q6_K).
  int divisors[16];
  int count = 0;
  for (int k = 0; k < 8; ++k) divisors[count++] = smax - k;
  for (int k = smax / 2; k >= 1; k /= 2) divisors[count++] = k;
  float best_err = INFINITY;
  F4 bsc[4];
  for (int k = 0; k < count; ++k) {
    const uint16_t dh = f32_to_f16(max / static_cast<float>(-divisors[k]));
    F4 tsc[4] = {};
    const float err = choose_symmetric_scales(fits, t.groups, len, smax, f16_to_f32(dh), tsc);
    if (err < best_err) {
      best_err = err;
      *d_out = dh;
      std::copy(tsc, tsc + t.groups, bsc);
    }
  }
  const F4 d = splat(f16_to_f32(*d_out));
  const F4 fmax = splat(static_cast<float>(nmax));
  const F4 qlo = -fmax, qhi = fmax - splat(1.0f);
  const F4 slo = splat(static_cast<float>(-smax)), shi = splat(static_cast<float>(smax - 1));
  // Re-round against the decoder's scales, trying each +-1 nudge for real.
  for (int g = 0; g < t.groups; ++g) {
    F4 qv[32] = {}, tq[32];
    F4 best = splat(INFINITY);
    const F4 s0 = bsc[g];
    static constexpr int kNs[3] = {0, -1, 1};
    for (int k = 0; k < 3; ++k) {
      const F4 s = clamp_round(s0 + splat(static_cast<float>(kNs[k])), slo, shi);
      const Sums r = assign(t.xt[g], len, qlo, qhi, d * s, splat(0.0f), tq);
      const I4 better = r.err < best;
      best = select(better, r.err, best);
      bsc[g] = select(better, s, bsc[g]);
      for (int i = 0; i < len; ++i) qv[i] = select(better, tq[i], qv[i]);
    }
    for (int l = 0; l < kLanes; ++l) {
      const int j = g * kLanes + l;
      sc[j] = static_cast<int>(bsc[g][l]);
      for (int i = 0; i < len; ++i) q[j * len + i] = static_cast<int>(qv[i][l]);
    }
  }
}

}  // namespace

void quantize_q2_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK_K) {
    BlockQ2_K b{};
    int sc[16], mn[16], q[kQK_K];
    quantize_affine_superblock(src, 16, 16, 3, 15, &b.d, &b.dmin, sc, mn, q);
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(sc[j] | (mn[j] << 4));
    for (int e = 0; e < kQK_K; ++e) set_2bit(b.qs, e, q[e]);
    store_block(dst, i, b);
  }
}

void quantize_q3_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK_K) {
    BlockQ3_K b{};
    int sc[16], q[kQK_K];
    quantize_symmetric_superblock(src, 16, 16, 4, 32, &b.d, sc, q);
    for (int j = 0; j < 16; ++j) set_q3_scale(b.scales, j, sc[j] + 32);
    for (int e = 0; e < kQK_K; ++e) {
      const int u = q[e] + 4;  // [0, 7]: low 2 bits in qs, bit 2 in hmask
      set_2bit(b.qs, e, u & 3);
      set_hbit(b.hmask, e, u >> 2);
    }
    store_block(dst, i, b);
  }
}

void quantize_q4_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK_K) {
    BlockQ4_K b{};
    int sc[8], mn[8], q[kQK_K];
    quantize_affine_superblock(src, 8, 32, 15, 63, &b.d, &b.dmin, sc, mn, q);
    for (int j = 0; j < 8; ++j) set_k4_scale_min(b.scales, j, sc[j], mn[j]);
    for (int e = 0; e < kQK_K; ++e) set_k4(b.qs, e, q[e]);
    store_block(dst, i, b);
  }
}

void quantize_q5_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK_K) {
    BlockQ5_K b{};
    int sc[8], mn[8], q[kQK_K];
    quantize_affine_superblock(src, 8, 32, 31, 63, &b.d, &b.dmin, sc, mn, q);
    for (int j = 0; j < 8; ++j) set_k4_scale_min(b.scales, j, sc[j], mn[j]);
    for (int e = 0; e < kQK_K; ++e) {
      set_k4(b.qs, e, q[e] & 0x0f);
      set_hbit(b.qh, e, q[e] >> 4);
    }
    store_block(dst, i, b);
  }
}

void quantize_q6_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK_K) {
    BlockQ6_K b{};
    int sc[16], q[kQK_K];
    quantize_symmetric_superblock(src, 16, 16, 32, 128, &b.d, sc, q);
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(sc[j]);
    for (int e = 0; e < kQK_K; ++e) {
      const int u = q[e] + 32;  // [0, 63]: low nibble in ql, top 2 bits in qh
      set_q6_low(b.ql, e, u & 0x0f);
      set_2bit(b.qh, e, u >> 4);
    }
    store_block(dst, i, b);
  }
}

}  // namespace minfer::quant::detail
