// Which nodes the CUDA backend's kernels can run (contract in op_support.h).
#include "backend/cuda/kernels.h"
#include "backend/cuda/op_support.h"
#include "backend/node_checks.h"

namespace minfer::cuda {
namespace {

using graph::DType;
using graph::Node;
using graph::Op;

bool f32_weight(const DeviceWeights& w, const std::string& name) {
  if (name.empty()) return true;
  const DeviceWeight* v = w.find(name);
  return v != nullptr && v->type == quant::TensorType::F32;
}

// A weight with a decoder whose rows have `in_dim` elements (a multiple of 32).
const DeviceWeight* gemv_weight(const DeviceWeights& w, const std::string& name, int64_t in_dim) {
  const DeviceWeight* v = w.find(name);
  if (v == nullptr || !has_decoder(v->type) || v->row_len != in_dim || in_dim % 32 != 0) {
    return nullptr;
  }
  return v;
}

bool f32_vector(const DeviceWeights& w, const std::string& name, int64_t len) {
  if (name.empty()) return true;
  const DeviceWeight* v = w.find(name);
  return v != nullptr && v->type == quant::TensorType::F32 && v->rows * v->row_len == len;
}

// A FusedQKV node or an attention node over its packed rows: (x or packed,
// positions) for one token, or paged (.., cells) / (.., seq_slots,
// page_table) for any number.
bool packed_inputs_ok(const Node& n, int64_t page_size) {
  if (page_size > 0) return n.inputs.size() == (n.op == Op::kAttention ? 4u : 3u);
  return n.shape.ne[1] == 1;  // the runners check the two inputs
}

}  // namespace

bool matmul_ok(const Node& n, const DeviceWeights& w) {
  const auto* m = std::get_if<graph::MatMulMeta>(&n.meta);
  if (m == nullptr || n.dtype != DType::kF32) return false;
  const DeviceWeight* v = w.find(m->weight);
  return v != nullptr && has_decoder(v->type) && v->row_len == m->in_dim && v->row_len % 32 == 0 &&
         f32_weight(w, m->bias) && (!m->in_norm.on || f32_vector(w, m->in_norm.weight, m->in_dim));
}

bool get_rows_ok(const Node& n, const DeviceWeights& w) {
  const auto* m = std::get_if<graph::GetRowsMeta>(&n.meta);
  if (m == nullptr || n.dtype != DType::kF32) return false;
  if (m->weight.empty()) return !m->rows.empty() || n.inputs.size() == 2;  // a list or an ids input
  const DeviceWeight* v = w.find(m->weight);
  return v != nullptr && has_decoder(v->type) && v->row_len % 32 == 0;
}

bool rms_norm_ok(const Node& n, const DeviceWeights& w) {
  const auto* m = std::get_if<graph::RmsNormMeta>(&n.meta);
  return m != nullptr && n.dtype == DType::kF32 && f32_weight(w, m->weight);
}

bool rope_ok(const Node& n, const DeviceWeights& w) {
  const auto* m = std::get_if<graph::RopeMeta>(&n.meta);
  return m != nullptr && n.dtype == DType::kF32 && f32_weight(w, m->freq_factors) &&
         m->head_dim % 2 == 0;
}

bool cache_types_ok(quant::TensorType k, quant::TensorType v, int64_t head_dim) {
  return backend::kv_row_type_ok(k, head_dim) && backend::kv_row_type_ok(v, head_dim);
}

std::string cache_types_problem(quant::TensorType k, quant::TensorType v, int64_t head_dim) {
  if (cache_types_ok(k, v, head_dim)) return "";
  const std::string types = "KV cache types K " + std::string(quant::type_name(k)) + ", V " +
                            std::string(quant::type_name(v));
  if (!cache_types_ok(k, v, 32)) return types + " have no CUDA kernel (F32, F16 or Q8_0 each)";
  return types + ": a q8_0 cache needs head_dim a multiple of 32, got " + std::to_string(head_dim) +
         " (" + std::to_string(head_dim) + " % 32 = " + std::to_string(head_dim % 32) + ")";
}

bool kv_store_ok(const Node& n, const DeviceWeights&) {
  const auto* m = std::get_if<graph::KvMeta>(&n.meta);
  return m != nullptr && cache_types_ok(m->k_type, m->v_type, m->head_dim);
}

bool attention_ok(const Node& n, const DeviceWeights& w) {
  const auto* m = std::get_if<graph::AttentionMeta>(&n.meta);
  return m != nullptr && n.dtype == DType::kF32 && attention_head_dim_ok(m->head_dim) &&
         f32_vector(w, m->sinks, m->n_head) && m->n_head_kv > 0 && m->n_head % m->n_head_kv == 0 &&
         cache_types_ok(m->k_type, m->v_type, m->head_dim) &&
         (!m->packed_qkv || packed_inputs_ok(n, m->page_size));
}

bool fused_qkv_ok(const Node& n, const DeviceWeights& w) {
  const auto* m = std::get_if<graph::FusedQkvMeta>(&n.meta);
  if (m == nullptr || n.dtype != DType::kF32 || !packed_inputs_ok(n, m->kv.page_size)) {
    return false;
  }
  const int64_t D = m->rope.head_dim, q_dim = m->n_head * D, kv_dim = m->kv.n_head_kv * D;
  const DeviceWeight* q = gemv_weight(w, m->q_weight, m->in_dim);
  const DeviceWeight* k = gemv_weight(w, m->k_weight, m->in_dim);
  const DeviceWeight* v = gemv_weight(w, m->v_weight, m->in_dim);
  return q != nullptr && k != nullptr && v != nullptr && q->rows == q_dim && k->rows == kv_dim &&
         v->rows == kv_dim && n.shape.ne[0] == q_dim + 2 * kv_dim && fused_head_dim_ok(D) &&
         m->kv.head_dim == D && cache_types_ok(m->kv.k_type, m->kv.v_type, D) &&
         m->rope.n_rot > 0 && m->rope.n_rot <= D && m->rope.n_rot % 2 == 0 &&
         f32_vector(w, m->q_bias, q_dim) && f32_vector(w, m->k_bias, kv_dim) &&
         f32_vector(w, m->v_bias, kv_dim) && f32_vector(w, m->q_norm, D) &&
         f32_vector(w, m->k_norm, D) && f32_weight(w, m->rope.freq_factors) &&
         (n.op == Op::kFusedQkvNorm) == !m->q_norm.empty() &&
         (!m->in_norm.on || f32_vector(w, m->in_norm.weight, m->in_dim));
}

// Batches below the tensor-core size, or any that must be batch-invariant
// (the GEMV kernels, per token): MatMulAdd and FusedFFN.
bool gemv_batch(const Node& n, bool invariant) {
  return n.shape.ne[1] < kMmaMinTokens || invariant;
}

bool matmul_add_ok(const Node& n, const DeviceWeights& w) {
  const auto* m = std::get_if<graph::MatMulMeta>(&n.meta);
  return m != nullptr && gemv_batch(n, m->batch_invariant) && n.inputs.size() == 2 &&
         matmul_ok(n, w);
}

bool fused_ffn_ok(const Node& n, const DeviceWeights& w) {
  const auto* m = std::get_if<graph::FusedFfnMeta>(&n.meta);
  if (m == nullptr || n.dtype != DType::kF32 || !gemv_batch(n, m->batch_invariant) ||
      n.shape.ne[0] != m->n_ff) {
    return false;
  }
  const DeviceWeight* g = gemv_weight(w, m->gate_weight, m->in_dim);
  const DeviceWeight* u = gemv_weight(w, m->up_weight, m->in_dim);
  return g != nullptr && u != nullptr && g->type == u->type && g->row_bytes == u->row_bytes &&
         g->rows == m->n_ff && u->rows == m->n_ff &&
         (!m->in_norm.on || f32_vector(w, m->in_norm.weight, m->in_dim));
}

namespace {

// A well-formed routing node of at most the experts the routing kernels hold.
bool route_ok(const Node& n) {
  const auto* m = std::get_if<graph::MoeRouteMeta>(&n.meta);
  return backend::moe_route_well_formed(n) && m->n_used <= kMoeMaxUsed &&
         m->n_expert <= kMoeMaxExperts;
}

}  // namespace

bool moe_route_ok(const Node& n, const DeviceWeights&) {
  return route_ok(n);
}

bool matmul_id_ok(const Node& n, const DeviceWeights& w) {
  const auto* m = std::get_if<graph::MatMulIdMeta>(&n.meta);
  if (m == nullptr || n.dtype != DType::kF32 || n.inputs.size() != 2 || m->n_used < 1 ||
      n.shape.ne[0] != m->out_dim) {
    return false;
  }
  const DeviceWeight* v = gemv_weight(w, m->weight, m->in_dim);
  return v != nullptr && v->rows == m->out_dim * m->n_expert &&
         f32_vector(w, m->bias, m->out_dim * m->n_expert);
}

}  // namespace minfer::cuda
