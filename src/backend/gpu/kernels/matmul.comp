// y[t][r] = dot(W[r], x[t]): W [out_dim][in_dim] in the variant's weight type
// (weights.glsl), x [n_tokens][in_dim] f32, y [n_tokens][out_dim] f32.
// One workgroup per row r (folded over x and y) and per
// MINFER_MATMUL_TOKENS_PER_GROUP tokens (z): each invocation decodes units
// of the row strided by the workgroup size, once for all its tokens, and
// accumulates per token; the sums meet through subgroupAdd and one shared
// slot per subgroup. The order of the additions is fixed by the shapes alone.
#version 450
#include "common.glsl"
#include "kernel_args.h"

layout(push_constant) uniform Push { MatmulArgs args; };
#include "weights.glsl"
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

const uint kTokens = MINFER_MATMUL_TOKENS_PER_GROUP;
shared float partial_sums[kTokens * kWorkgroupInvocations];

void main() {
  const uint row = folded_group_index();
  const uint t0 = gl_WorkGroupID.z * kTokens;
  const uint lid = gl_LocalInvocationIndex;
  const bool row_ok = row < args.out_dim;

  float acc[kTokens];
  for (uint t = 0; t < kTokens; ++t) acc[t] = 0.0;
  if (row_ok) {
    const uint n_units = units_per_row(args.in_dim);
    for (uint u = lid; u < n_units; u += kWorkgroupInvocations) {
      float wv[kUnitElements];
      uint k[kUnitElements];
      decode_unit(row, u, args.in_dim, wv, k);
      for (uint t = 0; t < kTokens; ++t) {
        if (t0 + t >= args.n_tokens) break;
        const uint xrow = (t0 + t) * args.in_dim;
        float s = 0.0;
        for (uint j = 0; j < kUnitElements; ++j) {
          if (k[j] < args.in_dim) s += wv[j] * x[xrow + k[j]];
        }
        acc[t] += s;
      }
    }
  }
  for (uint t = 0; t < kTokens; ++t) {
    const float s = subgroupAdd(acc[t]);
    if (subgroupElect()) partial_sums[t * kWorkgroupInvocations + gl_SubgroupID] = s;
  }
  barrier();
  if (lid < kTokens && row_ok && t0 + lid < args.n_tokens) {
    float total = 0.0;
    for (uint s = 0; s < gl_NumSubgroups; ++s) total += partial_sums[lid * kWorkgroupInvocations + s];
    y[(t0 + lid) * args.out_dim + row] = total;
  }
}
