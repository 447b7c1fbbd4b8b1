// What moe_topk.comp and moe_weights.comp share: one workgroup per token,
// the token's n_expert router logits held in registers, kPerInvocation per
// invocation (invocation l holds experts l, l + WG, ...), and workgroup-wide
// reductions that every invocation gets the same result of: each subgroup
// reduces its lanes, then every invocation combines the subgroups' slots in
// subgroup order, so the result depends on the subgroup size alone.
//
// The includer declares `float logits[]` and the push constants `args`
// (MoeRouteArgs). The reductions hold barriers: call them from uniform
// control flow.

const uint kPerInvocation = (MINFER_MOE_MAX_EXPERTS + WG_X - 1) / WG_X;
const uint kNoExpert = 0xffffffffu;

shared float route_slots[kWorkgroupInvocations];  // one per subgroup, worst case
shared uint route_ids[kWorkgroupInvocations];

// NaN by its bits: comparisons with NaN are not reliable without the
// float-controls NaN guarantees.
bool is_nan_f32(float v) {
  return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u;
}

float workgroup_max(float v) {
  const float s = subgroupMax(v);
  if (subgroupElect()) route_slots[gl_SubgroupID] = s;
  barrier();
  float m = route_slots[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) m = max(m, route_slots[i]);
  barrier();  // the slots are free again
  return m;
}

float workgroup_sum(float v) {
  const float s = subgroupAdd(v);
  if (subgroupElect()) route_slots[gl_SubgroupID] = s;
  barrier();
  float total = route_slots[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) total += route_slots[i];
  barrier();
  return total;
}

// The best (score, id) of the workgroup's candidates: the larger score, a
// tie to the lower id; an invocation without a candidate passes kNoExpert
// (its score is then ignored).
uint workgroup_best(float score, uint id) {
  const float v = id == kNoExpert ? uintBitsToFloat(0xff800000u) : score;  // -inf
  const float sub_v = subgroupMax(v);
  const uint sub_id = subgroupMin(v == sub_v ? id : kNoExpert);
  if (subgroupElect()) {
    route_slots[gl_SubgroupID] = sub_v;
    route_ids[gl_SubgroupID] = sub_id;
  }
  barrier();
  float best_v = route_slots[0];
  uint best = route_ids[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) {
    const bool better = route_ids[i] != kNoExpert &&
                        (best == kNoExpert || route_slots[i] > best_v ||
                         (route_slots[i] == best_v && route_ids[i] < best));
    if (better) {
      best_v = route_slots[i];
      best = route_ids[i];
    }
  }
  barrier();
  return best;
}

// This invocation's logits of token t (-inf past n_expert or a token past
// the end), and whether any of them is NaN.
bool load_logits(uint t, bool token_ok, out float mine[kPerInvocation]) {
  bool nan = false;
  for (uint k = 0; k < kPerInvocation; ++k) {
    const uint e = gl_LocalInvocationIndex + k * WG_X;
    mine[k] = uintBitsToFloat(0xff800000u);
    if (token_ok && e < args.n_expert) {
      mine[k] = logits[t * args.n_expert + e];
      nan = nan || is_nan_f32(mine[k]);
    }
  }
  return nan;
}

// The softmax statistics of the token's logits: p[e] = exp(l[e] - max) *
// inv_sum, as the CPU's softmax (backend/cpu/ops.h) computes it in f32.
struct SoftmaxStats {
  float max;
  float inv_sum;
};

SoftmaxStats softmax_stats(float mine[kPerInvocation]) {
  float m = uintBitsToFloat(0xff800000u);
  for (uint k = 0; k < kPerInvocation; ++k) m = max(m, mine[k]);
  SoftmaxStats s;
  s.max = workgroup_max(m);
  float sum = 0.0;
  for (uint k = 0; k < kPerInvocation; ++k) {
    if (gl_LocalInvocationIndex + k * WG_X < args.n_expert) sum += exp(mine[k] - s.max);
  }
  s.inv_sum = 1.0 / workgroup_sum(sum);
  return s;
}
