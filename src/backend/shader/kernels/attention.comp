// Causal multi-head attention over the KV cache (backend/cpu/ops.h's
// attention, every key read from the cache): query t, head h reads kv head
// h / (n_head / n_head_kv) and keys j in [lo, hi], hi = positions[t], lo =
// hi + 1 - sliding_window (or 0); key j lives in cache row j, or (paged)
// page_table[seq_slots[t] * max_pages + j / page_size] * page_size +
// j % page_size. out = softmax(scale * q.K) V, an online softmax in f32.
// A position, slot or page outside the cache or tables is skipped and
// reported as MINFER_ERR_POSITION; a query that sees no key gets zeros.
// With has_sinks, head h's sink logit sinks[h] joins the denominator only
// (fold_sink, once per query after the subgroups are merged).
//
// One workgroup of MINFER_ATTENTION_WG invocations per (token, head), folded
// over x and y. Its keys go in chunks of one subgroup's size S; subgroup g
// takes chunks g, g + n_subgroups, ... and keeps its own softmax state (max
// m, sum s, V sums), so the key loop has no workgroup barrier: per chunk,
// lane i scores key first + i (a whole head_dim dot against the query in
// shared memory; scoring each key with the whole subgroup instead, rows read
// coalesced and the dot through subgroupAdd, was slower: docs/PERFORMANCE.md,
// "Constants and their measurements"), the chunk max meets through
// subgroupMax, the weights and cache rows go to the subgroup's slots of
// shared memory (subgroupBarrier),
// and the lanes sum V: lane = (key group, lane of the key) with
// lanes_per_key = min(S, head_dim / 4) lanes on one key's row, each holding
// groups of four dims (quads) kl, kl + lanes_per_key, ...; the key groups
// take the chunk's keys in turn, MINFER_ATTENTION_BATCH at a time. At the
// end one barrier exchanges the subgroups' (m, s), each (subgroup, key
// group) partial is scaled to the common max and the partials are added in
// a fixed order through MINFER_ATTENTION_COMBINE shared floats (several
// passes when they do not fit). How keys are split depends on the query's
// own [lo, hi] and the device's subgroup size only: a query's result is the
// same whatever else is in the batch.
//
// Subgroups are assumed full and numbered densely (slot gl_SubgroupID * S +
// lane < WG: WG is a multiple of every subgroup size 8..64); S >= 8 keeps a
// lane's quads within MINFER_ATTENTION_MAX_QUADS at head_dim 256 (the
// encoder refuses smaller subgroups where they would not).
//
// Loop iterations per invocation (docs/VULKAN.md rule 7, lavapipe's cap of
// 65535 for all loops together): encode_attention.cpp's attention_loop_bound
// counts them (every [[unroll]] loop counted as a loop, in case it is not).
#version 450
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "kernel_args.h"
#define MINFER_ERR_BINDING 7
#include "errors.glsl"
#include "attention_numerics.glsl"

layout(push_constant) uniform Push { AttentionArgs args; };
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer Positions { int positions[]; };
layout(std430, binding = 2) readonly buffer Slots { int seq_slots[]; };
layout(std430, binding = 3) readonly buffer Pages { int page_table[]; };
layout(std430, binding = 6) writeonly buffer Out { float out_values[]; };
layout(std430, binding = 8) readonly buffer Sinks { float sinks[]; };

const uint kMaxQuads = MINFER_ATTENTION_MAX_QUADS;
const uint kBatch = MINFER_ATTENTION_BATCH;
const uint kCombine = MINFER_ATTENTION_COMBINE;
const float kMasked = -3.0e38;

shared float q_s[MINFER_ATTENTION_MAX_HEAD_DIM];  // the query head
shared float p_s[kWorkgroupInvocations];          // per lane slot: its key's weight
shared int row_s[kWorkgroupInvocations];          // and cache row (-1: masked)
shared float m_s[kWorkgroupInvocations];          // per subgroup: its max
shared float sum_s[kWorkgroupInvocations];        // and its sum of weights
shared float combine_s[kCombine];                 // scaled partial V sums

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

void main() {
  const uint group = folded_group_index();
  const uint t = group / args.n_head, h = group % args.n_head;
  const uint lid = gl_LocalInvocationIndex;
  const uint hd = args.head_dim;
  const uint row_len = args.n_head_kv * hd;
  const uint head0 = (h / (args.n_head / args.n_head_kv)) * hd;  // the kv head's first element
  uint lo, hi, slot;
  const bool ok = query_range(t, lo, hi, slot);
  const uint q0 = (t * args.n_head + h) * hd;
  for (uint i = lid; i < hd; i += kWorkgroupInvocations) q_s[i] = ok ? q[q0 + i] : 0.0;
  barrier();

  const uint sg_size = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
  const uint sg = gl_SubgroupID, n_sg = gl_NumSubgroups;
  const uint my_slot = sg * sg_size + lane;
  const uint n_quads = (hd + 3u) / 4u;
  const uint lanes_per_key = min(sg_size, n_quads);
  const uint key_groups = sg_size / lanes_per_key;
  const uint kg = lane / lanes_per_key, kl = lane % lanes_per_key;
  const bool v_lane = kg < key_groups;
  const uint n_chunks = ok ? (hi - lo) / sg_size + 1u : 0u;

  float m = kMasked, sum = 0.0;
  vec4 acc[kMaxQuads];
  [[unroll]] for (uint i = 0u; i < kMaxQuads; ++i) acc[i] = vec4(0.0);
  for (uint c = sg; c < n_chunks; c += n_sg) {
    const uint first = lo + c * sg_size;
    const uint j = first + lane;
    int row = -1;
    float score = kMasked;
    if (j <= hi) row = cache_row(j, slot);
    if (row >= 0) score = args.scale * k_dot(uint(row) * row_len + head0);
    const float m_new = max(m, subgroupMax(score));
    const float p = row >= 0 ? exp(score - m_new) : 0.0;
    const float correction = exp(m - m_new);
    m = m_new;
    sum = sum * correction + p;
    [[unroll]] for (uint i = 0u; i < kMaxQuads; ++i) acc[i] *= correction;
    p_s[my_slot] = p;
    row_s[my_slot] = row;
    subgroupBarrier();

    const uint n_keys = min(sg_size, hi + 1u - first);
    const uint base = sg * sg_size;
    if (v_lane) {
      for (uint k0 = kg; k0 < n_keys; k0 += kBatch * key_groups) {
        for (uint b = 0u; b < kBatch; ++b) {
          const uint k = k0 + b * key_groups;
          const uint at = base + min(k, sg_size - 1u);
          const int r = k < n_keys ? row_s[at] : -1;
          const float w = p_s[at];
          const uint e_key = uint(max(r, 0)) * row_len + head0;
          [[unroll]] for (uint i = 0u; i < kMaxQuads; ++i) {
            const uint e = 4u * (kl + i * lanes_per_key);
            if (r >= 0 && e < hd) acc[i] += w * v_quad(e_key + e, min(4u, hd - e));
          }
        }
      }
    }
    subgroupBarrier();  // the slots are rewritten by the next chunk
  }

  // Merge the subgroups: a common max, the total weight, then the partial V
  // sums scaled to that max and added in (subgroup, key group) order.
  const float sg_sum = subgroupAdd(sum);
  if (subgroupElect()) {
    m_s[sg] = m;
    sum_s[sg] = sg_sum;
  }
  barrier();
  float m_all = kMasked;
  for (uint g = 0u; g < n_sg; ++g) m_all = max(m_all, m_s[g]);
  float total_weight = 0.0;
  for (uint g = 0u; g < n_sg; ++g) total_weight += exp(m_s[g] - m_all) * sum_s[g];
  const float own_scale = exp(m - m_all);
  const uint n_partials = n_sg * key_groups;
  const uint per_pass = kCombine / hd;
  const uint partial = sg * key_groups + kg;
  float total = 0.0;
  for (uint first = 0u; first < n_partials; first += per_pass) {
    if (first > 0u) barrier();  // the last pass's reads are done
    if (v_lane && partial >= first && partial < first + per_pass) {
      const uint at = (partial - first) * hd;
      [[unroll]] for (uint i = 0u; i < kMaxQuads; ++i) {
        const uint e = 4u * (kl + i * lanes_per_key);
        const vec4 v = own_scale * acc[i];
        if (e < hd) {
          combine_s[at + e] = v.x;
          combine_s[at + e + 1u] = v.y;
        }
        if (e + 2u < hd) {
          combine_s[at + e + 2u] = v.z;
          combine_s[at + e + 3u] = v.w;
        }
      }
    }
    barrier();
    const uint n = min(per_pass, n_partials - first);
    if (lid < hd) {
      for (uint i = 0u; i < n; ++i) total += combine_s[i * hd + lid];
    }
  }
  if (args.has_sinks != 0u) total *= fold_sink(sinks[h], m_all, total_weight);
  if (ok && lid < hd) out_values[q0 + lid] = total_weight > 0.0 ? total / total_weight : 0.0;
}
