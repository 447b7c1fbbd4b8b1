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
//      f16 d/dmin (a few candidate d/dmin are tried); each quantized pair is
//      nudged by +-1 step if that lowers the block's error, and the elements
//      are re-rounded against the scales the decoder will actually see.
// The result minimizes unweighted squared error; it is not ggml's byte output.
#include <array>
#include <cmath>
#include <cstdint>

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

constexpr std::array<float, 7> kStartFactors = {0.80f, 0.85f, 0.90f, 0.95f, 1.00f, 1.05f, 1.10f};
constexpr int kRefineRounds = 4;

struct Fit {
  float scale = 0.0f;
  float offset = 0.0f;  // affine fits only; x ~ scale * q - offset
};

// Affine: x ~ scale * q - offset, q in [0, nmax]. Writes q, returns squared error.
double assign_affine(const float* x, int n, int nmax, float scale, float offset, int* q) {
  double err = 0.0;
  for (int i = 0; i < n; ++i) {
    q[i] = scale > 0.0f ? clamp_int(round_half_even((x[i] + offset) / scale), 0, nmax) : 0;
    const double diff = static_cast<double>(scale * static_cast<float>(q[i]) - offset) - x[i];
    err += diff * diff;
  }
  return err;
}

// Least-squares (scale, offset) for fixed q with offset >= 0; false if q is
// degenerate (all equal) and leaves the fit alone.
bool solve_affine(const float* x, int n, const int* q, Fit* fit) {
  double sq = 0, sqq = 0, sx = 0, sqx = 0;
  for (int i = 0; i < n; ++i) {
    sq += q[i];
    sqq += static_cast<double>(q[i]) * q[i];
    sx += x[i];
    sqx += static_cast<double>(q[i]) * x[i];
  }
  const double det = n * sqq - sq * sq;
  if (det <= 0.0) return false;
  double scale = (n * sqx - sq * sx) / det;
  double intercept = (sqq * sx - sq * sqx) / det;  // x ~ scale * q + intercept
  if (intercept > 0.0) {                           // the format needs intercept <= 0
    intercept = 0.0;
    scale = sqx / sqq;
  }
  if (scale <= 0.0) return false;
  fit->scale = static_cast<float>(scale);
  fit->offset = static_cast<float>(-intercept);
  return true;
}

Fit fit_affine(const float* x, int n, int nmax) {
  float lo = 0.0f;
  float hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (hi <= lo) return Fit{0.0f, -lo};  // constant block at or below zero
  int q[kQK_K];
  Fit best{(hi - lo) / static_cast<float>(nmax), -lo};
  double best_err = assign_affine(x, n, nmax, best.scale, best.offset, q);
  for (const float f : kStartFactors) {
    Fit fit{(hi - lo) / static_cast<float>(nmax) * f, -lo};
    for (int round = 0; round < kRefineRounds; ++round) {
      const double err = assign_affine(x, n, nmax, fit.scale, fit.offset, q);
      if (err < best_err) {
        best_err = err;
        best = fit;
      }
      if (!solve_affine(x, n, q, &fit)) break;
    }
  }
  return best;
}

// Symmetric: x ~ scale * q, q in [-nmax, nmax - 1].
double assign_symmetric(const float* x, int n, int nmax, float scale, int* q) {
  double err = 0.0;
  for (int i = 0; i < n; ++i) {
    q[i] = scale != 0.0f ? clamp_int(round_half_even(x[i] / scale), -nmax, nmax - 1) : 0;
    const double diff = static_cast<double>(scale * static_cast<float>(q[i])) - x[i];
    err += diff * diff;
  }
  return err;
}

Fit fit_symmetric(const float* x, int n, int nmax) {
  float max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(max)) max = x[i];
  }
  if (max == 0.0f) return Fit{};
  int q[kQK_K];
  Fit best{max / static_cast<float>(-nmax), 0.0f};
  double best_err = assign_symmetric(x, n, nmax, best.scale, q);
  // The extreme can map to the long side (-nmax) or the short side (nmax - 1).
  for (const float base : {max / static_cast<float>(-nmax), max / static_cast<float>(nmax - 1)}) {
    for (const float f : kStartFactors) {
      float scale = base * f;
      for (int round = 0; round < kRefineRounds; ++round) {
        const double err = assign_symmetric(x, n, nmax, scale, q);
        if (err < best_err) {
          best_err = err;
          best.scale = scale;
        }
        double sqq = 0, sqx = 0;
        for (int i = 0; i < n; ++i) {
          sqq += static_cast<double>(q[i]) * q[i];
          sqx += static_cast<double>(q[i]) * x[i];
        }
        if (sqq == 0.0) break;
        scale = static_cast<float>(sqx / sqq);
      }
    }
  }
  return best;
}

// Stage 2 for the affine formats, for one choice of the f16 super-block
// scales d/dmin: integer sub-block scales/mins in [0, smax] (each nudged by one
// step when that helps) and the quants. Returns the super-block's squared error.
double assign_affine_superblock(const float* x, const Fit* fits, int nsub, int len, int nmax,
                                int smax, float d, float dmin, int* sc, int* mn, int* q) {
  double total = 0.0;
  for (int j = 0; j < nsub; ++j) {
    const int sc0 = d > 0.0f ? clamp_int(round_half_even(fits[j].scale / d), 0, smax) : 0;
    const int m0 = dmin > 0.0f ? clamp_int(round_half_even(fits[j].offset / dmin), 0, smax) : 0;
    double best_err = INFINITY;
    for (int ds = -1; ds <= 1; ++ds) {
      for (int dm = -1; dm <= 1; ++dm) {
        const int s = clamp_int(sc0 + ds, 0, smax);
        const int m = clamp_int(m0 + dm, 0, smax);
        int trial[32];
        const float dl = d * static_cast<float>(s);
        const float ml = dmin * static_cast<float>(m);
        const double err = assign_affine(x + j * len, len, nmax, dl, ml, trial);
        if (err < best_err) {
          best_err = err;
          sc[j] = s;
          mn[j] = m;
          std::copy(trial, trial + len, q + j * len);
        }
      }
    }
    total += best_err;
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
  Fit fits[16];
  float max_scale = 0.0f;
  float max_offset = 0.0f;
  for (int j = 0; j < nsub; ++j) {
    fits[j] = fit_affine(x + j * len, len, nmax);
    max_scale = std::max(max_scale, fits[j].scale);
    max_offset = std::max(max_offset, fits[j].offset);
  }
  double best_err = INFINITY;
  int tsc[16], tmn[16], tq[kQK_K];
  for (int ts = 0; ts < 4; ++ts) {
    for (int tm = 0; tm < 4; ++tm) {
      const uint16_t dh = f32_to_f16(max_scale / static_cast<float>(smax - ts));
      const uint16_t mh = f32_to_f16(max_offset / static_cast<float>(smax - tm));
      const double err = assign_affine_superblock(x, fits, nsub, len, nmax, smax, f16_to_f32(dh),
                                                  f16_to_f32(mh), tsc, tmn, tq);
      if (err < best_err) {
        best_err = err;
        *d_out = dh;
        *dmin_out = mh;
        std::copy(tsc, tsc + nsub, sc);
        std::copy(tmn, tmn + nsub, mn);
        std::copy(tq, tq + nsub * len, q);
      }
    }
  }
}

// Stage 2 for the symmetric formats for one f16 d: signed sub-block scales in
// [-smax, smax - 1]. Returns the super-block's squared error.
double assign_symmetric_superblock(const float* x, const Fit* fits, int nsub, int len, int nmax,
                                   int smax, float d, int* sc, int* q) {
  double total = 0.0;
  for (int j = 0; j < nsub; ++j) {
    const int s0 = d != 0.0f ? clamp_int(round_half_even(fits[j].scale / d), -smax, smax - 1) : 0;
    double best_err = INFINITY;
    for (int ds = -1; ds <= 1; ++ds) {
      const int s = clamp_int(s0 + ds, -smax, smax - 1);
      int trial[32];
      const double err = assign_symmetric(x + j * len, len, nmax, d * static_cast<float>(s), trial);
      if (err < best_err) {
        best_err = err;
        sc[j] = s;
        std::copy(trial, trial + len, q + j * len);
      }
    }
    total += best_err;
  }
  return total;
}

// Stage 2 for the symmetric formats; candidate divisors as in the affine case.
void quantize_symmetric_superblock(const float* x, int nsub, int len, int nmax, int smax,
                                   uint16_t* d_out, int* sc, int* q) {
  Fit fits[16];
  float max = 0.0f;
  for (int j = 0; j < nsub; ++j) {
    fits[j] = fit_symmetric(x + j * len, len, nmax);
    if (std::fabs(fits[j].scale) > std::fabs(max)) max = fits[j].scale;
  }
  // Divisors just below smax, plus coarse ones: when max / smax falls into the
  // f16 subnormal range, d keeps more significant bits if the sub-block scales
  // use a smaller integer range (matters for small weights in Q6_K).
  int divisors[16];
  int count = 0;
  for (int t = 0; t < 8; ++t) divisors[count++] = smax - t;
  for (int k = smax / 2; k >= 1; k /= 2) divisors[count++] = k;
  double best_err = INFINITY;
  int tsc[16], tq[kQK_K];
  for (int t = 0; t < count; ++t) {
    const uint16_t dh = f32_to_f16(max / static_cast<float>(-divisors[t]));
    const double err =
        assign_symmetric_superblock(x, fits, nsub, len, nmax, smax, f16_to_f32(dh), tsc, tq);
    if (err < best_err) {
      best_err = err;
      *d_out = dh;
      std::copy(tsc, tsc + nsub, sc);
      std::copy(tq, tq + nsub * len, q);
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
