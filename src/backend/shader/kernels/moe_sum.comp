// out[t][d] = y[t*k][d] * w[t][0] + y[t*k+1][d] * w[t][1] + ... (k =
// n_used; kernel_args_moe.h's MoeSumArgs): each product rounded, then added
// in order of j, as the CPU's moe_sum (`precise` keeps the compiler from
// fusing a product into its sum). One invocation per output element.
#version 450
#include "common.glsl"
#include "kernel_args.h"

layout(push_constant) uniform Push { MoeSumArgs args; };
layout(std430, binding = 0) readonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) writeonly buffer Out { float out_rows[]; };

void main() {
  const uint i = folded_group_index() * kWorkgroupInvocations + gl_LocalInvocationIndex;
  if (i >= args.n_tokens * args.dim) return;  // no barrier in this kernel
  const uint t = i / args.dim, d = i % args.dim;
  const uint rows = t * args.n_used * args.dim + d, weights = t * args.n_used;
  precise float s = y[rows] * w[weights];
  for (uint j = 1; j < args.n_used; ++j) {
    precise float p = y[rows + j * args.dim] * w[weights + j];
    s = s + p;
  }
  out_rows[i] = s;
}
