// The CPU backend's mixture-of-experts op kernels: unpack a node's metadata
// and buffers, check the buffers hold what the shapes say, and call the
// kernels of backend/cpu/moe.h.
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/moe.h"
#include "graph/node_status.h"

namespace minfer::cpu {
namespace {

using graph::node_error;
using graph::node_meta;

// Whether input i's buffer holds at least `elements` values of 4 bytes.
bool holds(const CpuBackend::Call& c, size_t i, int64_t elements) {
  return c.in_bytes[i] >= static_cast<size_t>(elements) * 4;
}

Status too_small(const graph::Node& n, size_t input, int64_t elements) {
  return node_error(n, "input " + std::to_string(input) + " holds fewer than " +
                           std::to_string(elements) + " values");
}

}  // namespace

Status CpuBackend::run_moe_topk(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MoeRouteMeta* m, node_meta<graph::MoeRouteMeta>(c.node));
  const int64_t n_tokens = c.node.shape.ne[1];
  if (!holds(c, 0, m->n_expert * n_tokens)) return too_small(c.node, 0, m->n_expert * n_tokens);
  Status s = moe_topk(static_cast<const float*>(c.in[0]), n_tokens, m->n_expert, m->n_used,
                      m->gating, static_cast<int32_t*>(c.out));
  return s ? s : node_error(c.node, s.message());
}

Status CpuBackend::run_moe_weights(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MoeRouteMeta* m, node_meta<graph::MoeRouteMeta>(c.node));
  const int64_t n_tokens = c.node.shape.ne[1];
  if (!holds(c, 0, m->n_expert * n_tokens)) return too_small(c.node, 0, m->n_expert * n_tokens);
  if (!holds(c, 1, m->n_used * n_tokens)) return too_small(c.node, 1, m->n_used * n_tokens);
  Status s = moe_weights(static_cast<const float*>(c.in[0]), static_cast<const int32_t*>(c.in[1]),
                         n_tokens, m->n_expert, m->n_used, m->gating, static_cast<float*>(c.out));
  return s ? s : node_error(c.node, s.message());
}

Status CpuBackend::run_matmul_id(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MatMulIdMeta* m, node_meta<graph::MatMulIdMeta>(c.node));
  const model::WeightView* w = weights_.find(m->weight);
  if (w == nullptr) return node_error(c.node, "weight '" + m->weight + "' not found");
  const int64_t n_rows = c.node.shape.ne[1], n_tokens = n_rows / m->n_used;
  const int64_t x_rows = m->per_row_input ? n_rows : n_tokens;
  if (!holds(c, 0, x_rows * m->in_dim)) return too_small(c.node, 0, x_rows * m->in_dim);
  if (!holds(c, 1, n_rows)) return too_small(c.node, 1, n_rows);
  ExpertWeights ew{w->type,   m->n_expert, m->out_dim,
                   m->in_dim, w->data,     w->nbytes / static_cast<size_t>(m->n_expert)};
  if (!m->bias.empty()) {
    const model::WeightView* b = weights_.find(m->bias);
    if (b == nullptr) return node_error(c.node, "bias '" + m->bias + "' not found");
    ew.bias = reinterpret_cast<const float*>(b->data);
  }
  Status s =
      matmul_id(ew, static_cast<const float*>(c.in[0]), m->per_row_input,
                static_cast<const int32_t*>(c.in[1]), n_tokens, m->n_used,
                static_cast<float*>(c.out), pool_, moe_scratch_, MatmulMode{m->batch_invariant});
  return s ? s : node_error(c.node, "weight '" + m->weight + "': " + s.message());
}

Status CpuBackend::run_moe_sum(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MoeSumMeta* m, node_meta<graph::MoeSumMeta>(c.node));
  const int64_t dim = c.node.shape.ne[0], n_tokens = c.node.shape.ne[1];
  if (!holds(c, 0, dim * m->n_used * n_tokens)) {
    return too_small(c.node, 0, dim * m->n_used * n_tokens);
  }
  if (!holds(c, 1, m->n_used * n_tokens)) return too_small(c.node, 1, m->n_used * n_tokens);
  moe_sum(static_cast<const float*>(c.in[0]), static_cast<const float*>(c.in[1]), n_tokens,
          m->n_used, dim, static_cast<float*>(c.out));
  return Status::ok();
}

}  // namespace minfer::cpu
