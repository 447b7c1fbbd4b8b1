// CudaBackend: the class behind cuda::create_backend() (public contract in
// backend/cuda/cuda_backend.h), shared by the translation units that define
// its members: cuda_backend.cu (the Backend interface: op table, buffers, host
// copies, the bounded synchronize, split capture and replay, node timing) and
// op_runners.cu (one runner per op, reached through the op table) and
// bandwidth.cu (the device copy behind memory_bandwidth_gbs).
//
// Ownership: the backend holds a share of the uploaded weights, its own
// stream, completion event, device error words (kErrWords, the codes of
// backend/device_errors.h) and their pinned host mirror (freed in the
// destructor after the stream drains), its buffers, one scratch allocation
// for outputs that alias an input, cached device row lists, and the split
// recorder's graphs.
// Threading: one driving thread, as backend::Backend; nothing is locked.
// Lifetime: device pointers handed to kernels stay valid until the buffer is
// freed or the scratch grows, both of which drop every recorded graph first.
// Include only from .cu files.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/device.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/replay.h"
#include "backend/cuda/weights.h"
#include "backend/kernel_trail.h"
#include "base/options.h"
#include "base/status.h"
#include "graph/ir.h"
#include "graph/node_status.h"

namespace minfer::cuda::detail {

using backend::BufferId;
using backend::KvPair;
using graph::Node;
using graph::Op;

using graph::node_error;
using graph::node_meta;

// What one op's kernel gets: device pointers of the inputs (null for an input
// without a value), of the output and of the layer's KV regions.
struct Call {
  const Node& node;
  std::array<void*, 6> in;
  size_t n_in;
  void* out;
  void* k_cache;
  void* v_cache;
  const KvPair* kv;
  const float* f32_in(size_t i) const { return static_cast<const float*>(in[i]); }
  const int32_t* i32_in(size_t i) const { return static_cast<const int32_t*>(in[i]); }
  float* f32_out() const { return static_cast<float*>(out); }
};

class CudaBackend final : public backend::Backend {
 public:
  // Takes ownership of err_host (pinned, kErrWords words, from cudaMallocHost).
  CudaBackend(std::shared_ptr<const DeviceWeights> weights, Stream stream, Event done,
              DeviceBuffer err, uint32_t* err_host, const Options& options);
  ~CudaBackend() override;

  std::string_view name() const override { return "CUDA"; }
  bool requires_all_weights() const override { return true; }
  bool supports_op(const Node& node) const override;
  bool supports_fused(Op fused) const override;
  bool has_weight(std::string_view name) const override { return weights_->find(name) != nullptr; }

  Result<BufferId> alloc_buffer(size_t bytes) override;
  void free_buffer(BufferId id) override;
  size_t buffer_size(BufferId id) const override;
  Status execute_node(const Node& node, std::span<const BufferId> inputs, BufferId out,
                      const KvPair* kv) override;
  Status read_host(BufferId id, size_t offset, std::span<std::byte> dst) override;
  Status write_host(BufferId id, size_t offset, std::span<const std::byte> src) override;
  Status synchronize() override;
  Result<bool> begin_split(uint64_t key) override;
  Status end_split() override;
  bool times_nodes() const override { return profiling_; }
  std::vector<double> take_node_times() override;
  // Best of five timed device-to-device copies (bandwidth.cu).
  Result<std::optional<double>> memory_bandwidth_gbs() override;

  // Op kernels, reached through the op table (op_runners.cu).
  Status run_matmul(const Call& c);
  Status run_get_rows(const Call& c);
  Status run_rms_norm(const Call& c);
  Status run_rope(const Call& c);
  Status run_kv_store(const Call& c);
  Status run_attention(const Call& c);
  Status run_elementwise(const Call& c);
  Status run_swiglu_oai(const Call& c);
  Status run_argmax(const Call& c);
  Status run_fused_qkv(const Call& c);
  Status run_fused_ffn(const Call& c);
  // The mixture-of-experts ops (op_runners_moe.cu).
  Status run_moe_topk(const Call& c);
  Status run_moe_weights(const Call& c);
  Status run_matmul_id(const Call& c);
  // The expert matmul on the int8 tensor cores (launch_mmq_id): the
  // activations quantized into scratch, then the routing's work area.
  // n_act: the activation rows (tokens, or routed rows when per-row).
  Status run_mmq_id(const Call& c, const MatMulIdArgs& args, int64_t n_act);
  Status run_moe_sum(const Call& c);

 private:
  struct Slot {
    DeviceBuffer buf;
    bool live = false;
  };
  void* ptr(BufferId id) const;
  // Records a launch in the kernel trail and turns its status into a Status.
  Status launched(const Node& n, const char* kernel, cudaError_t err);
  std::string recent_kernels() const { return trail_.describe(); }
  // Device memory of at least `bytes` for outputs that alias an input.
  Result<float*> scratch(const Node& n, size_t bytes);
  // Device copy of an activation gather's row list (cached by content).
  Result<const int32_t*> row_list(const std::vector<int32_t>& rows);
  // Input 0 of a node with an InputNorm, for a kernel that does not normalize
  // itself: the rows normalized into scratch (or input 0 as is when off).
  Result<const float*> normalized_input(const Call& c, const graph::InputNorm& norm, int64_t dim);
  // An mmq launch's weights: their type, device address and size in bytes.
  struct MmqWeight {
    quant::TensorType type;
    const void* data;
    size_t bytes;
  };
  // Readies `in` for mmq launches over `weights`: in.quantized = `quantized`
  // (scratch of quantized_bytes), quantized there unless the node before
  // left the same bytes (quantized_); or, one token the one-token kernel
  // quantizes itself (mmq_quantizes_itself over all the weights' bytes; a
  // weight named twice counts once), left null with no launch. No weights:
  // always quantized (the expert products).
  Status quantize_for_mmq(const Call& c, Q8Input& in, int8_t* quantized,
                          std::initializer_list<MmqWeight> weights);
  // The int8 GEMV's input for input 0 (one token) with the node's InputNorm.
  Q8Input q8_input(const Call& c, const graph::InputNorm& norm, int64_t dim,
                   int64_t n_tokens) const;
  // The node's tokens for an int8 GEMV: one token as it is (the kernel
  // quantizes it), several quantized once into `quantized` (scratch of
  // quantized_bytes) by a kernel of their own.
  Result<Q8Input> q8_batch_input(const Call& c, const graph::InputNorm& norm, int64_t dim,
                                 int8_t* quantized);
  // The matmul (or FusedFFN gate/up pair) on the int8 tensor cores.
  Status run_mmq(const Call& c, const DeviceWeight& w, const graph::InputNorm& norm,
                 const float* bias, const float* residual, float* y);
  static size_t quantized_bytes(int64_t dim, int64_t n_tokens);
  // Whether FusedQKV of n_tokens has a path here: the one-token GEMV (not
  // batch-invariant), else the three projections on the int8 tensor cores
  // (one arithmetic for every batch size) and the per-head kernel.
  bool fused_qkv_path(const graph::FusedQkvMeta& m, int64_t n_tokens) const;
  // Whether a GEMV over `type` rows of in_dim for n_tokens takes the int8 path.
  // The int8 GEMVs take batches below the tensor-core size, and every batch
  // that must be batch-invariant (their per-token results never depend on
  // the batch; the tensor-core and f32 kernels' do, by their choice).
  bool use_q8(quant::TensorType type, int64_t in_dim, int64_t n_tokens, bool invariant) const {
    return q8_gemv_ && has_q8_gemv(type, in_dim) && (n_tokens < kMmaMinTokens || invariant) &&
           !use_mmq(type, in_dim, n_tokens, invariant);
  }
  // The int8 tensor-core products (mmq.cu) for their types: every batch that
  // must be batch-invariant (one token included, so that one arithmetic
  // serves every batch size), else batches of 2 to kMmaMinTokens - 1.
  bool use_mmq(quant::TensorType type, int64_t in_dim, int64_t n_tokens, bool invariant) const {
    return q8_gemv_ && has_mmq(type, in_dim) &&
           (invariant || (n_tokens >= 2 && n_tokens < kMmaMinTokens));
  }
  // FusedQKV of several tokens (or batch-invariant): the int8 tensor-core path.
  Status run_qkv_mmq(const Call& c, const graph::FusedQkvMeta& m, FusedQkvArgs& a);
  // FusedQkvArgs' per-head part (RoPE, norms, positions/cells, the caches).
  void set_qkv_post_args(const Call& c, const graph::FusedQkvMeta& m, FusedQkvArgs& a) const;
  // The attention node's sink logits on the device (null when it has none);
  // an error naming the weight when it is missing or not f32 [n_head].
  Result<const float*> sink_logits(const Node& n, const graph::AttentionMeta& m) const;
  // A named f32 vector on the device (a bias, a norm), or null for "".
  const float* device_vector(const std::string& name) const {
    if (name.empty()) return nullptr;
    return reinterpret_cast<const float*>(weights_->find(name)->data);
  }
  // The norm's f32 weight on the device, or null (no weight, or norm off).
  const float* norm_weight(const graph::InputNorm& norm) const {
    if (!norm.on || norm.weight.empty()) return nullptr;
    return reinterpret_cast<const float*>(weights_->find(norm.weight)->data);
  }

  std::shared_ptr<const DeviceWeights> weights_;
  Stream stream_;
  Event done_;
  DeviceBuffer err_;    // kErrWords words on the device
  uint32_t* err_host_;  // pinned mirror, filled at every synchronize
  double timeout_s_;
  std::vector<Slot> slots_;
  DeviceBuffer scratch_;
  std::map<std::vector<int32_t>, DeviceBuffer> row_lists_;
  backend::KernelTrail trail_;  // the last kernels launched, for error messages
  size_t pending_ = 0;          // launches since the last synchronize
  SplitRecorder recorder_;
  // MINFER_OP_PROFILE: timing events around each node (a pool grown on use).
  bool profiling_;
  bool q8_gemv_;   // one-token GEMVs on int8 activations (off: CudaOptions::gemv_f32)
  bool split_kv_;  // decode attention may split the cache (off: CudaOptions::no_split_kv)
  std::vector<std::pair<Event, Event>> node_events_;
  size_t n_timed_ = 0;
  // The quantized activations run_mmq left at the start of scratch: the
  // next call, if it is the very next thing enqueued (a node, no host write,
  // no split boundary between) and an int8 tensor-core product of the same
  // input, norm and token count, reads them instead of quantizing again (a
  // layer's q, k and v share their input). `events_` counts nodes, host
  // writes and split boundaries; a grown scratch clears `valid`.
  struct QuantizedInput {
    bool valid = false;
    uint64_t event = 0;
    const float* x = nullptr;
    const float* norm_weight = nullptr;
    bool norm = false;
    float eps = 0.0f;
    int64_t dim = 0, n_tokens = 0;
    bool per_256 = false;  // Q8Input::scale_per_256
    bool same(const Q8Input& in, uint64_t now) const {
      return valid && event + 1 == now && x == in.x && norm_weight == in.norm_weight &&
             norm == in.rms_norm && eps == in.eps && dim == in.in_dim && n_tokens == in.n_tokens &&
             per_256 == in.scale_per_256;
    }
  } quantized_;
  uint64_t events_ = 0;
};

}  // namespace minfer::cuda::detail
