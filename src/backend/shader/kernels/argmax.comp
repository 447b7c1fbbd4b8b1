// out[r] (i32) = the index of the first largest element of row r of x
// [n_rows][row_len] f32, as the CPU backend's argmax: an element wins only
// by being greater than the best so far (which starts at -inf), so NaN never
// wins, ties go to the smallest index and a row of -inf / NaN gives -1.
// One workgroup per row (folded over x and y); each invocation scans
// elements lid, lid + WG_X, ... keeping its first largest, then the
// subgroup's best value (subgroupMax) and, among the lanes holding it, the
// smallest index (subgroupMin); one shared slot per subgroup, combined in
// subgroup order by invocation 0.
#version 450
#include "common.glsl"
#include "kernel_args.h"

layout(push_constant) uniform Push { ArgmaxArgs args; };
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { int out_ids[]; };

const uint kNone = 0xffffffffu;  // no element beat -inf; written as -1

shared float best_values[kWorkgroupInvocations];  // one slot per subgroup, worst case
shared uint best_ids[kWorkgroupInvocations];

// NaN by its bits: comparisons with NaN are not reliable without the
// float-controls NaN guarantees.
bool is_nan(float v) {
  return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u;
}

bool beats(float v, uint id, float best_v, uint best_id) {
  return v > best_v || (v == best_v && id < best_id);
}

void main() {
  const uint row = folded_group_index();
  const bool row_ok = row < args.n_rows;
  const uint base = row * args.row_len;
  const uint lid = gl_LocalInvocationIndex;

  float best_v = uintBitsToFloat(0xff800000u);  // -inf
  uint best_id = kNone;
  if (row_ok) {
    for (uint i = lid; i < args.row_len; i += kWorkgroupInvocations) {
      const float v = x[base + i];
      if (!is_nan(v) && v > best_v) {
        best_v = v;
        best_id = i;
      }
    }
  }
  const float sub_v = subgroupMax(best_v);
  const uint sub_id = subgroupMin(best_v == sub_v ? best_id : kNone);
  if (subgroupElect()) {
    best_values[gl_SubgroupID] = sub_v;
    best_ids[gl_SubgroupID] = sub_id;
  }
  barrier();
  if (row_ok && lid == 0) {
    float v = best_values[0];
    uint id = best_ids[0];
    for (uint s = 1; s < gl_NumSubgroups; ++s) {
      if (beats(best_values[s], best_ids[s], v, id)) {
        v = best_values[s];
        id = best_ids[s];
      }
    }
    out_ids[row] = int(id);
  }
}
