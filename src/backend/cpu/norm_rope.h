// RMSNorm and RoPE row kernels of the CPU backend (scalar and AVX2+FMA), for
// backend/cpu/ops.cpp.
//
// Contract (numerics as in ggml's CPU path, see ops.h):
//   - rms_sum_squares_f64: sum of the f32 products x[i] * x[i], each widened
//     to double. The scalar ISA adds them in order, as ggml does; AVX2 keeps
//     16 double partial sums (fixed order, then the n % 16 leftovers in order),
//     so the two differ only by double rounding (relative ~n * 2^-53).
//   - rms_scale_f32: y[i] = x[i] * s, or (x[i] * s) * w[i] when w is non-null;
//     bit-identical for every ISA (same f32 operations, no contraction).
//   - rope_cache_f32: cos/sin per rotated pair for one position; one scalar
//     code path for every ISA.
//   - rope_rotate_f32: y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c per pair,
//     unfused, bit-identical for every ISA; dims past n_rot are copied.
// y may alias x (in-place), but must not partially overlap it. Sizes are
// trusted (checked by the callers in ops.cpp). Threading: pure functions.
#pragma once

#include <cstdint>

#include "backend/cpu/ops.h"
#include "backend/cpu/vec_dot.h"

namespace minfer::cpu::detail {

double rms_sum_squares_f64(const float* x, int64_t n, Isa isa);
void rms_scale_f32(const float* x, const float* w, int64_t n, float s, float* y, Isa isa);
// ggml's scale 1 / sqrtf(mean + eps) with mean = (float)(sum / n).
float rms_inv_scale(double sum_squares, int64_t n, float eps);
// One row of rms_norm (ops.h).
void rms_norm_row_f32(const float* x, const float* w, int64_t n, float eps, float* y, Isa isa);

// cos_out/sin_out: [n_rot / 2]. ggml_rope_cache_init: theta starts at pos and
// is multiplied by powf(base, -2/n_rot) per pair; theta_extrap = theta /
// freq_factor and the angle is freq_scale * theta_extrap. With YaRN
// (yarn.ext_factor != 0) the angle is instead ggml's rope_yarn blend and
// cos/sin are multiplied by yarn.mscale (ops.h, RopeYarn); ext_factor 0
// gives exactly the plain cache.
void rope_cache_f32(float pos, int64_t n_rot, float freq_base, float freq_scale,
                    const float* freq_factors, float* cos_out, float* sin_out,
                    const RopeYarn& yarn = {});
// One head of head_dim values; pair i uses cos_v[i], sin_v[i].
void rope_rotate_f32(const float* x, int64_t head_dim, int64_t n_rot, RopeMode mode,
                     const float* cos_v, const float* sin_v, float* y, Isa isa);

}  // namespace minfer::cpu::detail
