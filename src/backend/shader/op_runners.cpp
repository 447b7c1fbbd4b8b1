// ShaderBackend's op runners (shader_backend_impl.h): each turns one node into the
// encoder calls of its kernels (encoders.h, encode_activation.h,
// encode_attention.h), recorded for the split's one submission. The row
// matmul's prologue and epilogue carry what they can of a fused node (input
// norms, biases, residuals, the decode FusedFFN's GLU: one dispatch); the rest
// are further dispatches, on scratch space where they need it.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/shader/encode_activation.h"
#include "backend/shader/encode_attention.h"
#include "backend/shader/encode_attention_tiled.h"
#include "backend/shader/encode_matmul_tiled.h"
#include "backend/shader/encoders.h"
#include "backend/shader/shader_backend_impl.h"

namespace minfer::shader::detail {
namespace {

using quant::TensorType;

int64_t rows_in(const BufferRange& r, int64_t row_len) {
  return static_cast<int64_t>(r.size / (static_cast<uint64_t>(row_len) * sizeof(float)));
}

// The node's YaRN constants (graph/yarn.h computed them once) into a shape.
void set_yarn(const graph::RopeMeta& m, RopeShape& shape) {
  shape.ext_factor = m.ext_factor;
  shape.corr_low = m.corr_low;
  shape.corr_high = m.corr_high;
  shape.mscale = m.mscale;
}

}  // namespace

Result<BufferRange> ShaderBackend::scratch(size_t slot, uint64_t bytes) {
  if (scratch_.size() <= slot) scratch_.resize(slot + 1, -1);
  PoolId& id = scratch_[slot];
  const Allocation* a = id >= 0 ? pool_.allocation(id) : nullptr;
  if (a == nullptr || a->size < bytes) {
    // The recorder orders later dispatches on reused bytes after earlier ones.
    if (id >= 0) {
      drop_replays();  // recordings may bind the old range
      (void)pool_.free(id);
    }
    id = -1;
    MINFER_ASSIGN_OR_RETURN(id, pool_.alloc(std::max<uint64_t>(bytes, 4096)));
    a = pool_.allocation(id);
  }
  return BufferRange{a->buffer, a->offset, bytes};
}

Result<BufferRange> ShaderBackend::row_list(const std::vector<int32_t>& rows) {
  auto it = row_lists_.find(rows);
  if (it == row_lists_.end()) {
    const uint64_t bytes = rows.size() * sizeof(int32_t);
    MINFER_ASSIGN_OR_RETURN(PoolId id, pool_.alloc(bytes));
    const Allocation* a = pool_.allocation(id);
    MINFER_RETURN_IF_ERROR(
        device_->write_buffer(*a->buffer, a->offset, std::as_bytes(std::span(rows))));
    it = row_lists_.emplace(rows, id).first;
  }
  return pool_.allocation(it->second)->range();
}

Result<BufferRange> ShaderBackend::weight_range(const Node& n, const std::string& name) const {
  const DeviceWeight* w = weight(name);
  if (w == nullptr)
    return node_error(n, "weight '" + name + "' is not on the " + name_ + " device");
  return w->range();
}

Status ShaderBackend::run_get_rows(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::GetRowsMeta* m, node_meta<graph::GetRowsMeta>(c.node));
  const int64_t width = c.node.shape.ne[0], n_out = c.node.shape.ne[1];
  const BufferRange err = pool_.allocation(err_)->range();
  if (m->weight.empty()) {
    BufferRange ids = c.in[1];
    if (!m->rows.empty()) {
      MINFER_ASSIGN_OR_RETURN(ids, row_list(m->rows));
    }
    return encode_gather_rows(rec_, c.in[0], ids, c.out, err, rows_in(c.in[0], width), width, n_out,
                              1.0f, c.node.name);
  }
  const DeviceWeight* w = weight(m->weight);
  if (w == nullptr) return node_error(c.node, "weight '" + m->weight + "' is not on the device");
  MINFER_ASSIGN_OR_RETURN(uint32_t kernel, get_rows_kernel(*device_, w->type));
  int64_t n_rows = 1;
  for (size_t i = 1; i < w->shape.size(); ++i) n_rows *= w->shape[i];
  // A table past one binding: a dispatch per range of rows (rows_per_binding).
  const int64_t per = rows_per_binding(*w);
  if (per <= 0) return node_error(c.node, "weight '" + m->weight + "' has rows past one binding");
  MINFER_ASSIGN_OR_RETURN(const uint64_t row, quant::row_bytes(w->type, width));
  for (int64_t r0 = 0; r0 < n_rows; r0 += per) {
    const int64_t rows = std::min(per, n_rows - r0);
    const BufferRange wr{w->buffer, w->offset + uint64_t(r0) * row, uint64_t(rows) * row};
    MINFER_RETURN_IF_ERROR(encode_get_rows(rec_, kernel, w->type, wr, c.in[0], c.out, err, n_rows,
                                           width, n_out, m->scale, c.node.name, {r0, rows}));
  }
  return Status::ok();
}

Status ShaderBackend::run_rms_norm(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::RmsNormMeta* m, node_meta<graph::RmsNormMeta>(c.node));
  BufferRange w{};
  if (!m->weight.empty()) {
    MINFER_ASSIGN_OR_RETURN(w, weight_range(c.node, m->weight));
  }
  const int64_t dim = m->group > 0 ? m->group : c.node.shape.ne[0];
  const int64_t rows = c.node.shape.elements() / dim;
  return encode_rms_norm(rec_, c.in[0], w, c.out, rows, dim, m->eps, c.node.name);
}

Status ShaderBackend::matmul(const Node& n, const std::string& weight_name, const std::string& bias,
                             const BufferRange& x, const BufferRange* residual,
                             const BufferRange& y, int64_t in_dim, int64_t out_dim,
                             int64_t n_tokens, bool invariant) {
  const DeviceWeight* w = weight(weight_name);
  if (w == nullptr) return node_error(n, "weight '" + weight_name + "' is not on the device");
  BufferRange b;
  if (!bias.empty()) {
    MINFER_ASSIGN_OR_RETURN(b, weight_range(n, bias));
  }
  const bool tiled = use_tiled(w->type, out_dim, n_tokens, invariant);
  MINFER_ASSIGN_OR_RETURN(const uint32_t kernel, tiled ? matmul_tiled_kernel(*device_, w->type)
                                                       : matmul_kernel(*device_, w->type));
  const int64_t per = rows_per_binding(*w);
  if (per <= 0) return node_error(n, "weight '" + weight_name + "' has rows past one binding");
  MINFER_ASSIGN_OR_RETURN(const uint64_t row, quant::row_bytes(w->type, in_dim));
  // Columns [r0, r0 + rows) of y (and of the residual) start r0 floats in.
  const auto from = [](const BufferRange& r, int64_t r0) {
    return BufferRange{r.buffer, r.offset + uint64_t(r0) * 4, r.size - uint64_t(r0) * 4};
  };
  for (int64_t r0 = 0; r0 < out_dim; r0 += per) {
    const int64_t rows = std::min(per, out_dim - r0);
    const BufferRange wr{w->buffer, w->offset + uint64_t(r0) * row, uint64_t(rows) * row};
    const MatmulShape shape{in_dim, rows, n_tokens, out_dim};
    if (tiled) {
      MINFER_RETURN_IF_ERROR(
          encode_matmul_tiled(rec_, kernel, w->type, wr, x, from(y, r0), shape, n.name));
      continue;
    }
    MatmulEpilogue e;  // the row kernel adds them itself
    if (b.buffer != nullptr)
      e.bias = BufferRange{b.buffer, b.offset + uint64_t(r0) * 4, uint64_t(rows) * 4};
    if (residual != nullptr) e.residual = from(*residual, r0);
    MINFER_RETURN_IF_ERROR(
        encode_matmul(rec_, kernel, w->type, wr, x, from(y, r0), shape, n.name, e));
  }
  if (!tiled) return Status::ok();
  const int64_t n_out = out_dim * n_tokens;
  if (b.buffer != nullptr) {
    MINFER_RETURN_IF_ERROR(
        encode_elementwise(rec_, ElementwiseOp::kAdd, y, b, y, n_out, out_dim, n.name));
  }
  if (residual != nullptr) {
    MINFER_RETURN_IF_ERROR(
        encode_elementwise(rec_, ElementwiseOp::kAdd, y, *residual, y, n_out, n_out, n.name));
  }
  return Status::ok();
}

Result<MatmulPrologue> ShaderBackend::input_norm(const Node& n, const graph::InputNorm& norm) {
  MatmulPrologue p;
  p.norm = norm.on;
  p.eps = norm.eps;
  if (norm.on && !norm.weight.empty()) {
    MINFER_ASSIGN_OR_RETURN(p.weight, weight_range(n, norm.weight));
  }
  return p;
}

Status ShaderBackend::run_matmul(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MatMulMeta* m, node_meta<graph::MatMulMeta>(c.node));
  const bool add = c.node.op == Op::kMatMulAdd;
  if (add && (c.n_in != 2 || c.in[1].buffer == nullptr)) {
    return node_error(c.node, "mul_mat_add takes (x, residual)");
  }
  return matmul(c.node, m->weight, m->bias, c.in[0], add ? &c.in[1] : nullptr, c.out, m->in_dim,
                m->out_dim, c.node.shape.ne[1], m->batch_invariant);
}

Status ShaderBackend::run_elementwise(const Call& c) {
  const int64_t n = c.node.shape.elements();
  const ElementwiseOp op = c.node.op == Op::kAdd ? ElementwiseOp::kAdd : ElementwiseOp::kMul;
  return encode_elementwise(rec_, op, c.in[0], c.in[1], c.out, n, n, c.node.name);
}

Status ShaderBackend::run_unary(const Call& c) {
  const int64_t n = c.node.shape.elements();
  float s = 1.0f;
  UnaryOp op = c.node.op == Op::kSilu ? UnaryOp::kSilu : UnaryOp::kGelu;
  if (c.node.op == Op::kScale) {
    MINFER_ASSIGN_OR_RETURN(const graph::ScaleMeta* m, node_meta<graph::ScaleMeta>(c.node));
    op = UnaryOp::kScale;
    s = m->scale;
  }
  return encode_unary(rec_, op, c.in[0], c.out, n, s, c.node.name);
}

Status ShaderBackend::run_glu(const Call& c) {
  const int64_t n = c.node.shape.elements();
  if (c.node.op == Op::kSwiGLUOai) {
    MINFER_ASSIGN_OR_RETURN(const graph::GluMeta* m, node_meta<graph::GluMeta>(c.node));
    return encode_swiglu_oai(rec_, c.in[0], c.in[1], c.out, n, m->alpha, m->limit, c.node.name);
  }
  const GluOp op = c.node.op == Op::kSwiGLU ? GluOp::kSwiGLU : GluOp::kGeGLU;
  return encode_glu(rec_, op, c.in[0], c.in[1], c.out, n, c.node.name);
}

Status ShaderBackend::run_rope(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::RopeMeta* m, node_meta<graph::RopeMeta>(c.node));
  BufferRange factors{};
  if (!m->freq_factors.empty()) {
    MINFER_ASSIGN_OR_RETURN(factors, weight_range(c.node, m->freq_factors));
  }
  RopeShape shape{};
  shape.n_tokens = c.node.shape.ne[1];
  shape.n_heads = m->n_heads;
  shape.head_dim = m->head_dim;
  shape.n_rot = m->n_rot;
  shape.neox = m->mode == graph::RopeMode::kNeox;
  shape.freq_base = m->freq_base;
  shape.freq_scale = m->freq_scale;
  set_yarn(*m, shape);
  return encode_rope(rec_, c.in[0], c.in[1], factors, c.out, shape, c.node.name);
}

Status ShaderBackend::run_kv_store(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::KvMeta* m, node_meta<graph::KvMeta>(c.node));
  if (c.kv == nullptr || c.k_cache.buffer == nullptr || c.v_cache.buffer == nullptr) {
    return node_error(c.node, "no KV cache for layer " + std::to_string(m->layer));
  }
  KvStoreShape shape{};
  shape.n_tokens = m->n_tokens;
  shape.n_head_kv = m->n_head_kv;
  shape.head_dim = m->head_dim;
  shape.n_ctx = c.kv->n_ctx;
  shape.k_type = c.kv->k_type;
  shape.v_type = c.kv->v_type;
  return encode_kv_store(rec_, c.in[0], c.in[1], c.in[2], c.k_cache, c.v_cache,
                         pool_.allocation(err_)->range(), shape, c.node.name);
}

Status ShaderBackend::run_attention(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::AttentionMeta* m, node_meta<graph::AttentionMeta>(c.node));
  if (c.kv == nullptr || c.k_cache.buffer == nullptr || c.v_cache.buffer == nullptr) {
    return node_error(c.node, "no KV cache for layer " + std::to_string(m->layer));
  }
  BufferRange q = c.in[0], positions = c.in[2];
  if (m->packed_qkv) {  // one token: its q starts the packed row
    q.size = uint64_t(m->n_head * m->head_dim) * sizeof(float);
    positions = c.in[1];
  }
  AttentionShape shape{};
  shape.n_tokens = c.node.shape.ne[1];
  shape.n_head = m->n_head;
  shape.n_head_kv = m->n_head_kv;
  shape.head_dim = m->head_dim;
  shape.n_ctx = c.kv->n_ctx;
  shape.scale = m->scale;
  shape.sliding_window = m->sliding_window;
  shape.k_type = c.kv->k_type;
  shape.v_type = c.kv->v_type;
  BufferRange slots{}, table{};
  if (m->page_size > 0) {
    shape.page_size = m->page_size;
    shape.max_pages = m->max_pages;
    shape.n_slots =
        static_cast<int64_t>(c.in[4].size / sizeof(int32_t)) / std::max<int64_t>(m->max_pages, 1);
    slots = c.in[3];
    table = c.in[4];
  }
  BufferRange sinks{};
  if (!m->sinks.empty()) {
    MINFER_ASSIGN_OR_RETURN(sinks, weight_range(c.node, m->sinks));
  }
  const BufferRange err = pool_.allocation(err_)->range();
  // Prompts (many queries) through the tiled kernel where the node may
  // differ from its tokens decoded one by one (encode_attention_tiled.h).
  if (!m->batch_invariant && attention_tiled_applies(rec_.device(), shape)) {
    return encode_attention_tiled(rec_, q, positions, slots, table, c.k_cache, c.v_cache, sinks,
                                  c.out, err, shape, c.node.name);
  }
  return encode_attention(rec_, q, positions, slots, table, c.k_cache, c.v_cache, sinks, c.out, err,
                          shape, c.node.name);
}

Status ShaderBackend::run_argmax(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::ArgMaxMeta* m, node_meta<graph::ArgMaxMeta>(c.node));
  return encode_argmax(rec_, c.in[0], c.out, c.node.shape.ne[1], m->row_len, c.node.name);
}

// act(x Wg^T) * (x Wu^T): the input normalized into scratch (with in_norm),
// the two products into scratch, the GLU into the output.
Status ShaderBackend::run_fused_ffn(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::FusedFfnMeta* m, node_meta<graph::FusedFfnMeta>(c.node));
  const int64_t n_tokens = c.node.shape.ne[1];
  const DeviceWeight* pair[] = {weight(m->gate_weight), weight(m->up_weight)};
  if (contiguous(pair) && pair[0]->type == pair[1]->type &&
      !use_tiled(pair[0]->type, m->n_ff, n_tokens, m->batch_invariant)) {
    // One dispatch: the row kernel normalizes x and applies the GLU itself.
    MINFER_ASSIGN_OR_RETURN(const MatmulPrologue norm, input_norm(c.node, m->in_norm));
    MatmulEpilogue glu;
    glu.glu = m->gelu ? GluOp::kGeGLU : GluOp::kSwiGLU;
    const BufferRange both{pair[0]->buffer, pair[0]->offset, pair[0]->bytes + pair[1]->bytes};
    MINFER_ASSIGN_OR_RETURN(uint32_t kernel, matmul_kernel(*device_, pair[0]->type));
    return encode_matmul(rec_, kernel, pair[0]->type, both, c.in[0], c.out,
                         {m->in_dim, m->n_ff, n_tokens}, c.node.name, glu, norm);
  }
  BufferRange x = c.in[0];
  if (m->in_norm.on) {
    BufferRange w{};
    if (!m->in_norm.weight.empty()) {
      MINFER_ASSIGN_OR_RETURN(w, weight_range(c.node, m->in_norm.weight));
    }
    MINFER_ASSIGN_OR_RETURN(x, scratch(kNormSlot, uint64_t(m->in_dim * n_tokens) * sizeof(float)));
    MINFER_RETURN_IF_ERROR(
        encode_rms_norm(rec_, c.in[0], w, x, n_tokens, m->in_dim, m->in_norm.eps, c.node.name));
  }
  const uint64_t bytes = uint64_t(m->n_ff * n_tokens) * sizeof(float);
  MINFER_ASSIGN_OR_RETURN(BufferRange gate, scratch(kGateSlot, bytes));
  MINFER_ASSIGN_OR_RETURN(BufferRange up, scratch(kUpSlot, bytes));
  MINFER_RETURN_IF_ERROR(matmul(c.node, m->gate_weight, "", x, nullptr, gate, m->in_dim, m->n_ff,
                                n_tokens, m->batch_invariant));
  MINFER_RETURN_IF_ERROR(matmul(c.node, m->up_weight, "", x, nullptr, up, m->in_dim, m->n_ff,
                                n_tokens, m->batch_invariant));
  return encode_glu(rec_, m->gelu ? GluOp::kGeGLU : GluOp::kSwiGLU, gate, up, c.out,
                    m->n_ff * n_tokens, c.node.name);
}

// One token (op_support.cpp's fused_qkv_ok): the row matmul over the q, k
// and v weights (back to back) with the input norm and the biases, into the
// packed row; with FusedQkvNorm, the per-head q and k norms in place; then
// RoPE in place over its q and k heads and the KV store from its k and v
// heads, in one dispatch (rope_store).
Status ShaderBackend::run_fused_qkv(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::FusedQkvMeta* m, node_meta<graph::FusedQkvMeta>(c.node));
  if (c.kv == nullptr || c.k_cache.buffer == nullptr || c.v_cache.buffer == nullptr) {
    return node_error(c.node, "no KV cache for layer " + std::to_string(m->kv.layer));
  }
  const DeviceWeight* wq = weight(m->q_weight);
  const DeviceWeight* wv = weight(m->v_weight);
  if (wq == nullptr || wv == nullptr)
    return node_error(c.node, "q/k/v weights are not on the device");
  const int64_t hd = m->rope.head_dim, n_kv = m->kv.n_head_kv;
  const int64_t q_dim = m->n_head * hd, kv_dim = n_kv * hd;
  const BufferRange w{wq->buffer, wq->offset, wv->offset + wv->bytes - wq->offset};
  MatmulEpilogue bias;
  if (!m->q_bias.empty()) {
    MINFER_ASSIGN_OR_RETURN(const BufferRange bq, weight_range(c.node, m->q_bias));
    MINFER_ASSIGN_OR_RETURN(const BufferRange bv, weight_range(c.node, m->v_bias));
    bias.bias = {bq.buffer, bq.offset, bv.offset + bv.size - bq.offset};
  }
  MINFER_ASSIGN_OR_RETURN(const MatmulPrologue norm, input_norm(c.node, m->in_norm));
  MINFER_ASSIGN_OR_RETURN(uint32_t kernel, matmul_kernel(*device_, wq->type));
  MINFER_RETURN_IF_ERROR(encode_matmul(rec_, kernel, wq->type, w, c.in[0], c.out,
                                       {m->in_dim, q_dim + 2 * kv_dim, 1}, c.node.name, bias,
                                       norm));
  const auto part = [&](int64_t from, int64_t n) {
    return BufferRange{c.out.buffer, c.out.offset + uint64_t(from) * 4, uint64_t(n) * 4};
  };
  if (c.node.op == Op::kFusedQkvNorm) {
    MINFER_ASSIGN_OR_RETURN(const BufferRange qn, weight_range(c.node, m->q_norm));
    MINFER_ASSIGN_OR_RETURN(const BufferRange kn, weight_range(c.node, m->k_norm));
    MINFER_RETURN_IF_ERROR(encode_rms_norm(rec_, part(0, q_dim), qn, part(0, q_dim), m->n_head, hd,
                                           m->norm_eps, c.node.name));
    MINFER_RETURN_IF_ERROR(encode_rms_norm(rec_, part(q_dim, kv_dim), kn, part(q_dim, kv_dim), n_kv,
                                           hd, m->norm_eps, c.node.name));
  }
  BufferRange factors{};
  if (!m->rope.freq_factors.empty()) {
    MINFER_ASSIGN_OR_RETURN(factors, weight_range(c.node, m->rope.freq_factors));
  }
  RopeStoreShape shape{};
  shape.rope = {1,
                m->n_head,
                hd,
                m->rope.n_rot,
                m->rope.mode == graph::RopeMode::kNeox,
                m->rope.freq_base,
                m->rope.freq_scale};
  set_yarn(m->rope, shape.rope);
  shape.n_head_kv = n_kv;
  shape.row_stride = q_dim + 2 * kv_dim;
  shape.n_ctx = c.kv->n_ctx;
  shape.k_type = c.kv->k_type;
  shape.v_type = c.kv->v_type;
  return encode_rope_store(rec_, c.out, c.in[1], factors, c.k_cache, c.v_cache,
                           pool_.allocation(err_)->range(), shape, c.node.name);
}

}  // namespace minfer::shader::detail
