// ShaderBackend: the class behind create_shader_backend() (public contract in
// backend/shader/shader_backend.h), shared by the files that define its members:
// shader_backend.cpp (the Backend interface: buffers, host copies, the bounded
// synchronize and the error words), op_support.cpp (which nodes it runs) and
// op_runners.cpp / op_runners_moe.cpp (one runner per op, reached through
// the op table).
//
// Ownership: the backend holds a share of the device, the weights registry
// (every weight of the model), the buffer pool (graph buffers, KV regions,
// scratch, row lists), the error words and one Recorder for the current split.
// Threading: one driving thread, as backend::Backend; nothing is locked.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "backend/backend.h"
#include "backend/shader/buffer_pool.h"
#include "backend/shader/device.h"
#include "backend/shader/encoders.h"
#include "backend/shader/recorder.h"
#include "backend/shader/shader_backend.h"
#include "backend/shader/weights.h"
#include "base/options.h"
#include "base/status.h"
#include "graph/ir.h"
#include "graph/node_status.h"
#include "model/weights.h"
#include "quant/tensor_type.h"

namespace minfer::shader::detail {

using backend::BufferId;
using backend::KvPair;
using graph::Node;
using graph::Op;

using graph::node_error;
using graph::node_meta;

// What one op's runner gets: the bindings of the inputs (a null buffer for
// an input without a value), of the output and of the layer's KV regions.
struct Call {
  const Node& node;
  std::array<BufferRange, 6> in{};
  size_t n_in = 0;
  BufferRange out{};
  BufferRange k_cache{}, v_cache{};
  const KvPair* kv = nullptr;
};

class ShaderBackend;

// Which nodes the backend runs (op_support.cpp), and how (op_runners.cpp).
struct OpEntry {
  bool (*supports)(const Node&, const ShaderBackend&);
  Status (ShaderBackend::*run)(const Call&);
};
const OpEntry& op_entry(Op op);

class ShaderBackend final : public backend::Backend {
 public:
  // Scratch slots: FusedFFN's gate, up and normalized input; aliased outputs.
  static constexpr size_t kGateSlot = 0, kUpSlot = 1, kNormSlot = 2, kAliasSlot = 3;

  ShaderBackend(std::string name, std::shared_ptr<Device> device, const Options& options);

  // Uploads every weight (the registry) and makes the error words.
  Status init(const model::Weights& weights);

  std::string_view name() const override { return name_; }
  bool requires_all_weights() const override { return true; }
  bool supports_op(const Node& node) const override;
  bool supports_fused(Op fused) const override;
  bool has_weight(std::string_view name) const override { return weights_.contains(name); }

  Result<BufferId> alloc_buffer(size_t bytes) override;
  Result<BufferId> alloc_fresh(size_t bytes) override;
  void free_buffer(BufferId id) override;
  size_t buffer_size(BufferId id) const override;
  Status execute_node(const Node& node, std::span<const BufferId> inputs, BufferId out,
                      const KvPair* kv) override;
  Status read_host(BufferId id, size_t offset, std::span<std::byte> dst) override;
  Status write_host(BufferId id, size_t offset, std::span<const std::byte> src) override;
  Status synchronize() override;
  // Split replay: a split's command list, recorded on its first execution,
  // is resubmitted as it is on later ones (its bindings are pool ranges that
  // only change when a buffer is freed, which drops every recording).
  Result<bool> begin_split(uint64_t key) override;
  Status end_split() override;
  // MINFER_OP_PROFILE on a device with timestamps: a pair around each node.
  bool times_nodes() const override { return profiling_; }
  std::vector<double> take_node_times() override;
  // Best of five timed copies of a 256 MiB range (read + write bytes).
  Result<std::optional<double>> memory_bandwidth_gbs() override;
  std::optional<quant::TensorType> default_cache_type(int64_t n_layer,
                                                      int64_t n_kv_embd) const override {
    if (cache_policy_ == nullptr) return std::nullopt;
    return cache_policy_(n_layer, n_kv_embd);
  }
  void set_cache_policy(CacheTypePolicy policy) { cache_policy_ = policy; }

  // For op_support.cpp: the registry's weight, or nullptr.
  const DeviceWeight* weight(std::string_view name) const;
  // Whether the matmul / get_rows kernels have a variant for `type` here.
  bool has_matmul(quant::TensorType type) const;
  bool has_get_rows(quant::TensorType type) const;
  // Whether the expert matmul (matmul_id) has a variant for `type` here.
  bool has_matmul_id(quant::TensorType type) const;
  // The device's minStorageBufferOffsetAlignment: where a binding may start.
  uint64_t binding_alignment() const {
    return device_->info().limits.min_storage_buffer_offset_alignment;
  }
  // Whether one binding can see the whole weight (its bytes within the
  // device's maxStorageBufferRange; 0 there means no limit). The fused
  // kernels bind their weights whole: a larger one's nodes are left to the
  // next backend.
  bool binds_whole(const DeviceWeight& w) const {
    const uint64_t max = device_->info().limits.max_storage_buffer_range;
    return max == 0 || w.bytes <= max;
  }
  // The rows of [rows][row_len] weight `w` that one binding of a plain
  // matmul or of a lookup (get_rows) takes: all of them where it binds
  // whole; else the most that fit in maxStorageBufferRange, a multiple of
  // what keeps each range's start (in the weight, and as y's column offset)
  // where a binding may start; 0 where none fit.
  int64_t rows_per_binding(const DeviceWeight& w) const;
  const Device& device() const { return *device_; }

  // Op runners (op_runners.cpp).
  Status run_get_rows(const Call& c);
  Status run_rms_norm(const Call& c);
  Status run_matmul(const Call& c);
  Status run_elementwise(const Call& c);
  Status run_unary(const Call& c);
  Status run_glu(const Call& c);
  Status run_rope(const Call& c);
  Status run_kv_store(const Call& c);
  Status run_attention(const Call& c);
  Status run_argmax(const Call& c);
  Status run_fused_ffn(const Call& c);
  Status run_fused_qkv(const Call& c);
  // The mixture-of-experts ops (op_runners_moe.cpp).
  Status run_moe_topk(const Call& c);
  Status run_moe_weights(const Call& c);
  Status run_matmul_id(const Call& c);
  Status run_moe_sum(const Call& c);

 private:
  BufferRange range(BufferId id) const;
  // Scratch space `slot` (k*Slot) of at least `bytes` (grown on demand; kept).
  Result<BufferRange> scratch(size_t slot, uint64_t bytes);
  // A fused node's input norm as the row matmul's prologue.
  Result<MatmulPrologue> input_norm(const Node& n, const graph::InputNorm& norm);
  // A device copy of an activation gather's row list (cached by content).
  Result<BufferRange> row_list(const std::vector<int32_t>& rows);
  // The weight's binding, or an error naming the node and the weight.
  Result<BufferRange> weight_range(const Node& n, const std::string& name) const;
  // y = x W^T (+ bias) (+ residual) for the node's MatMulMeta-like shape:
  // the tiled GEMM where use_tiled(), else the row kernel (matmul.comp).
  // A weight past one binding goes in ranges of rows_per_binding() rows, each
  // dispatch writing its columns of y.
  Status matmul(const Node& n, const std::string& weight, const std::string& bias,
                const BufferRange& x, const BufferRange* residual, const BufferRange& y,
                int64_t in_dim, int64_t out_dim, int64_t n_tokens, bool invariant);
  // The tiled GEMM (encode_matmul_tiled.h) for batches that need not be
  // batch-invariant (its order of additions differs from the row kernel's),
  // from matmul_tiled_min_tokens() tokens on, and for narrow outputs (the
  // k/v projections, one tile row) only from 512 tokens (docs/PERFORMANCE.md,
  // "Constants and their measurements").
  bool use_tiled(quant::TensorType type, int64_t out_dim, int64_t n_tokens, bool invariant) const {
    const auto i = static_cast<size_t>(type);
    return !invariant && i < tiled_types_.size() && tiled_types_[i] == 1 &&
           n_tokens >= tiled_min_tokens_ && (out_dim > 256 || n_tokens >= 512);
  }
  // The error words' report (backend::device_error, naming `trail`), or ok
  // when nothing was reported; zeroes the words it found set.
  Status check_error_words(const std::string& trail);

  std::string name_;
  std::shared_ptr<Device> device_;
  WeightsRegistry weights_;
  BufferPool pool_;
  Recorder rec_;
  PoolId err_ = -1;  // MINFER_ERR_WORDS u32, zero unless a kernel reported
  std::vector<PoolId> scratch_;
  std::map<std::vector<int32_t>, PoolId> row_lists_;
  // Drops every recorded split (a buffer they bind was freed or moved).
  void drop_replays();

  bool profiling_ = false;
  bool replay_enabled_ = false;
  bool map_weights_ = false;  // zero-copy weights (unified memory, no MINFER_WEIGHT_COPY)
  CacheTypePolicy cache_policy_ = nullptr;  // default_cache_type(), when the API has one
  static constexpr size_t kMaxReplays = 64;
  std::map<uint64_t, Recorder::Kept> replays_;
  std::optional<uint64_t> capturing_;         // the key of the split being recorded
  std::optional<uint64_t> replaying_;         // the key of the split being replayed
  size_t timed_in_split_ = 0;                 // nodes timed since the last synchronize
  std::vector<double> node_times_;            // seconds per timed node, not yet taken
  std::array<int8_t, 64> matmul_types_{};     // by TensorType value: -1 unknown, 0 no, 1 yes
  std::array<int8_t, 64> get_rows_types_{};   // likewise
  std::array<int8_t, 64> matmul_id_types_{};  // likewise, the expert matmul
  std::array<int8_t, 64> tiled_types_{};      // likewise, the tiled GEMM
  int64_t tiled_min_tokens_ = 0;
};

}  // namespace minfer::shader::detail
