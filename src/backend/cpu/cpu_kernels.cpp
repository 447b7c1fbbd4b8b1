// The CPU backend's op kernels: unpack a node's metadata and buffers and call
// the row-wise kernels of backend/cpu/{matmul,ops}.h.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/quantize_acts.h"
#include "graph/node_status.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/reference.h"

namespace minfer::cpu {
namespace {

using graph::DType;
using graph::Node;
using graph::Op;

using graph::node_error;
using graph::node_meta;

const float* f32(const void* p) {
  return static_cast<const float*>(p);
}
float* f32(void* p) {
  return static_cast<float*>(p);
}

// The kernel-level cache type of a KV region, or an error naming the type.
Result<KvType> cache_type(quant::TensorType t, int64_t head_dim) {
  switch (t) {
    case quant::TensorType::F32:
      return KvType::kF32;
    case quant::TensorType::F16:
      return KvType::kF16;
    case quant::TensorType::Q8_0:
      if (head_dim % quant::kQK != 0) {
        return Status::internal("a q8_0 KV cache needs head_dim a multiple of 32, got " +
                                std::to_string(head_dim));
      }
      return KvType::kQ8_0;
    default:
      return Status::internal("KV cache type " + std::string(quant::type_name(t)) +
                              " is not supported (F32, F16, Q8_0)");
  }
}

// Writes one cache row of n elements: a copy, f16 rounding or Q8_0 blocks.
Status store_cache_row(KvType type, const float* src, uint8_t* dst, int64_t n) {
  switch (type) {
    case KvType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return Status::ok();
    case KvType::kF16: {
      auto* h = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = quant::f32_to_f16(src[i]);
      return Status::ok();
    }
    case KvType::kQ8_0:
      return quantize_activations(quant::TensorType::Q8_0, src, dst, n);
  }
  return Status::internal("unknown KV cache type");
}

// The attention node's sink logits (null when it has none).
Result<const float*> sink_logits(const model::Weights& weights, const graph::AttentionMeta& m) {
  if (m.sinks.empty()) return static_cast<const float*>(nullptr);
  const model::WeightView* w = weights.find(m.sinks);
  if (w == nullptr || w->type != quant::TensorType::F32 ||
      w->nbytes != static_cast<size_t>(m.n_head) * sizeof(float)) {
    return Status::internal("sink weight '" + m.sinks + "' missing or not f32 [" +
                            std::to_string(m.n_head) + "]");
  }
  return f32(w->data);
}

}  // namespace

Result<const PackedWeight*> CpuBackend::packed(const std::string& name, const MatmulWeight& w) {
  if (!repack_weights_ || active_isa() != Isa::kAvx2 || !packable(w.type)) {
    return static_cast<const PackedWeight*>(nullptr);
  }
  auto it = packed_.find(name);
  if (it == packed_.end()) {
    Result<PackedWeight> p = pack_weight(w, pool_);
    if (!p) return p.status().with_context("weight '" + name + "'");
    it = packed_.emplace(name, std::move(*p)).first;
  }
  return &it->second;
}

Status CpuBackend::run_matmul(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MatMulMeta* m, node_meta<graph::MatMulMeta>(c.node));
  const model::WeightView* w = weights_.find(m->weight);
  if (w == nullptr) return node_error(c.node, "weight '" + m->weight + "' not found");
  const int64_t n_tokens = c.node.shape.ne[1];
  MatmulWeight mw{w->type, w->rows(), w->row_length(), w->data, 0};
  if (mw.row_len != m->in_dim || mw.rows != m->out_dim) {
    return node_error(c.node, "weight '" + m->weight + "' shape differs from the node's metadata");
  }
  // The kernel must not write over its input: stage through scratch when the
  // planner gave the output the input's buffer.
  float* y = f32(c.out);
  const bool aliased = c.out == c.in[0];
  if (aliased) {
    staging_.resize(static_cast<size_t>(n_tokens * m->out_dim));
    y = staging_.data();
  }
  const MatmulMode mode{m->batch_invariant};
  const PackedWeight* pw = nullptr;
  if (!takes_vnni(mw.type, n_tokens, mode)) {
    Result<const PackedWeight*> p = packed(m->weight, mw);
    if (!p) return node_error(c.node, p.message());
    pw = *p;
  }
  Status s = pw != nullptr ? packed_matmul(*pw, f32(c.in[0]), n_tokens, y, pool_, scratch_)
                           : matmul(mw, f32(c.in[0]), n_tokens, y, pool_, scratch_, mode);
  if (!s) return node_error(c.node, s.message());
  if (!m->bias.empty()) {
    const model::WeightView* b = weights_.find(m->bias);
    if (b == nullptr) return node_error(c.node, "bias '" + m->bias + "' not found");
    for (int64_t t = 0; t < n_tokens; ++t)
      add(y + t * m->out_dim, f32(b->data), m->out_dim, y + t * m->out_dim);
  }
  if (aliased) std::memcpy(c.out, staging_.data(), staging_.size() * sizeof(float));
  return Status::ok();
}

Status CpuBackend::run_get_rows(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::GetRowsMeta* m, node_meta<graph::GetRowsMeta>(c.node));
  const int64_t width = c.node.shape.ne[0], n_rows = c.node.shape.ne[1];
  float* out = f32(c.out);
  if (m->weight.empty()) {  // gather rows of an activation (may be in place: rows ascend)
    const float* x = f32(c.in[0]);
    const auto* ids = m->rows.empty() ? static_cast<const int32_t*>(c.in[1]) : m->rows.data();
    // Rows the input holds (its buffer may be larger: slots are reused).
    const auto n_in =
        static_cast<int64_t>(c.in_bytes[0] / (static_cast<size_t>(width) * sizeof(float)));
    for (int64_t r = 0; r < n_rows; ++r) {
      if (ids[r] < 0 || ids[r] >= n_in) {
        return node_error(c.node, "row " + std::to_string(ids[r]) + " outside the input's " +
                                      std::to_string(n_in) + " rows");
      }
      std::memmove(out + r * width, x + static_cast<int64_t>(ids[r]) * width,
                   static_cast<size_t>(width) * sizeof(float));
    }
    return Status::ok();
  }
  const model::WeightView* w = weights_.find(m->weight);
  if (w == nullptr) return node_error(c.node, "weight '" + m->weight + "' not found");
  const auto* ids = static_cast<const int32_t*>(c.in[0]);
  for (int64_t r = 0; r < n_rows; ++r) {
    if (ids[r] < 0 || ids[r] >= w->rows()) {
      return node_error(c.node, "token id " + std::to_string(ids[r]) + " outside [0, " +
                                    std::to_string(w->rows()) + ")");
    }
    const uint8_t* row = w->data + static_cast<size_t>(ids[r]) * w->row_bytes();
    MINFER_RETURN_IF_ERROR(quant::dequantize_row(w->type, row, out + r * width, width));
    if (m->scale != 1.0f) scale(out + r * width, width, m->scale, out + r * width);
  }
  return Status::ok();
}

Status CpuBackend::run_rms_norm(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::RmsNormMeta* m, node_meta<graph::RmsNormMeta>(c.node));
  const float* w = nullptr;
  if (!m->weight.empty()) {
    const model::WeightView* v = weights_.find(m->weight);
    if (v == nullptr) return node_error(c.node, "weight '" + m->weight + "' not found");
    w = f32(v->data);
  }
  const int64_t dim = c.node.shape.ne[0], rows = c.node.shape.ne[1];
  if (m->group > 0) {
    if (dim % m->group != 0) return node_error(c.node, "row length not a multiple of the group");
    rms_norm_heads(f32(c.in[0]), w, rows, dim / m->group, m->group, m->eps, f32(c.out));
  } else {
    rms_norm(f32(c.in[0]), w, rows, dim, m->eps, f32(c.out));
  }
  return Status::ok();
}

Status CpuBackend::run_rope(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::RopeMeta* m, node_meta<graph::RopeMeta>(c.node));
  const float* factors = nullptr;
  if (!m->freq_factors.empty()) {
    const model::WeightView* v = weights_.find(m->freq_factors);
    if (v == nullptr) return node_error(c.node, "weight '" + m->freq_factors + "' not found");
    factors = f32(v->data);
  }
  const RopeMode mode = m->mode == graph::RopeMode::kNeox ? RopeMode::kNeox : RopeMode::kNormal;
  const RopeYarn yarn{m->ext_factor, m->corr_low, m->corr_high, m->mscale};
  Status s = rope(f32(c.in[0]), c.node.shape.ne[1], m->n_heads, m->head_dim, m->n_rot,
                  static_cast<const int32_t*>(c.in[1]), m->freq_base, m->freq_scale, factors, mode,
                  f32(c.out), yarn);
  return s ? s : node_error(c.node, s.message());
}

Status CpuBackend::run_kv_store(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::KvMeta* m, node_meta<graph::KvMeta>(c.node));
  if (c.kv == nullptr || c.k_cache == nullptr || c.v_cache == nullptr) {
    return node_error(c.node, "no KV cache for layer " + std::to_string(m->layer));
  }
  Result<KvType> k_type = cache_type(c.kv->k_type, m->head_dim);
  if (!k_type) return node_error(c.node, k_type.message());
  Result<KvType> v_type = cache_type(c.kv->v_type, m->head_dim);
  if (!v_type) return node_error(c.node, v_type.message());
  const int64_t row = m->n_head_kv * m->head_dim;
  const size_t k_row_bytes = kv_bytes(*k_type, row), v_row_bytes = kv_bytes(*v_type, row);
  const auto* pos = static_cast<const int32_t*>(c.in[2]);
  const int64_t n = c.kv->n_ctx;
  const float* k = f32(c.in[0]);
  const float* v = f32(c.in[1]);
  auto* kc = static_cast<uint8_t*>(c.k_cache);
  auto* vc = static_cast<uint8_t*>(c.v_cache);
  for (int64_t t = 0; t < m->n_tokens; ++t) {
    if (pos[t] < 0 || pos[t] >= n) {
      return node_error(c.node, "position " + std::to_string(pos[t]) + " outside the cache of " +
                                    std::to_string(n) + " rows");
    }
    const auto p = static_cast<size_t>(pos[t]);
    Status s = store_cache_row(*k_type, k + t * row, kc + p * k_row_bytes, row);
    if (s) s = store_cache_row(*v_type, v + t * row, vc + p * v_row_bytes, row);
    if (!s) return node_error(c.node, "position " + std::to_string(pos[t]) + ": " + s.message());
  }
  return Status::ok();
}

// A paged attention's page tables (inputs 3 and 4): every page a query reads
// must be a page of the cache.
Status CpuBackend::paged_view(const Call& c, const graph::AttentionMeta& m,
                              AttentionShape& shape) const {
  const auto* pos = static_cast<const int32_t*>(c.in[2]);
  const auto* slots = static_cast<const int32_t*>(c.in[3]);
  const auto* table = static_cast<const int32_t*>(c.in[4]);
  const int64_t n_slots =
      static_cast<int64_t>(c.in_bytes[4] / sizeof(int32_t)) / std::max<int64_t>(m.max_pages, 1);
  const int64_t n_pages = c.kv->n_ctx / m.page_size;
  for (int64_t t = 0; t < shape.n_tokens; ++t) {
    if (slots[t] < 0 || slots[t] >= n_slots || pos[t] < 0 || pos[t] / m.page_size >= m.max_pages) {
      return node_error(c.node, "token " + std::to_string(t) + ": slot " +
                                    std::to_string(slots[t]) + ", position " +
                                    std::to_string(pos[t]) + " outside the page tables");
    }
    const int32_t* row = table + slots[t] * m.max_pages;
    for (int64_t p = 0; p <= pos[t] / m.page_size; ++p) {
      if (row[p] < 0 || row[p] >= n_pages) {
        return node_error(c.node, "token " + std::to_string(t) + " reads page " +
                                      std::to_string(row[p]) + " of a pool of " +
                                      std::to_string(n_pages));
      }
    }
  }
  shape.seq_slots = slots;
  shape.page_table = table;
  shape.page_size = m.page_size;
  shape.max_pages = m.max_pages;
  return Status::ok();
}

Status CpuBackend::run_attention(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::AttentionMeta* m, node_meta<graph::AttentionMeta>(c.node));
  if (c.kv == nullptr || c.k_cache == nullptr || c.v_cache == nullptr) {
    return node_error(c.node, "no KV cache for layer " + std::to_string(m->layer));
  }
  Result<KvType> k_type = cache_type(c.kv->k_type, m->head_dim);
  if (!k_type) return node_error(c.node, k_type.message());
  Result<KvType> v_type = cache_type(c.kv->v_type, m->head_dim);
  if (!v_type) return node_error(c.node, v_type.message());
  AttentionShape shape;
  shape.n_tokens = c.node.shape.ne[1];
  const auto* pos = static_cast<const int32_t*>(c.in[2]);
  int64_t n_kv = 0;  // keys up to the furthest query position are visible
  for (int64_t t = 0; t < shape.n_tokens; ++t) n_kv = std::max<int64_t>(n_kv, pos[t] + 1);
  if (m->page_size > 0) {
    MINFER_RETURN_IF_ERROR(paged_view(c, *m, shape));
  } else if (n_kv > c.kv->n_ctx) {
    return node_error(c.node, "position past the KV cache");
  }
  shape.n_kv = n_kv;
  shape.n_head = m->n_head;
  shape.n_head_kv = m->n_head_kv;
  shape.head_dim = m->head_dim;
  shape.scale = m->scale;
  shape.sliding_window = m->sliding_window;
  Result<const float*> sinks = sink_logits(weights_, *m);
  if (!sinks) return node_error(c.node, sinks.message());
  shape.sinks = *sinks;
  // llama.cpp's CPU attention switches numerics at 64 queries: smaller
  // batches (decoding) take a per-row path (in half precision for f16
  // caches); larger ones a tiled f32 path, for f32/f16 caches only. We follow
  // the same split: small batches use the per-row path, large ones read the
  // batch's own keys/values (inputs 3 and 4) at full precision when the
  // positions are consecutive (attention() ignores them for q8_0 caches).
  constexpr int64_t kTiledFromQueries = 64;
  // Paged batches mix sequences: one path (per row) for every batch, so that
  // a token's result never depends on what it was batched with; unless the
  // graph gives the batch's own k and v (GraphParams::paged_batch_kv: inputs
  // 5 and 6), and the batch then switches like an unpaged one.
  bool consecutive = shape.n_tokens >= kTiledFromQueries;
  for (int64_t t = 1; t < shape.n_tokens && consecutive; ++t) consecutive = pos[t] == pos[0] + t;
  const size_t kv_in = m->page_size > 0 ? 5 : 3;
  if (consecutive && c.in.size() >= kv_in + 2 && c.in[kv_in] != nullptr &&
      c.in[kv_in + 1] != nullptr) {
    shape.batch_k = f32(c.in[kv_in]);
    shape.batch_v = f32(c.in[kv_in + 1]);
    shape.batch_first = pos[0];
  }
  shape.per_row =
      shape.n_tokens < kTiledFromQueries || (m->page_size > 0 && shape.batch_k == nullptr);
  if (c.out == c.in[0]) return node_error(c.node, "output aliases the query buffer");
  Status s = attention(f32(c.in[0]), c.k_cache, *k_type, c.v_cache, *v_type, pos, shape, f32(c.out),
                       pool_);
  return s ? s : node_error(c.node, s.message());
}

Status CpuBackend::run_elementwise(const Call& c) {
  const int64_t n = c.node.shape.elements();
  float* y = f32(c.out);
  switch (c.node.op) {
    case Op::kAdd:
      add(f32(c.in[0]), f32(c.in[1]), n, y);
      break;
    case Op::kMul:
      mul(f32(c.in[0]), f32(c.in[1]), n, y);
      break;
    case Op::kScale: {
      MINFER_ASSIGN_OR_RETURN(const graph::ScaleMeta* m, node_meta<graph::ScaleMeta>(c.node));
      scale(f32(c.in[0]), n, m->scale, y);
      break;
    }
    case Op::kSilu:
      silu(f32(c.in[0]), n, y);
      break;
    case Op::kGelu:
      gelu(f32(c.in[0]), n, y);
      break;
    case Op::kSwiGLU:
      swiglu(f32(c.in[0]), f32(c.in[1]), n, y);
      break;
    case Op::kGeGLU:
      geglu(f32(c.in[0]), f32(c.in[1]), n, y);
      break;
    case Op::kSwiGLUOai: {
      MINFER_ASSIGN_OR_RETURN(const graph::GluMeta* m, node_meta<graph::GluMeta>(c.node));
      const auto bytes = static_cast<size_t>(n) * sizeof(float);
      if (c.in_bytes[0] < bytes || c.in_bytes[1] < bytes) {
        return node_error(
            c.node, "gate or up holds fewer than the output's " + std::to_string(n) + " elements");
      }
      swiglu_oai(f32(c.in[0]), f32(c.in[1]), n, m->alpha, m->limit, y);
      break;
    }
    default:
      return node_error(c.node, "not an elementwise op");
  }
  return Status::ok();
}

// Each row's first largest element; NaN never wins, -1 when every element is
// -inf or NaN (the greedy sampler's choice, runtime/sampler.h).
Status CpuBackend::run_argmax(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::ArgMaxMeta* m, node_meta<graph::ArgMaxMeta>(c.node));
  const int64_t rows = c.node.shape.ne[1], width = m->row_len;
  if (c.in_bytes[0] < static_cast<size_t>(rows * width) * sizeof(float)) {
    return node_error(c.node, "input holds fewer than " + std::to_string(rows) + " rows of " +
                                  std::to_string(width));
  }
  const float* x = f32(c.in[0]);
  auto* out = static_cast<int32_t*>(c.out);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * width;
    float best = -std::numeric_limits<float>::infinity();
    int32_t id = -1;
    for (int64_t i = 0; i < width; ++i) {
      if (row[i] > best) {
        best = row[i];
        id = static_cast<int32_t>(i);
      }
    }
    out[r] = id;
  }
  return Status::ok();
}

}  // namespace minfer::cpu
