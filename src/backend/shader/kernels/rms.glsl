// The RMS scale of one row, 1 / sqrt(mean(x[base .. base + dim)^2) + eps),
// computed by the whole workgroup in one fixed order: invocation i sums the
// squares of elements i, i + WG, ... in turn, each subgroup adds its lanes
// (subgroupAdd), and the subgroups' sums are added in subgroup order. Every
// invocation gets the result. rms_norm.comp and matmul.comp's input norm both
// use it, so a norm folded into a matmul has the bits of the separate one.
//
// The includer declares `float x[]` (the rows) and `shared float
// partial_sums[]` with at least one slot per subgroup. Contains a barrier:
// call it from uniform control flow; the caller puts a barrier between two
// calls (the second one's slot writes must wait for the first one's reads).
float rms_scale(uint base, uint dim, float eps, bool row_ok) {
  float sum_sq = 0.0;
  if (row_ok) {
    for (uint i = gl_LocalInvocationIndex; i < dim; i += kWorkgroupInvocations) {
      const float v = x[base + i];
      sum_sq += v * v;
    }
  }
  sum_sq = subgroupAdd(sum_sq);
  if (subgroupElect()) partial_sums[gl_SubgroupID] = sum_sq;
  barrier();
  float total = 0.0;
  for (uint s = 0; s < gl_NumSubgroups; ++s) total += partial_sums[s];
  return 1.0 / sqrt(total / float(dim) + eps);
}
