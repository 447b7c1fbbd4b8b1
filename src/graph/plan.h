// Execution plan: which backend runs each node (assign), the splits (maximal
// runs of consecutive nodes on one backend), and every node's buffer
// (liveness-based reuse), built once per graph and reused for every forward
// pass while the GraphParams match.
//
// Assign: each node goes to the first backend, in priority order, whose
// supports_op says yes; a node nobody supports is an error naming it. A node
// that uses a layer's KV cache goes to the backend holding that cache when
// PlanConstraints::kv_backend names one, and is an error naming both when
// that backend refuses it (never a quiet move to another backend).
// Allocation: a node's output gets a buffer of its backend that is free at
// that point (its previous owner's last reader has run), or, for in-place
// friendly ops, the buffer of an input that dies at this node. Graph inputs
// and the logits are never shared. Each split gets fresh staging buffers
// (alloc_fresh) for the values it reads from other backends. KV regions are
// not planned here: they persist across plans (runtime::KvCache) and reach
// the executor through a resolver.
//
// Ownership: a Plan holds buffer ids of the backends it was built with;
// release() gives them back. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "graph/ir.h"

namespace minfer::graph {

struct Split {
  int backend = 0;            // index into the backend list
  size_t begin = 0, end = 0;  // node index range [begin, end)
  // Values produced on other backends that this split reads: the producing
  // node and the staging buffer in this split's backend.
  std::vector<std::pair<NodeId, backend::BufferId>> staged;
};

struct Plan {
  std::vector<int> node_backend;               // per node
  std::vector<backend::BufferId> node_buffer;  // per node, in its backend (kNoBuffer: no output)
  std::vector<Split> splits;
  std::vector<std::pair<int, backend::BufferId>> owned;  // (backend, buffer) to free
  size_t planned_bytes = 0;                              // sum of the buffers allocated
  uint64_t id = 0;  // unique per build_plan call in this process (split replay keys)

  // The buffer holding `id`'s value inside split `s` (staged copy if foreign).
  backend::BufferId buffer_in_split(const Split& s, NodeId node) const;
};

struct PlanConstraints {
  // Per layer, the index (into the backend list) of the backend holding its
  // KV cache; empty: no constraint (the first supporting backend).
  std::vector<int> kv_backend;
};

Result<Plan> build_plan(const Graph& g, std::span<backend::Backend* const> backends,
                        const PlanConstraints& constraints = {});

// Per layer, the first backend in priority order that supports every node
// using the layer's KV cache (a store and an attention may differ in what a
// backend takes: both must run where the cache is), -1 for a layer with
// none; an error names a layer no backend can hold. How a runner decides
// where each cache lives (then passed to build_plan as the constraint).
Result<std::vector<int>> kv_placement(const Graph& g, std::span<backend::Backend* const> backends,
                                      int64_t n_layer);

void release_plan(Plan& plan, std::span<backend::Backend* const> backends);

// Human-readable split table and op x backend census (MINFER_GRAPH_TRACE=1).
std::string describe_plan(const Graph& g, const Plan& plan,
                          std::span<backend::Backend* const> backends);

}  // namespace minfer::graph
