// RoPE and the KV store of packed rows, the tail of a decode FusedQKV: row t
// of `packed` holds [q (n_head heads) | k (n_head_kv heads) | v (n_head_kv
// heads)] of head_dim f32 each (row_stride floats apart). Workgroup
// (t, g), folded over x and y, takes head g of token t's first n_head +
// n_head_kv heads: it rotates the head's pairs in place (rope_pair.glsl, the
// bits of rope.comp), and for a k head (g = n_head + j) then stores k head j
// and v head j at cache row positions[t] (kv_store_row.glsl, the bits of
// kv_store.comp). A position outside [0, n_ctx) stores nothing and is
// reported as MINFER_ERR_CACHE_ROW. Elements past n_rot stay as they are.
// The k head's rotated values are read back by other invocations of the
// workgroup: `packed` is coherent and a buffer barrier sits between.
#version 450
#include "common.glsl"
#include "kernel_args.h"
#define MINFER_ERR_BINDING 5
#include "errors.glsl"
#include "attention_numerics.glsl"

layout(push_constant) uniform Push { RopeStoreArgs args; };
layout(std430, binding = 0) coherent buffer Packed { float packed[]; };
layout(std430, binding = 1) readonly buffer Positions { int positions[]; };
layout(std430, binding = 2) readonly buffer FreqFactors { float freq_factors[]; };
layout(std430, binding = 3) buffer KCache { uint k_words[]; };
layout(std430, binding = 4) buffer VCache { uint v_words[]; };

#define ROPE_LOAD(i) packed[i]
#define ROPE_STORE(i, v) packed[i] = (v)
#include "rope_pair.glsl"

float kv_source(bool to_v, uint i) {
  return packed[i];
}
#include "kv_store_row.glsl"

void main() {
  const uint heads = args.n_head + args.n_head_kv;
  const uint id = folded_group_index();  // uniform in the workgroup
  const uint t = id / heads, g = id % heads;
  const bool here = t < args.n_tokens;
  const uint lid = gl_LocalInvocationIndex;
  const uint row = t * args.row_stride;
  const int pos = here ? positions[t] : 0;
  if (here) {
    for (uint i = lid; i < args.n_rot / 2u; i += kWorkgroupInvocations) {
      rotate_pair(row + g * args.head_dim, i, float(pos));
    }
  }
  memoryBarrierBuffer();
  barrier();
  if (!here || g < args.n_head) return;  // after the only barrier
  if (pos < 0 || uint(pos) >= args.n_ctx) {
    if (lid == 0u && g == args.n_head) report_error(MINFER_ERR_CACHE_ROW, uint(pos), args.n_ctx);
    return;
  }
  const uint j = g - args.n_head, hd = args.head_dim;
  const uint dst = (uint(pos) * args.n_head_kv + j) * hd;
  const uint k0 = row + g * hd, v0 = row + (heads + j) * hd;
  store_units(false, args.k_type, k0, dst, hd, lid, kWorkgroupInvocations);
  store_units(true, args.v_type, v0, dst, hd, lid, kWorkgroupInvocations);
}
