// y[r][i] = x[r][i] / sqrt(mean(x[r]^2) + eps) * (w[i] or 1), f32.
// One workgroup per row (folded over x and y); y may alias x (in place):
// every element is read in both passes by the invocation that writes it.
#version 450
#include "common.glsl"
#include "kernel_args.h"

layout(push_constant) uniform Push { RmsNormArgs args; };
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

shared float partial_sums[kWorkgroupInvocations];  // one slot per subgroup, worst case

void main() {
  const uint row = folded_group_index();
  const bool row_ok = row < args.n_rows;
  const uint base = row * args.dim;
  const uint lid = gl_LocalInvocationIndex;

  float sum_sq = 0.0;
  if (row_ok) {
    for (uint i = lid; i < args.dim; i += kWorkgroupInvocations) {
      const float v = x[base + i];
      sum_sq += v * v;
    }
  }
  sum_sq = subgroupAdd(sum_sq);
  if (subgroupElect()) partial_sums[gl_SubgroupID] = sum_sq;
  barrier();
  float total = 0.0;
  for (uint s = 0; s < gl_NumSubgroups; ++s) total += partial_sums[s];
  const float scale = 1.0 / sqrt(total / float(args.dim) + args.eps);

  if (row_ok) {
    for (uint i = lid; i < args.dim; i += kWorkgroupInvocations) {
      float v = x[base + i] * scale;
      if (args.has_weight != 0u) v *= w[i];
      y[base + i] = v;
    }
  }
}
