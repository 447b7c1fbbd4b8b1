// Rotary position embedding, as the CPU's rope (rope_pair.glsl); elements
// past n_rot are copied.
// One invocation per slot of a head (slot < n_rot/2: pair slot; else a copied
// element), flat over tokens and heads, workgroups folded over x and y. out
// may alias x (in place): every element is read and written by one invocation.
#version 450
#include "common.glsl"
#include "kernel_args.h"
#include "attention_numerics.glsl"

layout(push_constant) uniform Push { RopeArgs args; };
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Positions { int positions[]; };
layout(std430, binding = 2) readonly buffer FreqFactors { float freq_factors[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

#define ROPE_LOAD(i) x[i]
#define ROPE_STORE(i, v) y[i] = (v)
#include "rope_pair.glsl"

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
