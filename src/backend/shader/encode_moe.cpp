#include "backend/shader/encode_moe.h"

#include <optional>
#include <string>

#include "backend/shader/encode_checks.h"
#include "backend/shader/kernel_args.h"
#include "backend/shader/kernel_table.h"
#include "backend/shader/limits.h"

namespace minfer::shader {
namespace {

Result<uint32_t> moe_kernel(std::string_view name) {
  const std::optional<uint32_t> k = find_kernel(name, "f32");
  if (!k) return Status::internal("kernel " + std::string(name) + ".f32 is not built in");
  return *k;
}

uint32_t gating_code(graph::MoeGating g) {
  switch (g) {
    case graph::MoeGating::kSoftmax:
      return MINFER_MOE_GATING_SOFTMAX;
    case graph::MoeGating::kSoftmaxNormalized:
      return MINFER_MOE_GATING_NORMALIZED;
    case graph::MoeGating::kTopKSoftmax:
      return MINFER_MOE_GATING_TOPK_SOFTMAX;
  }
  return MINFER_MOE_GATING_SOFTMAX;
}

// The routing shape and the logits and ids bindings, checked.
Status check_route(std::string_view op, const BufferRange& logits, const BufferRange& ids,
                   const BufferRange& err, const MoeRouteShape& s) {
  MINFER_RETURN_IF_ERROR(positive(op, "n_tokens", s.n_tokens));
  if (!moe_route_fits(s.n_expert, s.n_used)) {
    return Status::invalid_argument(std::string(op) + ": " + std::to_string(s.n_used) + " of " +
                                    std::to_string(s.n_expert) + " experts (at most " +
                                    std::to_string(MINFER_MOE_MAX_USED) + " of " +
                                    std::to_string(MINFER_MOE_MAX_EXPERTS) + ")");
  }
  if (uint64_t(s.n_tokens) * uint64_t(s.n_expert) > uint64_t(kMaxIndex)) {
    return Status::invalid_argument(std::string(op) + ": " + std::to_string(s.n_tokens) +
                                    " tokens of " + std::to_string(s.n_expert) +
                                    " logits exceed 32-bit indices");
  }
  MINFER_RETURN_IF_ERROR(needs(op, "logits", logits, uint64_t(s.n_tokens) * s.n_expert * 4));
  MINFER_RETURN_IF_ERROR(needs(op, "ids", ids, uint64_t(s.n_tokens) * s.n_used * 4));
  return needs(op, "err", err, MINFER_ERR_WORDS * 4);
}

args::MoeRouteArgs route_args(const MoeRouteShape& s) {
  return {static_cast<uint32_t>(s.n_tokens), static_cast<uint32_t>(s.n_expert),
          static_cast<uint32_t>(s.n_used), gating_code(s.gating)};
}

}  // namespace

bool moe_route_fits(int64_t n_expert, int64_t n_used) {
  return n_expert >= 1 && n_expert <= MINFER_MOE_MAX_EXPERTS && n_used >= 1 && n_used <= n_expert &&
         n_used <= MINFER_MOE_MAX_USED;
}

Status encode_moe_topk(Recorder& rec, const BufferRange& logits, const BufferRange& ids,
                       const BufferRange& err, const MoeRouteShape& s, std::string_view note) {
  MINFER_RETURN_IF_ERROR(check_route("moe_topk", logits, ids, err, s));
  MINFER_ASSIGN_OR_RETURN(const uint32_t kernel, moe_kernel("moe_topk"));
  MINFER_ASSIGN_OR_RETURN(const Groups groups,
                          fold_groups(uint64_t(s.n_tokens), rec.device().info().limits));
  const args::MoeRouteArgs args = route_args(s);
  const BufferRange bindings[] = {logits, ids, err};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

Status encode_moe_weights(Recorder& rec, const BufferRange& logits, const BufferRange& ids,
                          const BufferRange& weights, const BufferRange& err,
                          const MoeRouteShape& s, std::string_view note) {
  MINFER_RETURN_IF_ERROR(check_route("moe_weights", logits, ids, err, s));
  MINFER_RETURN_IF_ERROR(
      needs("moe_weights", "weights", weights, uint64_t(s.n_tokens) * s.n_used * 4));
  MINFER_ASSIGN_OR_RETURN(const uint32_t kernel, moe_kernel("moe_weights"));
  MINFER_ASSIGN_OR_RETURN(const Groups groups,
                          fold_groups(uint64_t(s.n_tokens), rec.device().info().limits));
  const args::MoeRouteArgs args = route_args(s);
  const BufferRange bindings[] = {logits, ids, weights, err};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

Status encode_moe_sum(Recorder& rec, const BufferRange& y, const BufferRange& w,
                      const BufferRange& out, int64_t n_tokens, int64_t n_used, int64_t dim,
                      std::string_view note) {
  MINFER_RETURN_IF_ERROR(positive("moe_sum", "n_tokens", n_tokens));
  MINFER_RETURN_IF_ERROR(positive("moe_sum", "n_used", n_used));
  MINFER_RETURN_IF_ERROR(positive("moe_sum", "dim", dim));
  const uint64_t y_floats = uint64_t(n_tokens) * uint64_t(n_used) * uint64_t(dim);
  if (y_floats > uint64_t(kMaxIndex)) {
    return Status::invalid_argument("moe_sum: " + std::to_string(n_tokens) + " x " +
                                    std::to_string(n_used) + " rows of " + std::to_string(dim) +
                                    " exceed 32-bit indices");
  }
  MINFER_RETURN_IF_ERROR(needs("moe_sum", "y", y, y_floats * 4));
  MINFER_RETURN_IF_ERROR(needs("moe_sum", "w", w, uint64_t(n_tokens) * n_used * 4));
  MINFER_RETURN_IF_ERROR(needs("moe_sum", "out", out, uint64_t(n_tokens) * dim * 4));
  MINFER_ASSIGN_OR_RETURN(const uint32_t kernel, moe_kernel("moe_sum"));
  const uint64_t per_group = embedded_kernels()[kernel].workgroup[0];
  MINFER_ASSIGN_OR_RETURN(const Groups groups,
                          fold_groups((uint64_t(n_tokens) * dim + per_group - 1) / per_group,
                                      rec.device().info().limits));
  const args::MoeSumArgs args{static_cast<uint32_t>(n_tokens), static_cast<uint32_t>(n_used),
                              static_cast<uint32_t>(dim)};
  const BufferRange bindings[] = {y, w, out};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

}  // namespace minfer::shader
