// out[i] = a[i] OP b[i % n_b], f32, one invocation per element.
// Grid: ceil(n / WG_X) workgroups, folded over x and y.
#version 450
#include "common.glsl"
#include "kernel_args.h"

layout(push_constant) uniform Push { ElementwiseArgs args; };
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Out { float out_values[]; };

void main() {
  const uint i = folded_group_index() * WG_X + gl_LocalInvocationID.x;
  if (i < args.n) {
    const float y = b[i % args.n_b];
#if defined(OP_ADD)
    out_values[i] = a[i] + y;
#elif defined(OP_MUL)
    out_values[i] = a[i] * y;
#else
#error "elementwise.comp needs OP_ADD or OP_MUL"
#endif
  }
}
