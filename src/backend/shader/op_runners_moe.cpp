// ShaderBackend's runners of the mixture-of-experts ops (shader_backend_impl.h;
// what op_support.cpp accepts): each is one dispatch of its kernel
// (encode_moe.h, and the row matmul's MATMUL_ID build for kMatMulId), the
// ids and NaN checks reported through the backend's error words.
#include <string>

#include "backend/shader/encode_moe.h"
#include "backend/shader/encoders.h"
#include "backend/shader/shader_backend_impl.h"

namespace minfer::shader::detail {
namespace {

MoeRouteShape route_shape(const Node& n, const graph::MoeRouteMeta& m) {
  return {n.shape.ne[1], m.n_expert, m.n_used, m.gating};
}

}  // namespace

Status ShaderBackend::run_moe_topk(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MoeRouteMeta* m, node_meta<graph::MoeRouteMeta>(c.node));
  return encode_moe_topk(rec_, c.in[0], c.out, pool_.allocation(err_)->range(),
                         route_shape(c.node, *m), c.node.name);
}

Status ShaderBackend::run_moe_weights(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MoeRouteMeta* m, node_meta<graph::MoeRouteMeta>(c.node));
  if (c.n_in != 2 || c.in[1].buffer == nullptr) return node_error(c.node, "takes (logits, ids)");
  return encode_moe_weights(rec_, c.in[0], c.in[1], c.out, pool_.allocation(err_)->range(),
                            route_shape(c.node, *m), c.node.name);
}

Status ShaderBackend::run_matmul_id(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MatMulIdMeta* m, node_meta<graph::MatMulIdMeta>(c.node));
  if (c.n_in != 2 || c.in[1].buffer == nullptr) return node_error(c.node, "takes (x, ids)");
  const DeviceWeight* w = weight(m->weight);
  if (w == nullptr) return node_error(c.node, "weight '" + m->weight + "' is not on the device");
  BufferRange bias{};
  if (!m->bias.empty()) {
    MINFER_ASSIGN_OR_RETURN(bias, weight_range(c.node, m->bias));
  }
  MINFER_ASSIGN_OR_RETURN(const uint32_t kernel, matmul_id_kernel(*device_, w->type));
  MatmulIdShape shape;
  shape.in_dim = m->in_dim;
  shape.out_dim = m->out_dim;
  shape.n_expert = m->n_expert;
  shape.n_used = m->n_used;
  shape.n_tokens = c.node.shape.ne[1] / m->n_used;
  shape.per_row_input = m->per_row_input;
  return encode_matmul_id(rec_, kernel, w->type, w->range(), c.in[0], c.in[1], bias, c.out,
                          pool_.allocation(err_)->range(), shape, c.node.name);
}

Status ShaderBackend::run_moe_sum(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MoeSumMeta* m, node_meta<graph::MoeSumMeta>(c.node));
  if (c.n_in != 2 || c.in[1].buffer == nullptr) return node_error(c.node, "takes (y, weights)");
  return encode_moe_sum(rec_, c.in[0], c.in[1], c.out, c.node.shape.ne[1], m->n_used,
                        c.node.shape.ne[0], c.node.name);
}

}  // namespace minfer::shader::detail
