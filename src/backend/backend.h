// Backend: the seam between the graph machinery and one piece of hardware.
//
// A backend owns a pool of buffers (addressed by BufferId) and runs graph
// nodes on them. The graph layer asks, in this order:
//   - at build time: supports_op / supports_fused (capability queries; a "no"
//     is not an error, it routes the node to the next backend in priority
//     order) and has_weight (the all-weights gate of GPU backends);
//   - once per graph build: alloc_buffer / alloc_fresh / free_buffer;
//   - once per node per forward: execute_node. A GPU backend only encodes
//     here; its work is submitted and waited for in synchronize(), which the
//     executor calls at the end of each split (one submission per split);
//   - at split boundaries and for inputs/outputs: read_host / write_host;
//   - around each split's nodes: begin_split / end_split (optional replay).
//
// Contracts every implementation keeps:
//   - execute_node's output buffer may be the same buffer as one of its inputs
//     (liveness reuse): in-place execution must be handled.
//   - No silent fallback: a node the backend cannot run (missing weight, wrong
//     metadata, unsupported type, a shape past a device limit) is an error
//     naming the node and the tensor, never a quiet detour to another backend.
//   - alloc_fresh never returns a recycled buffer (split-boundary staging must
//     not clobber data still in flight within the same execute).
//   - Errors are Status values; nothing here exits.
// Threading: a backend is driven by one executor thread at a time; it may
// use its own worker threads inside execute_node.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "graph/ir.h"
#include "quant/tensor_type.h"

namespace minfer::backend {

using BufferId = int32_t;
constexpr BufferId kNoBuffer = -1;

// The persistent K and V regions of one layer (allocated once per session).
// Row types are F32, F16 or Q8_0 (ggml blocks; head_dim a multiple of 32); K
// and V may differ. A backend that cannot read a type refuses the nodes in
// supports_op (KvMeta/AttentionMeta carry the types) and errors in execute_node.
struct KvPair {
  BufferId k = kNoBuffer;
  BufferId v = kNoBuffer;
  quant::TensorType k_type = quant::TensorType::F32;  // element type of the K rows
  quant::TensorType v_type = quant::TensorType::F32;  // element type of the V rows
  int64_t n_ctx = 0;                                  // rows each region holds
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  // True for a backend that takes part all-or-nothing: only in graphs whose
  // every weight it has (the all-weights gate; GPU backends).
  virtual bool requires_all_weights() const { return false; }

  // Can this backend run `node` (op, dtypes, weight types in its meta)?
  virtual bool supports_op(const graph::Node& node) const = 0;
  // Does it have a kernel for this fused op? Gates the fusion pass. A
  // backend with an op table claims a fused op exactly where its table has
  // a runner for it, so the answer cannot drift from what it runs; kRmsNorm
  // asks something else, whether it folds an input norm into the fused
  // matmuls (graph::InputNorm), and is its own choice.
  virtual bool supports_fused(graph::Op fused) const { return false; }
  // Is this weight available to it? (CPU: every weight of the model.)
  virtual bool has_weight(std::string_view name) const = 0;

  virtual Result<BufferId> alloc_buffer(size_t bytes) = 0;
  virtual Result<BufferId> alloc_fresh(size_t bytes) { return alloc_buffer(bytes); }
  virtual void free_buffer(BufferId id) = 0;
  virtual size_t buffer_size(BufferId id) const = 0;

  // Runs (or, on a GPU, encodes) one node. `inputs` are the buffers of
  // node.inputs in order; `kv` is the layer's cache for KV store / attention.
  virtual Status execute_node(const graph::Node& node, std::span<const BufferId> inputs,
                              BufferId out, const KvPair* kv) = 0;

  virtual Status read_host(BufferId id, size_t offset, std::span<std::byte> dst) = 0;
  virtual Status write_host(BufferId id, size_t offset, std::span<const std::byte> src) = 0;

  // Waits until every node executed so far has finished (no-op on the CPU).
  virtual Status synchronize() { return Status::ok(); }

  // Split replay (optional; GPU backends). The executor calls begin_split
  // before a split's nodes with a key naming (plan, split). If it returns
  // true, the backend has enqueued a recording of that split's earlier
  // execution and the executor skips the nodes; otherwise it executes them
  // and then calls end_split. A recording may hold buffer addresses, so
  // free_buffer must invalidate recordings. The executor offers replay only
  // when nothing needs per-node results (no profile, no trace).
  virtual Result<bool> begin_split(uint64_t key) {
    (void)key;
    return false;
  }
  virtual Status end_split() { return Status::ok(); }

  // Profiling (MINFER_OP_PROFILE=1). A backend with device timers (CUDA
  // events) says so in times_nodes(); the executor then does not wait after
  // each node but, after the split's synchronize(), takes the device time in
  // seconds of every node executed since the last call, in execution order.
  // Otherwise it waits after each node and uses wall time.
  virtual bool times_nodes() const { return false; }
  virtual std::vector<double> take_node_times() { return {}; }

  // Memory bandwidth of the device this backend computes on, in GB/s (1e9
  // bytes per second, bytes read plus bytes written): the denominator of a
  // decode roofline on that device (optional; GPU backends). nullopt: the
  // backend works in host memory, whose bandwidth the caller measures itself
  // (measure_read_bandwidth, base/bandwidth.h). A measurement that fails is an error.
  // Moves memory for a moment: call it between evals, never inside one.
  virtual Result<std::optional<double>> memory_bandwidth_gbs() { return std::optional<double>(); }

  // The KV cache type this backend runs a model of n_layer layers and
  // n_kv_embd K (and V) values per token and layer best at, for runs where
  // the user chose none (optional; nullopt: no preference, the runtime's
  // default stands). Metal: f32 for small models (shader/shader_backend.h).
  virtual std::optional<quant::TensorType> default_cache_type(int64_t n_layer,
                                                              int64_t n_kv_embd) const {
    return std::nullopt;
  }
};

}  // namespace minfer::backend
