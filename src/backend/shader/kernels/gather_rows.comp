// out[i][c] = x[ids[i]][c] * scale for i < n_out, c < row_len, f32 rows, i32
// ids; x holds n_src rows. An id outside [0, n_src) writes nothing for its
// row and reports MINFER_ERR_ROW_ID (value: the id's bits, bound: n_src)
// through the error words (errors.glsl, the last binding).
//
// Default: one invocation per output element, ceil(n_out * row_len / WG_X)
// workgroups folded over x and y; x and out must not overlap.
// IN_PLACE (out == x, one binding): one invocation per column c, ceil(row_len
// / WG_X) workgroups, each walking i = 0 .. n_out-1 in order. Every read and
// write of column c is then made by one invocation in program order, so the
// result is the CPU's in-order memmove for any ids: row i gets what row
// ids[i] holds once rows 0 .. i-1 are written. n_out is the per-invocation
// trip count (lavapipe ends loops after 65535 iterations; the encoder caps it).
#version 450
#include "common.glsl"
#include "kernel_args.h"

layout(push_constant) uniform Push { GatherRowsArgs args; };
#if defined(IN_PLACE)
layout(std430, binding = 0) buffer XOut { float rows[]; };
layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
#define MINFER_ERR_BINDING 2
#else
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
layout(std430, binding = 2) writeonly buffer Out { float out_values[]; };
#define MINFER_ERR_BINDING 3
#endif
#include "errors.glsl"

// Whether ids[i] names a row of x; reports it once (from column 0) if not.
bool row_ok(int id, uint c) {
  if (id >= 0 && uint(id) < args.n_src) return true;
  if (c == 0u) report_error(MINFER_ERR_ROW_ID, uint(id), args.n_src);
  return false;
}

void main() {
#if defined(IN_PLACE)
  const uint c = folded_group_index() * WG_X + gl_LocalInvocationID.x;
  if (c < args.row_len) {
    for (uint i = 0; i < args.n_out; ++i) {
      const int id = ids[i];
      if (row_ok(id, c)) rows[i * args.row_len + c] = rows[uint(id) * args.row_len + c] * args.scale;
    }
  }
#else
  const uint e = folded_group_index() * WG_X + gl_LocalInvocationID.x;
  if (e < args.n_out * args.row_len) {
    const uint i = e / args.row_len;
    const uint c = e - i * args.row_len;
    const int id = ids[i];
    if (row_ok(id, c)) out_values[e] = x[uint(id) * args.row_len + c] * args.scale;
  }
#endif
}
