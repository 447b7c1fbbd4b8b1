#include "backend/cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/vec_dot.h"
#include "backend/node_checks.h"
#include "graph/node_status.h"
#include "quant/half.h"
#include "quant/reference.h"

namespace minfer::cpu {
namespace {

using backend::BufferId;
using graph::DType;
using graph::Node;
using graph::Op;
using quant::TensorType;

constexpr size_t kAlign = 64;

// One row of the op table: which nodes the CPU runs, and how.
struct OpEntry {
  bool (*supports)(const Node&, const model::Weights&);
  Status (CpuBackend::*run)(const CpuBackend::Call&);
};

// A check of the node alone (backend/node_checks.h) as a table entry.
template <bool (*Check)(const Node&)>
constexpr auto node_check = backend::node_only<Check, model::Weights>;
constexpr auto f32_out = node_check<backend::f32_output>;
bool no_kernel(const Node&, const model::Weights&) {
  return false;
}

bool f32_weight(const model::Weights& w, const std::string& name) {
  if (name.empty()) return true;
  const model::WeightView* v = w.find(name);
  return v != nullptr && v->type == TensorType::F32;
}

bool matmul_ok(const Node& n, const model::Weights& w) {
  const auto* m = std::get_if<graph::MatMulMeta>(&n.meta);
  if (m == nullptr || n.dtype != DType::kF32 || m->in_norm.on) return false;  // no folded norm
  const model::WeightView* v = w.find(m->weight);
  return v != nullptr && vec_dot_type(v->type).is_ok() && f32_weight(w, m->bias);
}

bool get_rows_ok(const Node& n, const model::Weights& w) {
  const auto* m = std::get_if<graph::GetRowsMeta>(&n.meta);
  if (m == nullptr || n.dtype != DType::kF32) return false;
  if (m->weight.empty()) return true;
  const model::WeightView* v = w.find(m->weight);
  return v != nullptr && quant::has_reference_dequantize(v->type);
}

bool rms_norm_ok(const Node& n, const model::Weights& w) {
  const auto* m = std::get_if<graph::RmsNormMeta>(&n.meta);
  return m != nullptr && n.dtype == DType::kF32 && f32_weight(w, m->weight);
}

// The sink weight, when the node has one: f32, one logit per query head.
bool sinks_ok(const graph::AttentionMeta& m, const model::Weights& w) {
  if (m.sinks.empty()) return true;
  const model::WeightView* v = w.find(m.sinks);
  return v != nullptr && v->type == TensorType::F32 && v->row_length() * v->rows() == m.n_head &&
         v->nbytes == static_cast<size_t>(m.n_head) * sizeof(float);
}

bool attention_ok(const Node& n, const model::Weights& w) {
  const auto* m = std::get_if<graph::AttentionMeta>(&n.meta);
  return m != nullptr && n.dtype == DType::kF32 && !m->packed_qkv && sinks_ok(*m, w);
}

bool rope_ok(const Node& n, const model::Weights& w) {
  const auto* m = std::get_if<graph::RopeMeta>(&n.meta);
  return m != nullptr && n.dtype == DType::kF32 && f32_weight(w, m->freq_factors);
}

bool matmul_id_ok(const Node& n, const model::Weights& w) {
  const auto* m = std::get_if<graph::MatMulIdMeta>(&n.meta);
  if (m == nullptr || n.dtype != DType::kF32 || n.inputs.size() != 2 || m->n_used < 1 ||
      n.shape.ne[0] != m->out_dim || n.shape.ne[1] % m->n_used != 0) {
    return false;
  }
  const model::WeightView* v = w.find(m->weight);
  if (v == nullptr || v->dims != std::vector<int64_t>{m->in_dim, m->out_dim, m->n_expert} ||
      !vec_dot_type(v->type).is_ok()) {
    return false;
  }
  if (m->bias.empty()) return true;
  const model::WeightView* b = w.find(m->bias);
  return b != nullptr && b->type == TensorType::F32 &&
         b->dims == std::vector<int64_t>{m->out_dim, m->n_expert};
}

// A collective the CPU runs; whether this backend has a communicator is
// checked in supports_op.
bool collective_ok(const Node& n, const model::Weights&) {
  const auto* m = std::get_if<graph::CollectiveMeta>(&n.meta);
  return m != nullptr && m->ranks >= 1 && n.dtype == DType::kF32 && n.inputs.size() == 1;
}

const OpEntry& entry(Op op) {
  static const OpEntry kTable[] = {
      /* kInput        */ {node_check<backend::i32_input>, nullptr},
      /* kGetRows      */ {get_rows_ok, &CpuBackend::run_get_rows},
      /* kRmsNorm      */ {rms_norm_ok, &CpuBackend::run_rms_norm},
      /* kMatMul       */ {matmul_ok, &CpuBackend::run_matmul},
      /* kAdd          */ {f32_out, &CpuBackend::run_elementwise},
      /* kMul          */ {f32_out, &CpuBackend::run_elementwise},
      /* kScale        */ {f32_out, &CpuBackend::run_elementwise},
      /* kRope         */ {rope_ok, &CpuBackend::run_rope},
      /* kKvStore      */
      {[](const Node& n, const model::Weights&) { return true; }, &CpuBackend::run_kv_store},
      /* kAttention    */ {attention_ok, &CpuBackend::run_attention},
      /* kSilu         */ {f32_out, &CpuBackend::run_elementwise},
      /* kGelu         */ {f32_out, &CpuBackend::run_elementwise},
      /* kSwiGLU       */ {f32_out, &CpuBackend::run_elementwise},
      /* kGeGLU        */ {f32_out, &CpuBackend::run_elementwise},
      /* kFusedQKV     */ {no_kernel, nullptr},
      /* kFusedQkvNorm */ {no_kernel, nullptr},
      /* kFusedFFN     */ {no_kernel, nullptr},
      /* kMatMulAdd    */ {no_kernel, nullptr},
      /* kArgMax       */ {node_check<backend::argmax_well_formed>, &CpuBackend::run_argmax},
      /* kMoeTopK      */ {node_check<backend::moe_route_well_formed>, &CpuBackend::run_moe_topk},
      /* kMoeWeights   */
      {node_check<backend::moe_route_well_formed>, &CpuBackend::run_moe_weights},
      /* kMatMulId     */ {matmul_id_ok, &CpuBackend::run_matmul_id},
      /* kMoeSum       */ {node_check<backend::moe_sum_well_formed>, &CpuBackend::run_moe_sum},
      /* kSwiGLUOai    */ {node_check<backend::glu_pair_well_formed>, &CpuBackend::run_elementwise},
      /* kAllReduce    */ {collective_ok, &CpuBackend::run_all_reduce},
      /* kAllGather    */ {collective_ok, &CpuBackend::run_all_gather},
  };
  static_assert(std::size(kTable) == static_cast<size_t>(Op::kCount));
  return kTable[static_cast<size_t>(op)];
}

}  // namespace

CpuBackend::CpuBackend(const model::Weights& weights, int n_threads, bool repack_weights,
                       parallel::Communicator* comm)
    : weights_(weights), pool_(n_threads), repack_weights_(repack_weights), comm_(comm) {}

Result<std::unique_ptr<CpuBackend>> CpuBackend::create(const model::Weights& weights, int n_threads,
                                                       bool repack_weights,
                                                       parallel::Communicator* comm) {
  auto b = std::make_unique<CpuBackend>(weights, n_threads, repack_weights, comm);
  if (!b->pool_.start_status().is_ok()) return b->pool_.start_status();
  return b;
}

bool CpuBackend::supports_op(const Node& node) const {
  if (node.op >= Op::kCount) return false;
  if (node.op == Op::kAllReduce || node.op == Op::kAllGather) {
    const auto* m = std::get_if<graph::CollectiveMeta>(&node.meta);
    if (m == nullptr || m->ranks != (comm_ != nullptr ? comm_->size() : 1)) return false;
  }
  return entry(node.op).supports(node, weights_);
}

bool CpuBackend::supports_fused(Op fused) const {
  return fused != Op::kRmsNorm && fused < Op::kCount && entry(fused).run != nullptr;
}

bool CpuBackend::has_weight(std::string_view name) const {
  return weights_.find(name) != nullptr;
}

Result<BufferId> CpuBackend::alloc_buffer(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  auto* raw = static_cast<std::byte*>(std::aligned_alloc(kAlign, rounded));
  if (raw == nullptr) {
    return Status::resource_exhausted("CPU: out of memory allocating " + std::to_string(bytes) +
                                      " bytes");
  }
  Buffer b;
  b.data = {raw, [](std::byte* p) { std::free(p); }};
  b.size = bytes;
  b.live = true;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (!buffers_[i].live) {
      buffers_[i] = std::move(b);
      return static_cast<BufferId>(i);
    }
  }
  buffers_.push_back(std::move(b));
  return static_cast<BufferId>(buffers_.size() - 1);
}

void CpuBackend::free_buffer(BufferId id) {
  if (id < 0 || static_cast<size_t>(id) >= buffers_.size()) return;
  buffers_[static_cast<size_t>(id)] = Buffer{};
}

size_t CpuBackend::buffer_size(BufferId id) const {
  if (id < 0 || static_cast<size_t>(id) >= buffers_.size()) return 0;
  return buffers_[static_cast<size_t>(id)].size;
}

std::byte* CpuBackend::ptr(BufferId id) const {
  if (id < 0 || static_cast<size_t>(id) >= buffers_.size()) return nullptr;
  const Buffer& b = buffers_[static_cast<size_t>(id)];
  return b.live ? b.data.get() : nullptr;
}

Status CpuBackend::read_host(BufferId id, size_t offset, std::span<std::byte> dst) {
  std::byte* p = ptr(id);
  if (p == nullptr || offset + dst.size() > buffer_size(id)) {
    return Status::internal("CPU read_host: buffer " + std::to_string(id) + " range [" +
                            std::to_string(offset) + ", +" + std::to_string(dst.size()) +
                            ") out of bounds (size " + std::to_string(buffer_size(id)) + ")");
  }
  std::memcpy(dst.data(), p + offset, dst.size());
  return Status::ok();
}

Status CpuBackend::write_host(BufferId id, size_t offset, std::span<const std::byte> src) {
  std::byte* p = ptr(id);
  if (p == nullptr || offset + src.size() > buffer_size(id)) {
    return Status::internal("CPU write_host: buffer " + std::to_string(id) + " range [" +
                            std::to_string(offset) + ", +" + std::to_string(src.size()) +
                            ") out of bounds (size " + std::to_string(buffer_size(id)) + ")");
  }
  std::memcpy(p + offset, src.data(), src.size());
  return Status::ok();
}

Status CpuBackend::execute_node(const Node& node, std::span<const BufferId> inputs, BufferId out,
                                const backend::KvPair* kv) {
  if (node.op >= Op::kCount || entry(node.op).run == nullptr || !supports_op(node)) {
    return graph::node_error(node, "not supported by the CPU backend");
  }
  std::array<const void*, 8> in{};
  if (inputs.size() > in.size()) return graph::node_error(node, "too many inputs");
  std::array<size_t, 8> in_bytes{};
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == backend::kNoBuffer) continue;  // an input with no value (KV store)
    in[i] = ptr(inputs[i]);
    in_bytes[i] = buffer_size(inputs[i]);
    if (in[i] == nullptr) {
      return graph::node_error(node, "input " + std::to_string(i) + " has no buffer");
    }
  }
  void* o = node.bytes() > 0 ? ptr(out) : nullptr;
  if (node.bytes() > 0 && (o == nullptr || buffer_size(out) < node.bytes())) {
    return graph::node_error(node, "output buffer missing or too small");
  }
  void* k = kv != nullptr ? ptr(kv->k) : nullptr;
  void* v = kv != nullptr ? ptr(kv->v) : nullptr;
  const Call call{node, std::span<const void* const>(in.data(), inputs.size()), o, k, v,
                  kv,   std::span<const size_t>(in_bytes.data(), inputs.size())};
  return (this->*entry(node.op).run)(call);
}

}  // namespace minfer::cpu
