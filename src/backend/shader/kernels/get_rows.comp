// out[i][:] = dequant(W[ids[i]]) * scale for i < n_ids (the embedding
// lookup): W [n_rows][row_len] in the variant's weight type (weights.glsl),
// ids i32 [n_ids], out f32 [n_ids][row_len]. Each invocation decodes one unit
// (8 elements) of one output row: workgroup g (folded over x and y) serves
// row g / groups_per_row, its units from (g % groups_per_row) * WG on, so no
// invocation loops however long the rows or the table. An id outside
// [0, n_rows) writes nothing for its row and is reported through the error
// words (MINFER_ERR_ROW_ID, value = the id, bound = n_rows) by the dispatch
// whose range starts the table. W's binding may hold only rows [first_row,
// first_row + range_rows) of a table past one binding: a row outside them
// is another dispatch's. No barrier: an invocation with nothing to do
// returns.
#version 450
#include "common.glsl"
#include "kernel_args.h"

layout(push_constant) uniform Push { GetRowsArgs args; };
#define MINFER_ERR_BINDING 3
#include "errors.glsl"
#include "weights.glsl"
layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
layout(std430, binding = 2) writeonly buffer Out { float out_rows[]; };

void main() {
  const uint units = units_per_row(args.row_len);
  const uint groups_per_row = (units + kWorkgroupInvocations - 1u) / kWorkgroupInvocations;
  const uint g = folded_group_index();
  const uint i = g / groups_per_row;
  const uint u = (g % groups_per_row) * kWorkgroupInvocations + gl_LocalInvocationIndex;
  if (i >= args.n_ids || u >= units) return;
  const int id = ids[i];
  if (id < 0 || uint(id) >= args.n_rows) {
    if (u == 0u && args.first_row == 0u) report_error(MINFER_ERR_ROW_ID, uint(id), args.n_rows);
    return;
  }
  if (uint(id) < args.first_row || uint(id) - args.first_row >= args.range_rows) return;
  float wv[kUnitElements];
  uint k[kUnitElements];
  decode_unit(uint(id) - args.first_row, u, args.row_len, wv, k);
  for (uint j = 0; j < kUnitElements; ++j) {
    if (k[j] < args.row_len) {
      precise float v = wv[j] * args.scale;
      out_rows[i * args.row_len + k[j]] = v;
    }
  }
}
