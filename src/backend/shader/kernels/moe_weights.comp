// weights[t][j] (f32), j < n_used: the gating weight of expert ids[t][j]
// (kernel_args_moe.h's MoeRouteArgs; the CPU's moe_weights):
//   - softmax: p[ids[t][j]], p = softmax(logits[t]);
//   - normalized: those p divided by their sum (added in order of j), the
//     sum clamped below at 2^-14;
//   - top-k softmax: the softmax over the n_used selected logits, in ids order.
// One workgroup per token (moe_route.glsl's reductions for the softmax over
// all experts); invocation 0 then computes the token's n_used weights in
// order. An id outside [0, n_expert) is reported (MINFER_ERR_EXPERT_ID) and
// read as expert 0.
#version 450
#include "common.glsl"
#include "kernel_args.h"

layout(push_constant) uniform Push { MoeRouteArgs args; };
layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
layout(std430, binding = 2) writeonly buffer Weights { float weights[]; };
#define MINFER_ERR_BINDING 3
#include "errors.glsl"
#include "moe_route.glsl"

// ggml clamps the sum of the selected probabilities at the smallest normal f16.
const float kMinWeightSum = 6.103515625e-5;

// The logit of token t's j-th selected expert.
float picked_logit(uint t, uint j) {
  const int e = ids[t * args.n_used + j];
  if (e < 0 || uint(e) >= args.n_expert) {
    report_error(MINFER_ERR_EXPERT_ID, uint(e), args.n_expert);
    return logits[t * args.n_expert];
  }
  return logits[t * args.n_expert + uint(e)];
}

void main() {
  const uint t = folded_group_index();
  const bool token_ok = t < args.n_tokens;  // uniform
  const bool top_k = args.gating == MINFER_MOE_GATING_TOPK_SOFTMAX;
  SoftmaxStats s;
  if (!top_k) {
    float mine[kPerInvocation];
    load_logits(t, token_ok, mine);
    s = softmax_stats(mine);
  }
  if (!token_ok || gl_LocalInvocationIndex != 0u) return;  // no barrier follows
  const uint base = t * args.n_used;
  float w[MINFER_MOE_MAX_USED];
  if (top_k) {
    s.max = uintBitsToFloat(0xff800000u);
    for (uint j = 0; j < args.n_used; ++j) {
      w[j] = picked_logit(t, j);
      s.max = max(s.max, w[j]);
    }
    float sum = 0.0;
    for (uint j = 0; j < args.n_used; ++j) {
      w[j] = exp(w[j] - s.max);
      sum += w[j];
    }
    s.inv_sum = 1.0 / sum;
    for (uint j = 0; j < args.n_used; ++j) w[j] = w[j] * s.inv_sum;
  } else {
    for (uint j = 0; j < args.n_used; ++j) w[j] = exp(picked_logit(t, j) - s.max) * s.inv_sum;
  }
  if (args.gating == MINFER_MOE_GATING_NORMALIZED) {
    float sum = 0.0;
    for (uint j = 0; j < args.n_used; ++j) sum += w[j];
    sum = max(sum, kMinWeightSum);
    for (uint j = 0; j < args.n_used; ++j) w[j] = w[j] / sum;
  }
  for (uint j = 0; j < args.n_used; ++j) weights[base + j] = w[j];
}
