// The KV cache store: row t of k and of v (f32 [n_tokens][row_len]) into
// cache row rows[t] of the K and V regions, each in its own type
// (MINFER_KV_*, stored as kv_store_row.glsl does). A row outside [0, n_ctx)
// is skipped and reported as MINFER_ERR_CACHE_ROW.
// One workgroup per token (folded over x and y), units of a row strided by
// the workgroup: an f32 element, an f16 pair (one word) or a Q8_0 block.
// Loops per invocation: ceil(row_len / 64) units, a Q8_0 unit ~75 iterations.
#version 450
#include "common.glsl"
#include "kernel_args.h"
#define MINFER_ERR_BINDING 5
#include "errors.glsl"
#include "attention_numerics.glsl"

layout(push_constant) uniform Push { KvStoreArgs args; };
layout(std430, binding = 0) readonly buffer K { float k_in[]; };
layout(std430, binding = 1) readonly buffer V { float v_in[]; };
layout(std430, binding = 2) readonly buffer Rows { int rows[]; };
layout(std430, binding = 3) buffer KCache { uint k_words[]; };
layout(std430, binding = 4) buffer VCache { uint v_words[]; };

float kv_source(bool to_v, uint i) {
  return to_v ? v_in[i] : k_in[i];
}
#include "kv_store_row.glsl"

void main() {
  const uint t = folded_group_index();
  if (t >= args.n_tokens) return;  // no barrier in this kernel
  const int row = rows[t];
  if (row < 0 || uint(row) >= args.n_ctx) {
    if (gl_LocalInvocationIndex == 0u) report_error(MINFER_ERR_CACHE_ROW, uint(row), args.n_ctx);
    return;
  }
  const uint n = args.row_len;
  const uint lid = gl_LocalInvocationIndex;
  store_units(false, args.k_type, t * n, uint(row) * n, n, lid, kWorkgroupInvocations);
  store_units(true, args.v_type, t * n, uint(row) * n, n, lid, kWorkgroupInvocations);
}
