// The executor: runs a planned graph, split by split.
//
// For each split: copy the values it reads from other backends into its
// staging buffers (host round trip: read_host then write_host; the producing
// backend was synchronized at the end of its own split), execute every node
// of the split on its backend (a GPU backend only encodes), then
// synchronize() that backend — one submission per split.
// Errors from any backend are returned with the node named; nothing is
// retried elsewhere. Without a profile or trace, each split is offered to its
// backend for replay (Backend::begin_split/end_split; the CUDA backend
// replays decode splits as CUDA graphs). MINFER_OP_PROFILE=1 collects per-op wall times (with a
// synchronize after each node, or, for a backend with device timers (CUDA
// events), the device times it reports after the split's synchronize).
// Not thread-safe: one forward pass at a time per plan.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "graph/ir.h"
#include "graph/plan.h"

namespace minfer::graph {

// Per-op timing table (MINFER_OP_PROFILE=1).
class OpProfile {
 public:
  void add(const std::string& key, double seconds);
  std::string table() const;
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    int64_t count = 0;
    double seconds = 0;
  };
  std::map<std::string, Entry> entries_;
};

// The values of the graph's inputs (graph::InputKind); the paged ones only
// for a graph that has them.
struct ForwardInputs {
  std::span<const int32_t> tokens;
  std::span<const int32_t> positions;
  std::span<const int32_t> cells;
  std::span<const int32_t> seq_slots;
  std::span<const int32_t> page_table;
  std::span<const int32_t> output_rows;
};

// KV pair for (backend, layer), or nullptr when the node needs none.
using KvResolver = std::function<const backend::KvPair*(int backend, int layer)>;

// `trace_dir` non-empty: every node's output is written there as raw bytes
// (Options::trace_dir, MINFER_TRACE), which also turns split replay off.
Status execute(const Graph& g, const Plan& plan, std::span<backend::Backend* const> backends,
               const ForwardInputs& inputs, const KvResolver& kv, std::vector<float>& logits,
               OpProfile* profile = nullptr, const std::string& trace_dir = {});

}  // namespace minfer::graph
