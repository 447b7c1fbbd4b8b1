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
#include "rms.glsl"

void main() {
  const uint row = folded_group_index();
  const bool row_ok = row < args.n_rows;
  const uint base = row * args.dim;
  const uint lid = gl_LocalInvocationIndex;

  const float scale = rms_scale(base, args.dim, args.eps, row_ok);

  if (row_ok) {
    for (uint i = lid; i < args.dim; i += kWorkgroupInvocations) {
      float v = x[base + i] * scale;
      if (args.has_weight != 0u) v *= w[i];
      y[base + i] = v;
    }
  }
}
