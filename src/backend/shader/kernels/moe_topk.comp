// ids[t][j] (i32), j < n_used: the experts of token t by descending score, a
// tie going to the lower id (kernel_args_moe.h's MoeRouteArgs; the CPU's
// moe_topk). Scores are the softmax probabilities of the token's logits for
// the softmax gatings and the logits themselves for top-k softmax.
//
// One workgroup per token (moe_route.glsl): n_used rounds, each a
// workgroup-wide arg-max over the experts not yet taken (subgroupMax, then
// the lowest id among the lanes holding it), the winner then marked taken by
// the invocation that holds it. A token with a NaN logit is reported
// (MINFER_ERR_ROUTER_NAN) and gets ids 0..n_used-1, valid for the ops after.
#version 450
#include "common.glsl"
#include "kernel_args.h"

layout(push_constant) uniform Push { MoeRouteArgs args; };
layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) writeonly buffer Ids { int ids[]; };
#define MINFER_ERR_BINDING 2
#include "errors.glsl"
#include "moe_route.glsl"

void main() {
  const uint t = folded_group_index();
  const bool token_ok = t < args.n_tokens;  // uniform: the whole group stays for the barriers
  const uint lid = gl_LocalInvocationIndex;
  float mine[kPerInvocation];
  const bool nan = workgroup_max(load_logits(t, token_ok, mine) ? 1.0 : 0.0) > 0.0;
  if (nan) {
    if (token_ok && lid == 0u) report_error(MINFER_ERR_ROUTER_NAN, t, args.n_expert);
    for (uint j = lid; token_ok && j < args.n_used; j += WG_X) ids[t * args.n_used + j] = int(j);
    return;  // uniform across the workgroup: no barrier follows for anyone
  }
  if (args.gating != MINFER_MOE_GATING_TOPK_SOFTMAX) {
    const SoftmaxStats s = softmax_stats(mine);
    for (uint k = 0; k < kPerInvocation; ++k) mine[k] = exp(mine[k] - s.max) * s.inv_sum;
  }
  uint taken = 0u;  // bit k: expert lid + k * WG_X is chosen
  for (uint j = 0; j < args.n_used; ++j) {
    float best_v = 0.0;
    uint best = kNoExpert;
    for (uint k = 0; k < kPerInvocation; ++k) {
      const uint e = lid + k * WG_X;
      if (e >= args.n_expert) break;
      // Experts come in id order: only a larger score beats the best so far.
      if ((taken & (1u << k)) == 0u && (best == kNoExpert || mine[k] > best_v)) {
        best_v = mine[k];
        best = e;
      }
    }
    const uint winner = workgroup_best(best_v, best);
    if (winner % WG_X == lid) taken |= 1u << (winner / WG_X);
    if (token_ok && lid == 0u) ids[t * args.n_used + j] = int(winner);
  }
}
