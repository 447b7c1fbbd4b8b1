// Causal multi-head attention over the KV cache (backend/cpu/ops.h's
// attention, every key read from the cache): query t, head h reads kv head
// h / (n_head / n_head_kv) and keys j in [lo, hi], hi = positions[t], lo =
// hi + 1 - sliding_window (or 0); key j lives in cache row j, or (paged)
// page_table[seq_slots[t] * max_pages + j / page_size] * page_size +
// j % page_size. out = softmax(scale * q.K) V, an online softmax in f32
// (running max m, sum s; the V sum rescaled by exp(m_old - m_new) per tile).
// A position, slot or page outside the cache or tables is skipped and
// reported as MINFER_ERR_POSITION; a query that sees no key gets zeros.
//
// One workgroup of MINFER_ATTENTION_TILE invocations per (token, head),
// folded over x and y. Keys go in tiles of MINFER_ATTENTION_TILE: invocation
// i scores key lo + tile * TILE + i (a whole head_dim dot), the tile max
// meets through subgroupMax and one shared slot per subgroup, the weights p
// and cache rows go to shared memory, then invocation i accumulates output
// dims (2i, 2i + 1) over the tile's keys. Two barriers per tile.
//
// Loop iterations per invocation (docs/VULKAN.md rule 7, lavapipe's cap of
// 65535 for all loops together): 2 (query load) + per tile [head_dim/4 (K
// dot; Q8_0: head_dim/32 * 9) + TILE/subgroup_size (the subgroup slots) +
// TILE/4 (V sum)]: at head_dim 256 and subgroup 8, <= 2 + 120 *
// ceil(keys / 128); 4096 keys take <= 3842, the cap is reached past ~69k
// keys (encode_attention refuses such shapes on CPU devices).
#version 450
#include "common.glsl"
#include "kernel_args.h"
#define MINFER_ERR_BINDING 7
#include "errors.glsl"

layout(push_constant) uniform Push { AttentionArgs args; };
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer Positions { int positions[]; };
layout(std430, binding = 2) readonly buffer Slots { int seq_slots[]; };
layout(std430, binding = 3) readonly buffer Pages { int page_table[]; };
layout(std430, binding = 6) writeonly buffer Out { float out_values[]; };

const uint kTile = MINFER_ATTENTION_TILE;
const float kMasked = -3.0e38;

shared float q_s[2u * kTile];  // the query head (head_dim <= 2 * TILE)
shared float p_s[kTile];       // weights of the tile's keys (0: masked)
shared int row_s[kTile];       // their cache rows (-1: masked)
shared float max_s[kWorkgroupInvocations];  // one slot per subgroup

#include "attention_cache.glsl"

// The cache row of position j of the query's sequence, or -1 (a bad page,
// reported).
int cache_row(uint j, uint slot) {
  if (args.page_size == 0u) return int(j);
  const int page = page_table[slot * args.max_pages + j / args.page_size];
  const uint n_pages = args.n_ctx / args.page_size;
  if (page < 0 || uint(page) >= n_pages) {
    report_error(MINFER_ERR_POSITION, uint(page), n_pages);
    return -1;
  }
  return page * int(args.page_size) + int(j % args.page_size);
}

// The query's visible keys [lo, hi] and its page-table row; false (and
// reported) when its position or slot is outside the cache or the tables.
bool query_range(uint t, out uint lo, out uint hi, out uint slot) {
  lo = 0u;
  hi = 0u;
  slot = 0u;
  if (t >= args.n_tokens) return false;
  const bool paged = args.page_size != 0u;
  const uint positions_max = paged ? args.max_pages * args.page_size : args.n_ctx;
  const int pos = positions[t];
  if (pos < 0 || uint(pos) >= positions_max) {
    if (gl_LocalInvocationIndex == 0u) report_error(MINFER_ERR_POSITION, uint(pos), positions_max);
    return false;
  }
  if (paged) {
    const int s = seq_slots[t];
    if (s < 0 || uint(s) >= args.n_slots) {
      if (gl_LocalInvocationIndex == 0u) report_error(MINFER_ERR_POSITION, uint(s), args.n_slots);
      return false;
    }
    slot = uint(s);
  }
  hi = uint(pos);
  const uint w = args.sliding_window;
  lo = (w != 0u && hi + 1u > w) ? hi + 1u - w : 0u;
  return true;
}

void accumulate(uint k, uint e_head, bool pair_ok, inout vec2 acc, inout float sum) {
  const int row = row_s[k];
  if (row < 0) return;
  const float p = p_s[k];
  sum += p;
  if (pair_ok) acc += p * v_pair(uint(row) * args.n_head_kv * args.head_dim + e_head);
}

void main() {
  const uint group = folded_group_index();
  const uint t = group / args.n_head, h = group % args.n_head;
  const uint lid = gl_LocalInvocationIndex;
  const uint hd = args.head_dim;
  const uint kvh = h / (args.n_head / args.n_head_kv);
  const uint row_len = args.n_head_kv * hd;
  uint lo, hi, slot;
  const bool ok = query_range(t, lo, hi, slot);
  const uint n_tiles = ok ? (hi - lo) / kTile + 1u : 0u;
  const uint q0 = (t * args.n_head + h) * hd;
  for (uint i = lid; i < hd; i += kWorkgroupInvocations) q_s[i] = ok ? q[q0 + i] : 0.0;
  barrier();

  const bool pair_ok = 2u * lid < hd;
  float m = kMasked, sum = 0.0;
  vec2 acc = vec2(0.0);
  for (uint tile = 0u; tile < n_tiles; ++tile) {
    const uint first = lo + tile * kTile;
    const uint j = first + lid;
    int row = -1;
    float score = kMasked;
    if (j <= hi) row = cache_row(j, slot);
    if (row >= 0) score = args.scale * k_dot(uint(row) * row_len + kvh * hd);
    const float tile_max = subgroupMax(score);
    if (subgroupElect()) max_s[gl_SubgroupID] = tile_max;
    barrier();
    float m_new = m;
    for (uint g = 0u; g < gl_NumSubgroups; ++g) m_new = max(m_new, max_s[g]);
    p_s[lid] = row >= 0 ? exp(score - m_new) : 0.0;
    row_s[lid] = row;
    barrier();
    const float correction = exp(m - m_new);
    acc *= correction;
    sum *= correction;
    m = m_new;
    const uint n_keys = min(kTile, hi + 1u - first);
    const uint e_head = kvh * hd + 2u * lid;
    for (uint k = 0u; k < n_keys; k += 4u) {
      accumulate(k, e_head, pair_ok, acc, sum);
      if (k + 1u < n_keys) accumulate(k + 1u, e_head, pair_ok, acc, sum);
      if (k + 2u < n_keys) accumulate(k + 2u, e_head, pair_ok, acc, sum);
      if (k + 3u < n_keys) accumulate(k + 3u, e_head, pair_ok, acc, sum);
    }
  }
  if (ok && pair_ok) {
    const vec2 result = sum > 0.0 ? acc / sum : vec2(0.0);
    out_values[q0 + 2u * lid] = result.x;
    out_values[q0 + 2u * lid + 1u] = result.y;
  }
}
