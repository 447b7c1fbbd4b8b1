// The CPU backend's tensor-parallel collectives (graph::Op::kAllReduce,
// kAllGather; docs/PARALLEL.md): the node's f32 buffer handed to this rank's
// communicator. A group of one rank (no communicator) copies its input, so
// that a graph built for one rank runs anywhere.
#include <cstring>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "graph/node_status.h"

namespace minfer::cpu {
namespace {

using graph::node_error;
using graph::node_meta;

// The node's input, checked to hold `elements` floats.
Result<const float*> collective_input(const CpuBackend::Call& c, int64_t elements) {
  if (c.in_bytes.empty() || c.in_bytes[0] < static_cast<size_t>(elements) * sizeof(float)) {
    return node_error(c.node, "input 0 holds fewer than " + std::to_string(elements) + " values");
  }
  return static_cast<const float*>(c.in[0]);
}

}  // namespace

Status CpuBackend::run_all_reduce(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::CollectiveMeta* m, node_meta<graph::CollectiveMeta>(c.node));
  const int64_t n = c.node.shape.elements();
  MINFER_ASSIGN_OR_RETURN(const float* in, collective_input(c, n));
  auto* out = static_cast<float*>(c.out);
  if (out != in) std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
  if (m->ranks == 1) return Status::ok();
  Status s = comm_->all_reduce_sum({out, static_cast<size_t>(n)});
  return s ? s : node_error(c.node, s.message());
}

// Each rank holds [part, rows]; the communicator gathers them rank after
// rank, and row i of the output is then the ranks' row i side by side.
Status CpuBackend::run_all_gather(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::CollectiveMeta* m, node_meta<graph::CollectiveMeta>(c.node));
  const int64_t ranks = m->ranks, rows = c.node.shape.ne[1];
  const int64_t part = c.node.shape.ne[0] / ranks;
  MINFER_ASSIGN_OR_RETURN(const float* in, collective_input(c, part * rows));
  auto* out = static_cast<float*>(c.out);
  if (ranks == 1) {
    std::memcpy(out, in, static_cast<size_t>(part * rows) * sizeof(float));
    return Status::ok();
  }
  gathered_.resize(static_cast<size_t>(part * rows * ranks));
  Status s = comm_->all_gather({in, static_cast<size_t>(part * rows)}, gathered_);
  if (!s) return node_error(c.node, s.message());
  for (int64_t r = 0; r < ranks; ++r) {
    for (int64_t i = 0; i < rows; ++i) {
      std::memcpy(out + i * part * ranks + r * part, gathered_.data() + (r * rows + i) * part,
                  static_cast<size_t>(part) * sizeof(float));
    }
  }
  return Status::ok();
}

}  // namespace minfer::cpu
