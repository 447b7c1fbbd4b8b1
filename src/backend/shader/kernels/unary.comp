// out[i] = f(x[i]) for i < n, f32: x * scale (OP_SCALE), silu (OP_SILU) or
// gelu (OP_GELU), with the CPU backend's numerics (activation.glsl). One
// invocation per element; grid: ceil(n / WG_X) workgroups folded over x and
// y. out may alias x: each element is read and written by one invocation.
#version 450
#include "common.glsl"
#include "kernel_args.h"
#include "activation.glsl"

layout(push_constant) uniform Push { UnaryArgs args; };
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float out_values[]; };

void main() {
  const uint i = folded_group_index() * WG_X + gl_LocalInvocationID.x;
  if (i < args.n) {
    const float v = x[i];
#if defined(OP_SCALE)
    precise float y = v * args.scale;
#elif defined(OP_SILU)
    const float y = silu_f32(v);
#elif defined(OP_GELU)
    const float y = gelu_f32(v);
#else
#error "unary.comp needs OP_SCALE, OP_SILU or OP_GELU"
#endif
    out_values[i] = y;
  }
}
