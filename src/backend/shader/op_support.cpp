// Which nodes ShaderBackend runs, and the op table that names each op's runner
// (shader_backend_impl.h). A "no" routes the node to the next backend; the
// runners re-check what they rely on and fail naming the node.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <string>

#include "backend/node_checks.h"
#include "backend/shader/encode_moe.h"
#include "backend/shader/shader_backend_impl.h"

namespace minfer::shader::detail {
namespace {

using graph::DType;
using quant::TensorType;

// A check of the node alone (backend/node_checks.h) as a table entry.
template <bool (*Check)(const Node&)>
constexpr auto node_check = backend::node_only<Check, ShaderBackend>;
constexpr auto f32_out = node_check<backend::f32_output>;

// An f32 weight of `len` elements (len 0: any), or no weight at all.
bool f32_vector(const ShaderBackend& b, const std::string& name, int64_t len = 0) {
  if (name.empty()) return true;
  const DeviceWeight* w = b.weight(name);
  if (w == nullptr || w->type != TensorType::F32) return false;
  int64_t n = 1;
  for (int64_t d : w->shape) n *= d;
  return len == 0 || n == len;
}

// A weight of [rows][row_len] whose type the matmul kernels decode here, in
// one binding (in_ranges: or in ranges of rows, as a plain matmul binds it).
bool matmul_weight(const ShaderBackend& b, const std::string& name, int64_t row_len, int64_t rows,
                   bool in_ranges = false) {
  const DeviceWeight* w = b.weight(name);
  if (w == nullptr || w->shape.empty() || w->shape[0] != row_len || !b.has_matmul(w->type) ||
      !(b.binds_whole(*w) || (in_ranges && b.rows_per_binding(*w) > 0))) {
    return false;
  }
  int64_t r = 1;
  for (size_t i = 1; i < w->shape.size(); ++i) r *= w->shape[i];
  return r == rows && row_len % quant::type_traits(w->type).block_size == 0;
}

bool matmul_ok(const Node& n, const ShaderBackend& b) {
  const auto* m = std::get_if<graph::MatMulMeta>(&n.meta);
  return m != nullptr && !m->in_norm.on && n.dtype == DType::kF32 && n.shape.ne[0] == m->out_dim &&
         matmul_weight(b, m->weight, m->in_dim, m->out_dim, true) &&
         f32_vector(b, m->bias, m->out_dim) && (n.op != Op::kMatMulAdd || n.inputs.size() == 2);
}

bool get_rows_ok(const Node& n, const ShaderBackend& b) {
  const auto* m = std::get_if<graph::GetRowsMeta>(&n.meta);
  if (m == nullptr || n.dtype != DType::kF32) return false;
  if (m->weight.empty()) return !m->rows.empty() || n.inputs.size() == 2;
  const DeviceWeight* w = b.weight(m->weight);
  return w != nullptr && !w->shape.empty() && w->shape[0] == n.shape.ne[0] &&
         b.has_get_rows(w->type) && b.rows_per_binding(*w) > 0 &&
         w->shape[0] % quant::type_traits(w->type).block_size == 0;
}

bool rms_norm_ok(const Node& n, const ShaderBackend& b) {
  const auto* m = std::get_if<graph::RmsNormMeta>(&n.meta);
  if (m == nullptr || n.dtype != DType::kF32) return false;
  const int64_t len = m->group > 0 ? m->group : n.shape.ne[0];
  return (m->group == 0 || n.shape.ne[0] % m->group == 0) && f32_vector(b, m->weight, len);
}

bool rope_meta_ok(const ShaderBackend& b, const graph::RopeMeta& m) {
  return m.head_dim % 2 == 0 && m.n_rot % 2 == 0 && m.n_rot > 0 && m.n_rot <= m.head_dim &&
         std::isfinite(m.ext_factor) && std::isfinite(m.corr_low) && std::isfinite(m.corr_high) &&
         std::isfinite(m.mscale) && f32_vector(b, m.freq_factors, m.n_rot / 2);
}

bool rope_ok(const Node& n, const ShaderBackend& b) {
  const auto* m = std::get_if<graph::RopeMeta>(&n.meta);
  return m != nullptr && n.dtype == DType::kF32 && rope_meta_ok(b, *m) &&
         n.shape.ne[0] == m->n_heads * m->head_dim;
}

bool kv_store_ok(const Node& n, const ShaderBackend&) {
  const auto* m = std::get_if<graph::KvMeta>(&n.meta);
  return m != nullptr && n.inputs.size() == 3 && backend::kv_row_type_ok(m->k_type, m->head_dim) &&
         backend::kv_row_type_ok(m->v_type, m->head_dim);
}

// A packed q|k|v input (after FusedQKV) holds one token, whose q starts the
// row. Sinks, when named, are an f32 weight of one logit per query head.
bool attention_ok(const Node& n, const ShaderBackend& b) {
  const auto* m = std::get_if<graph::AttentionMeta>(&n.meta);
  if (m == nullptr) return false;
  const bool inputs_ok = m->packed_qkv
                             ? n.inputs.size() == 2 && n.shape.ne[1] == 1 && m->page_size == 0
                             : n.inputs.size() >= (m->page_size > 0 ? 5u : 3u);
  return inputs_ok && n.dtype == DType::kF32 && f32_vector(b, m->sinks, m->n_head) &&
         m->n_head_kv > 0 && m->n_head % m->n_head_kv == 0 && m->head_dim > 0 &&
         m->head_dim <= 256 && m->head_dim % 2 == 0 &&
         backend::kv_row_type_ok(m->k_type, m->head_dim) &&
         backend::kv_row_type_ok(m->v_type, m->head_dim) &&
         n.shape.ne[0] == m->n_head * m->head_dim;
}

// FusedQKV of one token (decode) as one matmul over the q, k and v weights
// (one type, back to back: the upload order's doing), RoPE in place over the
// q and k heads of the packed row and the KV store from its k and v parts:
// biases all or none (back to back too), k and v at offsets a binding can
// start at. FusedQkvNorm: the per-head q and k norms (f32 [head_dim]) in
// place between the matmul and RoPE.
bool fused_qkv_ok(const Node& n, const ShaderBackend& b) {
  const auto* m = std::get_if<graph::FusedQkvMeta>(&n.meta);
  if (m == nullptr || n.dtype != DType::kF32 || n.shape.ne[1] != 1 || n.inputs.size() != 2 ||
      m->kv.page_size != 0) {
    return false;
  }
  const int64_t hd = m->rope.head_dim, q_dim = m->n_head * hd, kv_dim = m->kv.n_head_kv * hd;
  const bool normed = n.op == Op::kFusedQkvNorm;
  if (normed ? m->q_norm.empty() || m->k_norm.empty() || !f32_vector(b, m->q_norm, hd) ||
                   !f32_vector(b, m->k_norm, hd)
             : !m->q_norm.empty() || !m->k_norm.empty()) {
    return false;
  }
  const DeviceWeight* w[] = {b.weight(m->q_weight), b.weight(m->k_weight), b.weight(m->v_weight)};
  if (!contiguous(w) || w[1]->type != w[0]->type || w[2]->type != w[0]->type ||
      !matmul_weight(b, m->q_weight, m->in_dim, q_dim) ||
      !matmul_weight(b, m->k_weight, m->in_dim, kv_dim) ||
      !matmul_weight(b, m->v_weight, m->in_dim, kv_dim)) {
    return false;
  }
  const bool biased = !m->q_bias.empty();
  if (biased != !m->k_bias.empty() || biased != !m->v_bias.empty()) return false;
  if (biased) {
    const DeviceWeight* bias[] = {b.weight(m->q_bias), b.weight(m->k_bias), b.weight(m->v_bias)};
    if (!contiguous(bias) || !f32_vector(b, m->q_bias, q_dim) ||
        !f32_vector(b, m->k_bias, kv_dim) || !f32_vector(b, m->v_bias, kv_dim)) {
      return false;
    }
  }
  const uint64_t align = std::max<uint64_t>(b.binding_alignment(), 1);
  return n.shape.ne[0] == q_dim + 2 * kv_dim && m->kv.head_dim == hd && rope_meta_ok(b, m->rope) &&
         backend::kv_row_type_ok(m->kv.k_type, hd) && backend::kv_row_type_ok(m->kv.v_type, hd) &&
         uint64_t(q_dim) * 4 % align == 0 && uint64_t(q_dim + kv_dim) * 4 % align == 0 &&
         (!m->in_norm.on || f32_vector(b, m->in_norm.weight, m->in_dim));
}

bool fused_ffn_ok(const Node& n, const ShaderBackend& b) {
  const auto* m = std::get_if<graph::FusedFfnMeta>(&n.meta);
  return m != nullptr && n.dtype == DType::kF32 && n.shape.ne[0] == m->n_ff &&
         matmul_weight(b, m->gate_weight, m->in_dim, m->n_ff) &&
         matmul_weight(b, m->up_weight, m->in_dim, m->n_ff) &&
         (!m->in_norm.on || f32_vector(b, m->in_norm.weight, m->in_dim));
}

// Mixture of experts (docs/MOE.md): routing of the experts and selections
// the routing kernels hold (encode_moe.h), ids [n_used, T] from logits
// [n_expert, T].
bool moe_route_ok(const Node& n, const ShaderBackend&) {
  const auto* m = std::get_if<graph::MoeRouteMeta>(&n.meta);
  return backend::moe_route_well_formed(n) && moe_route_fits(m->n_expert, m->n_used);
}

// The expert matmul over a 3-D weight [in_dim, out_dim, n_expert] that one
// binding holds (no row ranges: a row reads any expert), in a type the
// matmul_id kernels decode here; the bias, if any, f32 [out_dim, n_expert].
bool matmul_id_ok(const Node& n, const ShaderBackend& b) {
  const auto* m = std::get_if<graph::MatMulIdMeta>(&n.meta);
  if (m == nullptr || n.dtype != DType::kF32 || n.inputs.size() != 2 || m->n_used < 1 ||
      m->n_used > m->n_expert || n.shape.ne[0] != m->out_dim || n.shape.ne[1] % m->n_used != 0) {
    return false;
  }
  const DeviceWeight* w = b.weight(m->weight);
  if (w == nullptr || w->shape.size() != 3 || w->shape[0] != m->in_dim ||
      w->shape[1] != m->out_dim || w->shape[2] != m->n_expert || !b.has_matmul_id(w->type) ||
      !b.binds_whole(*w)) {
    return false;
  }
  return m->in_dim % quant::type_traits(w->type).block_size == 0 &&
         f32_vector(b, m->bias, m->out_dim * m->n_expert);
}

// gpt-oss's clamped GLU of (gate, up): glu.comp's swiglu_oai variant takes
// any finite constants.
bool swiglu_oai_ok(const Node& n, const ShaderBackend&) {
  if (!backend::glu_pair_well_formed(n)) return false;
  const auto& m = std::get<graph::GluMeta>(n.meta);
  return std::isfinite(m.alpha) && std::isfinite(m.limit);
}

}  // namespace

const OpEntry& op_entry(Op op) {
  static const OpEntry kTable[] = {
      /* kInput        */ {node_check<backend::i32_input>, nullptr},
      /* kGetRows      */ {get_rows_ok, &ShaderBackend::run_get_rows},
      /* kRmsNorm      */ {rms_norm_ok, &ShaderBackend::run_rms_norm},
      /* kMatMul       */ {matmul_ok, &ShaderBackend::run_matmul},
      /* kAdd          */ {f32_out, &ShaderBackend::run_elementwise},
      /* kMul          */ {f32_out, &ShaderBackend::run_elementwise},
      /* kScale        */ {f32_out, &ShaderBackend::run_unary},
      /* kRope         */ {rope_ok, &ShaderBackend::run_rope},
      /* kKvStore      */ {kv_store_ok, &ShaderBackend::run_kv_store},
      /* kAttention    */ {attention_ok, &ShaderBackend::run_attention},
      /* kSilu         */ {f32_out, &ShaderBackend::run_unary},
      /* kGelu         */ {f32_out, &ShaderBackend::run_unary},
      /* kSwiGLU       */ {f32_out, &ShaderBackend::run_glu},
      /* kGeGLU        */ {f32_out, &ShaderBackend::run_glu},
      /* kFusedQKV     */ {fused_qkv_ok, &ShaderBackend::run_fused_qkv},
      /* kFusedQkvNorm */ {fused_qkv_ok, &ShaderBackend::run_fused_qkv},
      /* kFusedFFN     */ {fused_ffn_ok, &ShaderBackend::run_fused_ffn},
      /* kMatMulAdd    */ {matmul_ok, &ShaderBackend::run_matmul},
      /* kArgMax       */ {node_check<backend::argmax_well_formed>, &ShaderBackend::run_argmax},
      /* kMoeTopK      */ {moe_route_ok, &ShaderBackend::run_moe_topk},
      /* kMoeWeights   */ {moe_route_ok, &ShaderBackend::run_moe_weights},
      /* kMatMulId     */ {matmul_id_ok, &ShaderBackend::run_matmul_id},
      /* kMoeSum       */ {node_check<backend::moe_sum_well_formed>, &ShaderBackend::run_moe_sum},
      /* kSwiGLUOai    */ {swiglu_oai_ok, &ShaderBackend::run_glu},
      // Collectives over tensor-parallel ranks run on the CPU.
      /* kAllReduce    */ {[](const Node&, const ShaderBackend&) { return false; }, nullptr},
      /* kAllGather    */ {[](const Node&, const ShaderBackend&) { return false; }, nullptr},
  };
  static_assert(std::size(kTable) == static_cast<size_t>(Op::kCount));
  return kTable[static_cast<size_t>(op)];
}

}  // namespace minfer::shader::detail
