// out[i] = act(gate[i]) * up[i] for i < n, f32: act = silu (OP_SWIGLU) or
// gelu (OP_GEGLU), with the CPU backend's numerics (activation.glsl); or
// gpt-oss's clamped form (OP_SWIGLU_OAI, swiglu_oai_f32). One invocation per
// element; grid: ceil(n / WG_X) workgroups folded over x and y. out may alias
// gate or up: each element is read and written by one invocation.
#version 450
#include "common.glsl"
#include "kernel_args.h"
#include "activation.glsl"

layout(push_constant) uniform Push { GluArgs args; };
layout(std430, binding = 0) readonly buffer Gate { float gate[]; };
layout(std430, binding = 1) readonly buffer Up { float up[]; };
layout(std430, binding = 2) writeonly buffer Out { float out_values[]; };

void main() {
  const uint i = folded_group_index() * WG_X + gl_LocalInvocationID.x;
  if (i < args.n) {
#if defined(OP_SWIGLU_OAI)
    out_values[i] = swiglu_oai_f32(gate[i], up[i], args.alpha, args.limit);
#else
#if defined(OP_SWIGLU)
    const float a = silu_f32(gate[i]);
#elif defined(OP_GEGLU)
    const float a = gelu_f32(gate[i]);
#else
#error "glu.comp needs OP_SWIGLU, OP_GEGLU or OP_SWIGLU_OAI"
#endif
    precise float y = a * up[i];
    out_values[i] = y;
#endif
  }
}
