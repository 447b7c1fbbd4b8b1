// One RoPE pair, shared by rope.comp and rope_store.comp so that both give
// the CPU's bits (backend/cpu/norm_rope.cpp): for pair i of a head, theta =
// pos * theta_scale^i (the same running f32 product), extrap = theta /
// freq_factors[i], t = freq_scale * extrap, and (x0, x1) becomes (x0 cos t -
// x1 sin t, x0 sin t + x1 cos t). Pairs are (2i, 2i + 1) or, NeoX, (i, i +
// n_rot/2). With YaRN (ext_factor != 0) t blends into extrap by the pair's
// ramp (yarn_angle, ggml's rope_yarn) and cos and sin are multiplied by
// mscale; with ext_factor 0 none of that runs, so plain RoPE keeps its bits.
//
// The includer has `args` with n_rot, neox, has_freq_factors, freq_scale,
// theta_scale, ext_factor, corr_low, corr_high and mscale, a `float
// freq_factors[]` binding, includes attention_numerics.glsl, and defines
// ROPE_LOAD(i) and ROPE_STORE(i, v) for the elements (absolute indices).
// Loops: pair i runs i < 128 iterations of the theta product.

// YaRN's angle of pair i (the CPU's yarn_theta, in its float steps): the
// ramp is 1 below corr_low (keep the trained frequency, extrap) and 0 from
// corr_high (interpolate), linear between. The ramp's clamp is written as
// comparisons so a NaN passes as through std::clamp; div_rn makes the
// division the CPU's.
float yarn_angle(float interp, float extrap, uint i) {
  const float y = div_rn(float(i) - args.corr_low, max(0.001, args.corr_high - args.corr_low));
  const float clamped = y < 0.0 ? 0.0 : (1.0 < y ? 1.0 : y);
  precise float ramp = 1.0 - clamped;
  precise float mix = ramp * args.ext_factor;
  precise float t = interp * (1.0 - mix) + extrap * mix;
  return t;
}

void rotate_pair(uint base, uint i, float pos) {
  const uint half_rot = args.n_rot / 2u;
  precise float theta = pos;
  for (uint k = 0u; k < i; ++k) theta = theta * args.theta_scale;
  const float ff = args.has_freq_factors != 0u ? freq_factors[i] : 1.0;
  const float extrap = div_rn(theta, ff);
  precise float angle = args.freq_scale * extrap;
  const bool yarn = args.ext_factor != 0.0;
  if (yarn) angle = yarn_angle(angle, extrap, i);
  const float r = reduce_angle(angle);
  float c = cos(r), s = sin(r);
  if (yarn) {
    c = c * args.mscale;
    s = s * args.mscale;
  }
  const uint i0 = base + (args.neox != 0u ? i : 2u * i);
  const uint i1 = base + (args.neox != 0u ? i + half_rot : 2u * i + 1u);
  const float x0 = ROPE_LOAD(i0), x1 = ROPE_LOAD(i1);
  precise float y0 = x0 * c - x1 * s;
  precise float y1 = x0 * s + x1 * c;
  ROPE_STORE(i0, y0);
  ROPE_STORE(i1, y1);
}
