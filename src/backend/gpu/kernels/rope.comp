// Rotary position embedding, as the CPU's rope (backend/cpu/norm_rope.cpp):
// for pair i of a head, theta = pos * theta_scale^i (the same running f32
// product), t = freq_scale * (theta / freq_factors[i]), and the pair
// (x0, x1) becomes (x0 cos t - x1 sin t, x0 sin t + x1 cos t); elements past
// n_rot are copied. Pairs are (2i, 2i + 1) or, NeoX, (i, i + n_rot/2).
// One invocation per slot of a head (slot < n_rot/2: pair slot; else a copied
// element), flat over tokens and heads, workgroups folded over x and y. out
// may alias x (in place): every element is read and written by one invocation.
// Loops: slot i runs i < 128 iterations of the theta product.
#version 450
#include "common.glsl"
#include "kernel_args.h"
#include "attention_numerics.glsl"

layout(push_constant) uniform Push { RopeArgs args; };
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Positions { int positions[]; };
layout(std430, binding = 2) readonly buffer FreqFactors { float freq_factors[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

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
  const float x0 = x[i0], x1 = x[i1];
  precise float y0 = x0 * c - x1 * s;
  precise float y1 = x0 * s + x1 * c;
  y[i0] = y0;
  y[i1] = y1;
}

void main() {
  const uint half_rot = args.n_rot / 2u;
  const uint slots = half_rot + (args.head_dim - args.n_rot);
  const uint id = folded_group_index() * kWorkgroupInvocations + gl_LocalInvocationIndex;
  const uint head = id / slots, slot = id % slots;
  if (head >= args.n_tokens * args.n_heads) return;  // no barrier in this kernel
  const uint t = head / args.n_heads;
  const uint base = head * args.head_dim;
  if (slot < half_rot) {
    rotate_pair(base, slot, float(positions[t]));
  } else {
    const uint e = base + args.n_rot + (slot - half_rot);
    y[e] = x[e];
  }
}
