// One RoPE pair, shared by rope.comp and rope_store.comp so that both give
// the CPU's bits (backend/cpu/norm_rope.cpp): for pair i of a head, theta =
// pos * theta_scale^i (the same running f32 product), t = freq_scale *
// (theta / freq_factors[i]), and (x0, x1) becomes (x0 cos t - x1 sin t,
// x0 sin t + x1 cos t). Pairs are (2i, 2i + 1) or, NeoX, (i, i + n_rot/2).
//
// The includer has `args` with n_rot, neox, has_freq_factors, freq_scale and
// theta_scale, a `float freq_factors[]` binding, and defines ROPE_LOAD(i)
// and ROPE_STORE(i, v) for the elements (absolute indices). Loops: pair i
// runs i < 128 iterations of the theta product.
void rotate_pair(uint base, uint i, float pos) {
  const uint half_rot = args.n_rot / 2u;
  precise float theta = pos;
  for (uint k = 0u; k < i; ++k) theta = theta * args.theta_scale;
  const float ff = args.has_freq_factors != 0u ? freq_factors[i] : 1.0;
  precise float angle = args.freq_scale * div_rn(theta, ff);
  const float r = reduce_angle(angle);
  const float c = cos(r), s = sin(r);
  const uint i0 = base + (args.neox != 0u ? i : 2u * i);
  const uint i1 = base + (args.neox != 0u ? i + half_rot : 2u * i + 1u);
  const float x0 = ROPE_LOAD(i0), x1 = ROPE_LOAD(i1);
  precise float y0 = x0 * c - x1 * s;
  precise float y1 = x0 * s + x1 * c;
  ROPE_STORE(i0, y0);
  ROPE_STORE(i1, y1);
}
