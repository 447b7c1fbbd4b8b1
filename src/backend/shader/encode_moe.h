// Encoders of the mixture-of-experts routing and weighted sum (graph/ir.h's
// kMoeTopK, kMoeWeights, kMoeSum; the expert matmul, kMatMulId, is the row
// matmul's: encoders.h's encode_matmul_id). Numerics are the CPU backend's
// (backend/cpu/moe.h); docs/MOE.md describes the layer.
//
// Contract (as encoders.h): shapes checked and refused with invalid_argument
// naming the op, the value and the limit; every binding sized; nothing runs
// until the recorder's submit_and_wait(). Values only the device sees are
// reported through `err`, the error words of backend/device_errors.h (at least
// MINFER_ERR_WORDS u32, zeroed by the caller; the first error is kept):
//   - encode_moe_topk: a token with a NaN logit, MINFER_ERR_ROUTER_NAN
//     (value = the token, bound = n_expert); the token gets ids 0..n_used-1;
//   - encode_moe_weights: an id outside [0, n_expert), MINFER_ERR_EXPERT_ID
//     (value = the id, bound = n_expert), read as expert 0.
// Threading: as the Recorder.
#pragma once

#include <cstdint>
#include <string_view>

#include "backend/shader/device.h"
#include "backend/shader/recorder.h"
#include "base/status.h"
#include "graph/ir.h"

namespace minfer::shader {

struct MoeRouteShape {
  int64_t n_tokens = 0;
  int64_t n_expert = 0;  // 1..MINFER_MOE_MAX_EXPERTS (kernel_args_moe.h)
  int64_t n_used = 0;    // 1..min(n_expert, MINFER_MOE_MAX_USED)
  graph::MoeGating gating = graph::MoeGating::kSoftmax;
};

// Whether the routing kernels take this many experts and selections.
bool moe_route_fits(int64_t n_expert, int64_t n_used);

// ids i32 [n_tokens][n_used]: each token's experts by descending score (the
// softmax probabilities of logits f32 [n_tokens][n_expert], or the logits
// for kTopKSoftmax), a tie to the lower id.
Status encode_moe_topk(Recorder& rec, const BufferRange& logits, const BufferRange& ids,
                       const BufferRange& err, const MoeRouteShape& shape,
                       std::string_view note = {});

// weights f32 [n_tokens][n_used]: the gating weight of expert ids[t][j].
Status encode_moe_weights(Recorder& rec, const BufferRange& logits, const BufferRange& ids,
                          const BufferRange& weights, const BufferRange& err,
                          const MoeRouteShape& shape, std::string_view note = {});

// out f32 [n_tokens][dim], row t = sum over j of y[t * n_used + j] * w[t][j]
// (y f32 [n_tokens * n_used][dim], w f32 [n_tokens][n_used]), each product
// and sum rounded in order of j. out must not overlap y or w.
Status encode_moe_sum(Recorder& rec, const BufferRange& y, const BufferRange& w,
                      const BufferRange& out, int64_t n_tokens, int64_t n_used, int64_t dim,
                      std::string_view note = {});

}  // namespace minfer::shader
