// The CUDA backend's op runners: one CudaBackend member per op of the op
// table (cuda_backend.cu), each checking the node's metadata, weights and
// shapes, naming what does not fit, and enqueueing its kernels (kernels.h).
// Includes the decode fusions (FusedQKV, FusedFFN, MatMulAdd in run_matmul)
// and the input-norm helpers they share.
#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/device.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/op_support.h"
#include "backend/cuda/weights.h"

namespace minfer::cuda::detail {
namespace {

Status cache_types_status(const Node& n, const KvPair& kv, int64_t head_dim) {
  if (cache_types_ok(kv.k_type, kv.v_type, head_dim)) return Status::ok();
  return node_error(n, cache_types_problem(kv.k_type, kv.v_type, head_dim));
}

// The K-quants' tensor-core products take one activation scale per 256 values.
bool k_quant(quant::TensorType t) {
  return quant::type_traits(t).block_size == 256;
}

}  // namespace

Status CudaBackend::run_matmul(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MatMulMeta* m, node_meta<graph::MatMulMeta>(c.node));
  const DeviceWeight* w = weights_->find(m->weight);
  if (w == nullptr) return node_error(c.node, "weight '" + m->weight + "' not on the GPU");
  if (w->row_len != m->in_dim || w->rows != m->out_dim || c.node.shape.ne[0] != m->out_dim) {
    return node_error(c.node, "weight '" + m->weight + "' is [" + std::to_string(w->rows) + " x " +
                                  std::to_string(w->row_len) + "], the node wants [" +
                                  std::to_string(m->out_dim) + " x " + std::to_string(m->in_dim) +
                                  "]");
  }
  if (m->in_dim % 32 != 0) {
    return node_error(c.node,
                      "input dim " + std::to_string(m->in_dim) + " is not a multiple of 32");
  }
  const float* bias = nullptr;
  if (!m->bias.empty()) {
    const DeviceWeight* b = weights_->find(m->bias);
    if (b == nullptr) return node_error(c.node, "bias '" + m->bias + "' not on the GPU");
    bias = reinterpret_cast<const float*>(b->data);
  }
  const int64_t n_tokens = c.node.shape.ne[1];
  const bool add = c.node.op == Op::kMatMulAdd;
  if (add && (c.n_in != 2 || c.in[1] == nullptr)) {
    return node_error(c.node, "mul_mat_add takes (x, residual)");
  }
  if (use_mmq(w->type, w->row_len, n_tokens, m->batch_invariant)) {
    return run_mmq(c, *w, m->in_norm, bias, add ? c.f32_in(1) : nullptr, c.f32_out());
  }
  if (m->in_norm.on) return node_error(c.node, "an input norm needs the int8 tensor-core path");
  const bool q8 = use_q8(w->type, w->row_len, n_tokens, m->batch_invariant);
  const bool aliased = c.out == c.in[0];
  // Scratch: the quantized activations of a multi-token int8 GEMV, then the
  // output when it would overwrite the input.
  const size_t q8_bytes = q8 && n_tokens > 1 ? quantized_bytes(w->row_len, n_tokens) : 0;
  float* y = c.f32_out();
  int8_t* quantized = nullptr;
  if (aliased || q8_bytes > 0) {
    MINFER_ASSIGN_OR_RETURN(float* s, scratch(c.node, q8_bytes + (aliased ? c.node.bytes() : 0)));
    quantized = reinterpret_cast<int8_t*>(s);
    if (aliased) y = reinterpret_cast<float*>(quantized + q8_bytes);
  }
  const float* residual = add ? c.f32_in(1) : nullptr;
  if (q8) {
    MINFER_ASSIGN_OR_RETURN(Q8Input in, q8_batch_input(c, {}, w->row_len, quantized));
    in.batch_invariant = m->batch_invariant;
    MINFER_RETURN_IF_ERROR(launched(c.node, "gemv_q8",
                                    launch_gemv_q8(w->type, w->data, w->row_bytes, w->rows, in,
                                                   bias, residual, y, stream_.get())));
  } else if (add || m->batch_invariant) {
    // The f32 GEMV, one token per block (batch-invariant), with the residual
    // add in its epilogue.
    MINFER_RETURN_IF_ERROR(
        launched(c.node, "gemv_add",
                 launch_gemv_add(w->type, w->data, w->row_bytes, w->rows, w->row_len, c.f32_in(0),
                                 n_tokens, bias, residual, y, stream_.get())));
  } else {
    MINFER_RETURN_IF_ERROR(
        launched(c.node, "matmul",
                 launch_matmul(w->type, w->data, w->row_bytes, w->rows, w->row_len, c.f32_in(0),
                               n_tokens, bias, y, stream_.get())));
  }
  if (aliased) {
    MINFER_CUDA_CHECK(
        cudaMemcpyAsync(c.out, y, c.node.bytes(), cudaMemcpyDeviceToDevice, stream_.get()));
  }
  return Status::ok();
}

// Scratch: the quantized activations, then (FusedFFN) the gate and up rows,
// or (an output over its input) the output.
Status CudaBackend::run_mmq(const Call& c, const DeviceWeight& w, const graph::InputNorm& norm,
                            const float* bias, const float* residual, float* y) {
  const int64_t n_tokens = c.node.shape.ne[1];
  const bool ffn = c.node.op == Op::kFusedFFN;
  const bool aliased = c.out == c.in[0];
  // FusedFFN: room at the start for the GLU's quantized rows too (below).
  const size_t q_bytes = std::max(quantized_bytes(w.row_len, n_tokens),
                                  ffn ? quantized_bytes(w.rows, n_tokens) : size_t{0});
  const size_t rows_bytes = static_cast<size_t>(w.rows * n_tokens) * sizeof(float);
  const size_t extra = ffn ? 2 * rows_bytes : (aliased ? c.node.bytes() : 0);
  MINFER_ASSIGN_OR_RETURN(float* s, scratch(c.node, q_bytes + extra));
  auto* quantized = reinterpret_cast<int8_t*>(s);
  auto* rows_out = reinterpret_cast<float*>(quantized + q_bytes);
  const auto* m = ffn ? std::get_if<graph::FusedFfnMeta>(&c.node.meta) : nullptr;
  const DeviceWeight* up = m != nullptr ? weights_->find(m->up_weight) : nullptr;
  Q8Input in = q8_input(c, norm, w.row_len, n_tokens);
  const DeviceWeight& second = up != nullptr ? *up : w;
  const auto weight = [](const DeviceWeight& d) {
    return MmqWeight{d.type, d.data, d.row_bytes * static_cast<size_t>(d.rows)};
  };
  MINFER_RETURN_IF_ERROR(quantize_for_mmq(c, in, quantized, {weight(w), weight(second)}));
  // Kept for the next node unless this one's output overwrites its input.
  if (in.quantized != nullptr) quantized_.valid = c.out != c.in[0];
  const auto mmq = [&](const DeviceWeight& d, float* out) {
    return launched(
        c.node, "mmq",
        launch_mmq(d.type, d.data, d.row_bytes, d.rows, in, bias, residual, out, stream_.get()));
  };
  if (!ffn) {
    MINFER_RETURN_IF_ERROR(mmq(w, aliased ? rows_out : y));
    if (aliased) {
      MINFER_CUDA_CHECK(
          cudaMemcpyAsync(y, rows_out, c.node.bytes(), cudaMemcpyDeviceToDevice, stream_.get()));
    }
    return Status::ok();
  }
  float* gate_rows = rows_out;
  float* up_rows = rows_out + w.rows * n_tokens;
  if (up->type == w.type && up->row_len == w.row_len) {  // one launch for both
    const MmqStack stack{2,
                         {w.data, up->data},
                         {w.row_bytes, up->row_bytes},
                         {w.rows, up->rows},
                         {nullptr, nullptr},
                         {gate_rows, up_rows}};
    MINFER_RETURN_IF_ERROR(
        launched(c.node, "mmq", launch_mmq_stack(w.type, stack, in, stream_.get())));
  } else {
    MINFER_RETURN_IF_ERROR(mmq(w, gate_rows));
    MINFER_RETURN_IF_ERROR(mmq(*up, up_rows));
  }
  // The GLU and the next projection's quantization in one pass: the q8
  // rows of y go to the start of the scratch (x's, consumed by now), where
  // the next node's run_mmq finds them (quantized_: the same bytes
  // launch_quantize_q8 would make of y).
  Q8Input glu;
  glu.x = gate_rows;
  glu.in_dim = w.rows;
  glu.n_tokens = n_tokens;
  glu.glu_up = up_rows;
  glu.glu_out = y;
  glu.glu_gelu = m->gelu;
  // For the down projection, taken to be of the gate's family (a mismatch
  // only costs the next node a quantizer launch: quantized_ differs).
  glu.scale_per_256 = k_quant(w.type) && w.rows % 256 == 0;
  if (quantize_q8_takes(glu.in_dim, n_tokens)) {
    MINFER_RETURN_IF_ERROR(
        launched(c.node, "glu_quantize_q8", launch_quantize_q8(glu, quantized, stream_.get())));
    quantized_ = {true,     events_,          y, nullptr, false, graph::InputNorm{}.eps, w.rows,
                  n_tokens, glu.scale_per_256};
    return Status::ok();
  }
  return launched(c.node, "glu",
                  launch_elementwise(m->gelu ? Ew::kGeGLU : Ew::kSwiGLU, gate_rows, up_rows, 1.0f,
                                     w.rows * n_tokens, y, stream_.get()));
}

Status CudaBackend::run_get_rows(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::GetRowsMeta* m, node_meta<graph::GetRowsMeta>(c.node));
  const int64_t width = c.node.shape.ne[0], n_rows = c.node.shape.ne[1];
  if (m->weight.empty()) {  // rows of an activation, by a host list or by an ids input
    const int32_t* rows = nullptr;
    if (m->rows.empty() && c.n_in == 2) {
      rows = c.i32_in(1);  // the ids the runtime wrote (output rows of a paged batch)
    } else if (static_cast<int64_t>(m->rows.size()) != n_rows) {
      return node_error(c.node, std::to_string(m->rows.size()) + " row indices for " +
                                    std::to_string(n_rows) + " output rows");
    } else {
      MINFER_ASSIGN_OR_RETURN(rows, row_list(m->rows));
    }
    float* y = c.f32_out();
    const bool aliased = c.out == c.in[0];
    if (aliased) {
      MINFER_ASSIGN_OR_RETURN(y, scratch(c.node, c.node.bytes()));
    }
    MINFER_RETURN_IF_ERROR(
        launched(c.node, "gather_rows",
                 launch_gather_rows(c.f32_in(0), rows, n_rows, width, y, stream_.get())));
    if (aliased) {
      MINFER_CUDA_CHECK(
          cudaMemcpyAsync(c.out, y, c.node.bytes(), cudaMemcpyDeviceToDevice, stream_.get()));
    }
    return Status::ok();
  }
  const DeviceWeight* w = weights_->find(m->weight);
  if (w == nullptr) return node_error(c.node, "weight '" + m->weight + "' not on the GPU");
  if (w->row_len != width || width % 32 != 0) {
    return node_error(c.node, "weight '" + m->weight + "' rows have " + std::to_string(w->row_len) +
                                  " elements, the node wants " + std::to_string(width) +
                                  " (a multiple of 32)");
  }
  return launched(
      c.node, "get_rows",
      launch_get_rows_weight(w->type, w->data, w->row_bytes, w->rows, width, c.i32_in(0), n_rows,
                             m->scale, c.f32_out(), static_cast<int*>(err_.data()), stream_.get()));
}

Status CudaBackend::run_rms_norm(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::RmsNormMeta* m, node_meta<graph::RmsNormMeta>(c.node));
  const float* w = nullptr;
  if (!m->weight.empty()) {
    const DeviceWeight* v = weights_->find(m->weight);
    if (v == nullptr) return node_error(c.node, "weight '" + m->weight + "' not on the GPU");
    w = reinterpret_cast<const float*>(v->data);
  }
  const int64_t dim = c.node.shape.ne[0], rows = c.node.shape.ne[1];
  const int64_t group = m->group > 0 ? m->group : dim;
  if (dim % group != 0) {
    return node_error(c.node, "row length " + std::to_string(dim) +
                                  " is not a multiple of the group " + std::to_string(group));
  }
  return launched(c.node, "rms_norm",
                  launch_rms_norm(c.f32_in(0), w, rows * (dim / group), group, m->eps, c.f32_out(),
                                  stream_.get()));
}

Status CudaBackend::run_rope(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::RopeMeta* m, node_meta<graph::RopeMeta>(c.node));
  const float* factors = nullptr;
  if (!m->freq_factors.empty()) {
    const DeviceWeight* v = weights_->find(m->freq_factors);
    if (v == nullptr) return node_error(c.node, "weight '" + m->freq_factors + "' not on the GPU");
    factors = reinterpret_cast<const float*>(v->data);
  }
  if (m->n_rot <= 0 || m->n_rot % 2 != 0 || m->n_rot > m->head_dim || m->head_dim % 2 != 0 ||
      m->n_heads * m->head_dim != c.node.shape.ne[0] || !(m->freq_base > 0.0f)) {
    return node_error(c.node, "rope shape: n_rot " + std::to_string(m->n_rot) + ", head_dim " +
                                  std::to_string(m->head_dim) + ", n_heads " +
                                  std::to_string(m->n_heads) + ", row " +
                                  std::to_string(c.node.shape.ne[0]));
  }
  const YarnArgs yarn{m->ext_factor, m->corr_low, m->corr_high, m->mscale};
  return launched(c.node, "rope",
                  launch_rope(c.f32_in(0), c.node.shape.ne[1], m->n_heads, m->head_dim, m->n_rot,
                              c.i32_in(1), m->freq_base, m->freq_scale, factors, yarn,
                              m->mode == graph::RopeMode::kNeox, c.f32_out(), stream_.get()));
}

Status CudaBackend::run_kv_store(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::KvMeta* m, node_meta<graph::KvMeta>(c.node));
  if (c.kv == nullptr || c.k_cache == nullptr || c.v_cache == nullptr) {
    return node_error(c.node, "no KV cache for layer " + std::to_string(m->layer));
  }
  MINFER_RETURN_IF_ERROR(cache_types_status(c.node, *c.kv, m->head_dim));
  return launched(
      c.node, "kv_store",
      launch_kv_store(c.f32_in(0), c.f32_in(1), c.i32_in(2), m->n_tokens,
                      m->n_head_kv * m->head_dim, c.kv->n_ctx, c.kv->k_type, c.kv->v_type,
                      c.k_cache, c.v_cache, static_cast<int*>(err_.data()), stream_.get()));
}

Status CudaBackend::run_attention(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::AttentionMeta* m, node_meta<graph::AttentionMeta>(c.node));
  if (c.kv == nullptr || c.k_cache == nullptr || c.v_cache == nullptr) {
    return node_error(c.node, "no KV cache for layer " + std::to_string(m->layer));
  }
  if (!attention_head_dim_ok(m->head_dim) || m->n_head_kv <= 0 || m->n_head % m->n_head_kv != 0 ||
      m->n_head * m->head_dim != c.node.shape.ne[0]) {
    return node_error(c.node, "attention shape the kernel refuses: n_head " +
                                  std::to_string(m->n_head) + ", n_head_kv " +
                                  std::to_string(m->n_head_kv) + ", head_dim " +
                                  std::to_string(m->head_dim) + " (32, 64, 96, 128 or 256), row " +
                                  std::to_string(c.node.shape.ne[0]));
  }
  MINFER_RETURN_IF_ERROR(cache_types_status(c.node, *c.kv, m->head_dim));
  if (c.out == c.in[0]) return node_error(c.node, "output aliases the query buffer");
  AttentionArgs a;
  MINFER_ASSIGN_OR_RETURN(a.sinks, sink_logits(c.node, *m));
  a.q = c.f32_in(0);
  a.k_cache = c.k_cache;
  a.v_cache = c.v_cache;
  a.k_type = c.kv->k_type;
  a.v_type = c.kv->v_type;
  const int64_t q_dim = m->n_head * m->head_dim, kv_dim = m->n_head_kv * m->head_dim;
  if (m->packed_qkv && m->page_size == 0) {  // one token's [q | k | v] row (a FusedQKV output)
    if (c.n_in != 2 || c.node.shape.ne[1] != 1) {
      return node_error(c.node, "packed q|k|v attention takes (packed, positions) for one token");
    }
    a.positions = c.i32_in(1);
    a.batch_k = c.f32_in(0) + q_dim;
    a.batch_v = c.f32_in(0) + q_dim + kv_dim;
  } else if (m->page_size > 0) {
    // (q, store, positions, seq_slots, page_table), or (packed, positions,
    // seq_slots, page_table) whose rows hold each token's q first.
    const size_t first = m->packed_qkv ? 1 : 2;
    if (c.n_in != first + 3 || m->max_pages <= 0 || c.kv->n_ctx % m->page_size != 0) {
      return node_error(c.node,
                        "paged attention takes (q, store, positions, seq_slots, page_table) or "
                        "(packed, positions, seq_slots, page_table) over a cache of whole pages");
    }
    a.positions = c.i32_in(first);
    a.seq_slots = c.i32_in(first + 1);
    a.page_table = c.i32_in(first + 2);
    a.page_size = m->page_size;
    a.max_pages = m->max_pages;
    a.one_sequence = m->one_sequence;
    if (m->packed_qkv) a.q_stride = q_dim + 2 * kv_dim;
    // One sequence, not batch-invariant (a CLI command's engine): its
    // batch's own k and v in f32, as a Session reads them (the cache's
    // rows are f16 or q8_0); a batch-invariant one reads only the cache,
    // as every engine with more slots does.
    if (m->packed_qkv && m->one_sequence && !m->batch_invariant) {
      a.batch_k = c.f32_in(0) + q_dim;
      a.batch_v = c.f32_in(0) + q_dim + kv_dim;
      a.batch_stride = q_dim + 2 * kv_dim;
    }
  } else {
    a.positions = c.i32_in(2);
    if (c.n_in >= 5) {
      a.batch_k = c.f32_in(3);
      a.batch_v = c.f32_in(4);
    }
  }
  a.n_tokens = c.node.shape.ne[1];
  a.n_ctx = c.kv->n_ctx;
  a.n_head = m->n_head;
  a.n_head_kv = m->n_head_kv;
  a.head_dim = m->head_dim;
  a.scale = m->scale;
  a.sliding_window = m->sliding_window;
  a.out = c.f32_out();
  a.err = static_cast<int*>(err_.data());
  a.split_kv = split_kv_;
  a.batch_invariant = m->batch_invariant;
  return launched(c.node, "attention", launch_attention(a, stream_.get()));
}

Result<const float*> CudaBackend::sink_logits(const Node& n, const graph::AttentionMeta& m) const {
  if (m.sinks.empty()) return static_cast<const float*>(nullptr);
  const DeviceWeight* w = weights_->find(m.sinks);
  if (w == nullptr || w->type != quant::TensorType::F32 || w->rows * w->row_len != m.n_head) {
    return node_error(
        n, "sink weight '" + m.sinks + "' missing or not f32 [" + std::to_string(m.n_head) + "]");
  }
  return reinterpret_cast<const float*>(w->data);
}

Status CudaBackend::run_swiglu_oai(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::GluMeta* m, node_meta<graph::GluMeta>(c.node));
  if (c.n_in != 2 || c.in[0] == nullptr || c.in[1] == nullptr) {
    return node_error(c.node, "swiglu_oai takes (gate, up)");
  }
  return launched(c.node, "swiglu_oai",
                  launch_swiglu_oai(c.f32_in(0), c.f32_in(1), c.node.shape.elements(), m->alpha,
                                    m->limit, c.f32_out(), stream_.get()));
}

Status CudaBackend::run_elementwise(const Call& c) {
  const int64_t n = c.node.shape.elements();
  Ew op;
  float s = 1.0f;
  switch (c.node.op) {
    case Op::kAdd:
      op = Ew::kAdd;
      break;
    case Op::kMul:
      op = Ew::kMul;
      break;
    case Op::kScale: {
      MINFER_ASSIGN_OR_RETURN(const graph::ScaleMeta* m, node_meta<graph::ScaleMeta>(c.node));
      op = Ew::kScale;
      s = m->scale;
      break;
    }
    case Op::kSilu:
      op = Ew::kSilu;
      break;
    case Op::kGelu:
      op = Ew::kGelu;
      break;
    case Op::kSwiGLU:
      op = Ew::kSwiGLU;
      break;
    case Op::kGeGLU:
      op = Ew::kGeGLU;
      break;
    default:
      return node_error(c.node, "not an elementwise op");
  }
  const bool binary = op == Ew::kAdd || op == Ew::kMul || op == Ew::kSwiGLU || op == Ew::kGeGLU;
  if (c.in[0] == nullptr || (binary && (c.n_in < 2 || c.in[1] == nullptr))) {
    return node_error(c.node, "missing input");
  }
  return launched(c.node, "elementwise",
                  launch_elementwise(op, c.f32_in(0), binary ? c.f32_in(1) : nullptr, s, n,
                                     c.f32_out(), stream_.get()));
}

Status CudaBackend::run_argmax(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::ArgMaxMeta* m, node_meta<graph::ArgMaxMeta>(c.node));
  if (c.n_in != 1 || c.in[0] == nullptr) return node_error(c.node, "missing input");
  const int64_t rows = c.node.shape.ne[1];
  MINFER_ASSIGN_OR_RETURN(float* part, scratch(c.node, argmax_scratch_bytes(rows, m->row_len)));
  return launched(c.node, "argmax",
                  launch_argmax(c.f32_in(0), rows, m->row_len, part, static_cast<int32_t*>(c.out),
                                stream_.get()));
}

Result<const float*> CudaBackend::normalized_input(const Call& c, const graph::InputNorm& norm,
                                                   int64_t dim) {
  if (!norm.on) return c.f32_in(0);
  const int64_t rows = c.node.shape.ne[1];
  MINFER_ASSIGN_OR_RETURN(float* x, scratch(c.node, static_cast<size_t>(rows * dim) * 4));
  MINFER_RETURN_IF_ERROR(launched(
      c.node, "rms_norm",
      launch_rms_norm(c.f32_in(0), norm_weight(norm), rows, dim, norm.eps, x, stream_.get())));
  return static_cast<const float*>(x);
}

size_t CudaBackend::quantized_bytes(int64_t dim, int64_t n_tokens) {
  const size_t b = q8_activation_bytes(dim) * static_cast<size_t>(n_tokens);
  return (b + 255) / 256 * 256;
}

Result<Q8Input> CudaBackend::q8_batch_input(const Call& c, const graph::InputNorm& norm,
                                            int64_t dim, int8_t* quantized) {
  Q8Input in = q8_input(c, norm, dim, c.node.shape.ne[1]);
  if (in.n_tokens == 1) return in;
  MINFER_RETURN_IF_ERROR(
      launched(c.node, "quantize_q8", launch_quantize_q8(in, quantized, stream_.get())));
  in.quantized = quantized;
  return in;
}

Status CudaBackend::quantize_for_mmq(const Call& c, Q8Input& in, int8_t* quantized,
                                     std::initializer_list<MmqWeight> weights) {
  // One scale per 256 values where a K-quant reads them (the others read either).
  for (const MmqWeight& w : weights) in.scale_per_256 = in.scale_per_256 || k_quant(w.type);
  if (!quantized_.same(in, events_)) {
    bool itself = weights.size() != 0;  // one token: the one-token kernel's prologue
    size_t bytes = 0;
    const void* last = nullptr;
    for (const MmqWeight& w : weights) {
      itself = itself && mmq_takes_unquantized(w.type, w.data, in);
      if (w.data != last) bytes += w.bytes;
      last = w.data;
    }
    if (itself && mmq_quantizes_itself(bytes)) {
      quantized_.valid = false;  // nothing written for the next node
      return Status::ok();
    }
    MINFER_RETURN_IF_ERROR(
        launched(c.node, "quantize_q8", launch_quantize_q8(in, quantized, stream_.get())));
  }
  in.quantized = quantized;
  quantized_ = {true,   events_,   in.x,        in.norm_weight,  in.rms_norm,
                in.eps, in.in_dim, in.n_tokens, in.scale_per_256};
  return Status::ok();
}

Q8Input CudaBackend::q8_input(const Call& c, const graph::InputNorm& norm, int64_t dim,
                              int64_t n_tokens) const {
  Q8Input in;
  in.x = c.f32_in(0);
  in.in_dim = dim;
  in.n_tokens = n_tokens;
  in.rms_norm = norm.on;
  in.eps = norm.eps;
  in.norm_weight = norm_weight(norm);
  return in;
}

Status CudaBackend::run_fused_qkv(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::FusedQkvMeta* m, node_meta<graph::FusedQkvMeta>(c.node));
  if (!fused_qkv_ok(c.node, *weights_)) {
    return node_error(c.node, "weights or shapes the fused q|k|v kernel refuses (head_dim " +
                                  std::to_string(m->rope.head_dim) + ", tokens " +
                                  std::to_string(c.node.shape.ne[1]) + ")");
  }
  if (c.kv == nullptr || c.k_cache == nullptr || c.v_cache == nullptr) {
    return node_error(c.node, "no KV cache for layer " + std::to_string(m->kv.layer));
  }
  MINFER_RETURN_IF_ERROR(cache_types_status(c.node, *c.kv, m->kv.head_dim));
  if (c.out == c.in[0]) return node_error(c.node, "output aliases the input");
  FusedQkvArgs a;
  const std::string* names[3] = {&m->q_weight, &m->k_weight, &m->v_weight};
  const std::string* biases[3] = {&m->q_bias, &m->k_bias, &m->v_bias};
  for (int i = 0; i < 3; ++i) {
    const DeviceWeight* w = weights_->find(*names[i]);
    a.type[i] = w->type;
    a.w[i] = w->data;
    a.row_bytes[i] = w->row_bytes;
    a.rows[i] = w->rows;
    a.bias[i] = device_vector(*biases[i]);
  }
  a.in_dim = m->in_dim;
  a.n_tokens = c.node.shape.ne[1];
  a.out = c.f32_out();
  set_qkv_post_args(c, *m, a);
  if (a.n_tokens > 1 || m->batch_invariant) return run_qkv_mmq(c, *m, a);
  a.q8_gemv = a.type[0] == a.type[1] && has_stacked_q8(a.type[0], a.type[2], m->in_dim) &&
              use_q8(a.type[0], m->in_dim, 1, false) && use_q8(a.type[2], m->in_dim, 1, false);
  if (a.q8_gemv) {
    a.q8 = q8_input(c, m->in_norm, m->in_dim, 1);
    a.x = a.q8.x;
  } else {
    MINFER_ASSIGN_OR_RETURN(a.x, normalized_input(c, m->in_norm, m->in_dim));
  }
  return launched(c.node, "fused_qkv", launch_fused_qkv(a, stream_.get()));
}

// The three projections on the int8 tensor cores (one quantization of the
// shared input) into scratch, then the per-head kernel packs, rotates and
// stores them.
Status CudaBackend::run_qkv_mmq(const Call& c, const graph::FusedQkvMeta& m, FusedQkvArgs& a) {
  if (!fused_qkv_path(m, a.n_tokens)) {
    return node_error(c.node, "q|k|v weights the int8 tensor-core path refuses for " +
                                  std::to_string(a.n_tokens) + " tokens");
  }
  const size_t q_bytes = quantized_bytes(m.in_dim, a.n_tokens);
  const int64_t width = a.rows[0] + a.rows[1] + a.rows[2];
  MINFER_ASSIGN_OR_RETURN(
      float* s, scratch(c.node, q_bytes + static_cast<size_t>(width * a.n_tokens) * sizeof(float)));
  auto* quantized = reinterpret_cast<int8_t*>(s);
  auto* proj = reinterpret_cast<float*>(quantized + q_bytes);
  Q8Input in = q8_input(c, m.in_norm, m.in_dim, a.n_tokens);
  const auto weight = [&](int i) {
    return MmqWeight{a.type[i], a.w[i], a.row_bytes[i] * static_cast<size_t>(a.rows[i])};
  };
  MINFER_RETURN_IF_ERROR(quantize_for_mmq(c, in, quantized, {weight(0), weight(1), weight(2)}));
  // Consecutive projections of one type share a launch (all three on most
  // files; q|k and v where a K-quant mix gives v another type).
  float* y = proj;
  for (int i = 0; i < 3;) {
    MmqStack stack;
    for (; i < 3 && (stack.n == 0 || a.type[i] == a.type[i - 1]); ++i, ++stack.n) {
      stack.w[stack.n] = a.w[i];
      stack.row_bytes[stack.n] = a.row_bytes[i];
      stack.rows[stack.n] = a.rows[i];
      stack.bias[stack.n] = a.bias[i];
      stack.y[stack.n] = y;
      y += a.rows[i] * a.n_tokens;
    }
    MINFER_RETURN_IF_ERROR(
        launched(c.node, "mmq", launch_mmq_stack(a.type[i - 1], stack, in, stream_.get())));
  }
  a.proj = proj;
  return launched(c.node, "qkv_post", launch_qkv_post(a, stream_.get()));
}

void CudaBackend::set_qkv_post_args(const Call& c, const graph::FusedQkvMeta& m,
                                    FusedQkvArgs& a) const {
  a.n_head = m.n_head;
  a.n_head_kv = m.kv.n_head_kv;
  a.head_dim = m.rope.head_dim;
  a.n_rot = m.rope.n_rot;
  a.neox = m.rope.mode == graph::RopeMode::kNeox;
  a.freq_base = m.rope.freq_base;
  a.freq_scale = m.rope.freq_scale;
  a.freq_factors = device_vector(m.rope.freq_factors);
  a.yarn = {m.rope.ext_factor, m.rope.corr_low, m.rope.corr_high, m.rope.mscale};
  a.q_norm = device_vector(m.q_norm);
  a.k_norm = device_vector(m.k_norm);
  a.eps = m.norm_eps;
  a.positions = c.i32_in(1);
  a.cells = m.kv.page_size > 0 ? c.i32_in(2) : nullptr;
  a.n_ctx = c.kv->n_ctx;
  a.k_type = c.kv->k_type;
  a.v_type = c.kv->v_type;
  a.k_cache = c.k_cache;
  a.v_cache = c.v_cache;
  a.err = static_cast<int*>(err_.data());
}

Status CudaBackend::run_fused_ffn(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::FusedFfnMeta* m, node_meta<graph::FusedFfnMeta>(c.node));
  if (!fused_ffn_ok(c.node, *weights_)) {
    return node_error(c.node, "weights '" + m->gate_weight + "' / '" + m->up_weight +
                                  "' or the shape do not fit the fused FFN kernel");
  }
  if (c.out == c.in[0]) return node_error(c.node, "output aliases the input");
  const DeviceWeight* g = weights_->find(m->gate_weight);
  const DeviceWeight* u = weights_->find(m->up_weight);
  const int64_t n_tokens = c.node.shape.ne[1];
  if (use_mmq(g->type, m->in_dim, n_tokens, m->batch_invariant)) {
    return run_mmq(c, *g, m->in_norm, nullptr, nullptr, c.f32_out());
  }
  if (use_q8(g->type, m->in_dim, n_tokens, m->batch_invariant)) {
    int8_t* quantized = nullptr;
    if (n_tokens > 1) {
      MINFER_ASSIGN_OR_RETURN(float* s, scratch(c.node, quantized_bytes(m->in_dim, n_tokens)));
      quantized = reinterpret_cast<int8_t*>(s);
    }
    MINFER_ASSIGN_OR_RETURN(Q8Input in, q8_batch_input(c, m->in_norm, m->in_dim, quantized));
    in.batch_invariant = m->batch_invariant;
    return launched(c.node, "ffn_q8",
                    launch_ffn_q8(g->type, g->data, u->data, g->row_bytes, m->n_ff, in, m->gelu,
                                  c.f32_out(), stream_.get()));
  }
  MINFER_ASSIGN_OR_RETURN(const float* x, normalized_input(c, m->in_norm, m->in_dim));
  return launched(c.node, "fused_ffn",
                  launch_fused_ffn(g->type, g->data, u->data, g->row_bytes, m->n_ff, m->in_dim, x,
                                   n_tokens, m->gelu, c.f32_out(), stream_.get()));
}

}  // namespace minfer::cuda::detail
