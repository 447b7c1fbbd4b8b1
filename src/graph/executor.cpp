#include "graph/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace minfer::graph {
namespace {

using backend::Backend;
using backend::BufferId;

Status write_input(const Graph& g, const Plan& plan, std::span<Backend* const> backends, NodeId id,
                   std::span<const int32_t> values) {
  if (id == kNoNode) return Status::ok();
  const Node& n = g.at(id);
  if (static_cast<int64_t>(values.size()) != n.shape.elements()) {
    return Status::internal("input '" + n.name + "' expects " + std::to_string(n.shape.elements()) +
                            " values, got " + std::to_string(values.size()));
  }
  Backend* b = backends[static_cast<size_t>(plan.node_backend[static_cast<size_t>(id)])];
  return b->write_host(plan.node_buffer[static_cast<size_t>(id)], 0,
                       std::as_bytes(std::span(values)));
}

Status stage_inputs(const Graph& g, const Plan& plan, const Split& s,
                    std::span<Backend* const> backends, std::vector<std::byte>& host) {
  for (const auto& [node, staged] : s.staged) {
    const auto src_backend = static_cast<size_t>(plan.node_backend[static_cast<size_t>(node)]);
    const size_t bytes = g.at(node).bytes();
    host.resize(bytes);
    MINFER_RETURN_IF_ERROR(backends[src_backend]->read_host(
        plan.node_buffer[static_cast<size_t>(node)], 0, std::span(host.data(), bytes)));
    MINFER_RETURN_IF_ERROR(backends[static_cast<size_t>(s.backend)]->write_host(
        staged, 0, std::span<const std::byte>(host.data(), bytes)));
  }
  return Status::ok();
}

Status run_node(const Graph& g, const Plan& plan, const Split& s, size_t i, Backend* b,
                const KvResolver& kv, std::vector<BufferId>& in_ids) {
  const Node& n = g.nodes[i];
  in_ids.clear();
  for (NodeId in : n.inputs) in_ids.push_back(plan.buffer_in_split(s, in));
  const backend::KvPair* pair = nullptr;
  if (graph::op_traits(n.op).uses_kv) {
    pair = kv ? kv(s.backend, n.layer) : nullptr;
    if (pair == nullptr) {
      return Status::internal("node '" + n.name + "': no KV cache for layer " +
                              std::to_string(n.layer) + " on " + std::string(b->name()));
    }
  }
  Status st = b->execute_node(n, in_ids, plan.node_buffer[i], pair);
  if (!st) return st.with_context(std::string(b->name()) + " node '" + n.name + "'");
  return Status::ok();
}

// MINFER_TRACE=<dir>: every node's output as raw bytes, for diffing two paths.
Status trace_node(const Graph& g, const Plan& plan, Backend* b, size_t i, const std::string& dir) {
  const Node& n = g.nodes[i];
  if (n.bytes() == 0) return Status::ok();
  MINFER_RETURN_IF_ERROR(b->synchronize());
  std::vector<std::byte> host(n.bytes());
  MINFER_RETURN_IF_ERROR(b->read_host(plan.node_buffer[i], 0, host));
  char path[512];
  std::snprintf(path, sizeof(path), "%s/%04zu_%s_%s.bin", dir.c_str(), i, n.name.c_str(),
                op_name(n.op));
  FILE* f = std::fopen(path, "wb");
  if (f == nullptr) return Status::io_error(std::string("MINFER_TRACE: cannot write ") + path);
  const bool written = std::fwrite(host.data(), 1, host.size(), f) == host.size();
  if (std::fclose(f) != 0 || !written) {
    return Status::io_error(std::string("MINFER_TRACE: cannot write ") + path);
  }
  return Status::ok();
}

}  // namespace

void OpProfile::add(const std::string& key, double seconds) {
  auto& e = entries_[key];
  e.count++;
  e.seconds += seconds;
}

std::string OpProfile::table() const {
  std::vector<std::pair<std::string, Entry>> rows(entries_.begin(), entries_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (const auto& r : rows) total += r.second.seconds;
  std::ostringstream out;
  out << "op profile (" << total * 1e3 << " ms in ops):\n";
  char line[160];
  for (const auto& [key, e] : rows) {
    std::snprintf(line, sizeof(line), "  %-28s %8lld calls %10.3f ms %6.1f%%\n", key.c_str(),
                  static_cast<long long>(e.count), e.seconds * 1e3,
                  total > 0 ? 100.0 * e.seconds / total : 0.0);
    out << line;
  }
  return out.str();
}

Status execute(const Graph& g, const Plan& plan, std::span<Backend* const> backends,
               const ForwardInputs& inputs, const KvResolver& kv, std::vector<float>& logits,
               OpProfile* profile, const std::string& trace_dir) {
  const std::pair<NodeId, std::span<const int32_t>> values[] = {
      {g.tokens, inputs.tokens},         {g.positions, inputs.positions},
      {g.cells, inputs.cells},           {g.seq_slots, inputs.seq_slots},
      {g.page_table, inputs.page_table}, {g.output_rows, inputs.output_rows}};
  for (const auto& [id, v] : values) MINFER_RETURN_IF_ERROR(write_input(g, plan, backends, id, v));
  std::vector<std::byte> host;
  std::vector<BufferId> in_ids;
  using Clock = std::chrono::steady_clock;
  const bool tracing = !trace_dir.empty();
  const bool replay = profile == nullptr && !tracing;
  for (size_t si = 0; si < plan.splits.size(); ++si) {
    const Split& s = plan.splits[si];
    Backend* b = backends[static_cast<size_t>(s.backend)];
    MINFER_RETURN_IF_ERROR(stage_inputs(g, plan, s, backends, host));
    if (replay) {
      MINFER_ASSIGN_OR_RETURN(const bool replayed, b->begin_split((plan.id << 16) | si));
      if (replayed) {
        MINFER_RETURN_IF_ERROR(b->synchronize());
        continue;
      }
    }
    const bool device_timed = profile != nullptr && b->times_nodes();
    std::vector<size_t> timed;  // nodes whose device times the backend will report
    for (size_t i = s.begin; i < s.end; ++i) {
      if (g.nodes[i].op == Op::kInput) continue;
      const auto t0 = Clock::now();
      MINFER_RETURN_IF_ERROR(run_node(g, plan, s, i, b, kv, in_ids));
      if (tracing) {
        MINFER_RETURN_IF_ERROR(trace_node(g, plan, b, i, trace_dir));
      }
      if (device_timed) {
        timed.push_back(i);
      } else if (profile != nullptr) {
        MINFER_RETURN_IF_ERROR(b->synchronize());
        const std::chrono::duration<double> dt = Clock::now() - t0;
        profile->add(std::string(b->name()) + " " + op_name(g.nodes[i].op), dt.count());
      }
    }
    if (replay) MINFER_RETURN_IF_ERROR(b->end_split());
    MINFER_RETURN_IF_ERROR(b->synchronize());
    if (device_timed) {
      const std::vector<double> times = b->take_node_times();
      if (times.size() != timed.size()) {
        return Status::internal(std::string(b->name()) + ": " + std::to_string(times.size()) +
                                " node times for " + std::to_string(timed.size()) + " nodes");
      }
      for (size_t k = 0; k < timed.size(); ++k) {
        profile->add(std::string(b->name()) + " " + op_name(g.nodes[timed[k]].op), times[k]);
      }
    }
  }
  if (g.logits == kNoNode) return Status::ok();
  const Node& out = g.at(g.logits);
  logits.resize(static_cast<size_t>(out.shape.elements()));
  Backend* b = backends[static_cast<size_t>(plan.node_backend[static_cast<size_t>(g.logits)])];
  return b->read_host(plan.node_buffer[static_cast<size_t>(g.logits)], 0,
                      std::as_writable_bytes(std::span(logits)));
}

}  // namespace minfer::graph
