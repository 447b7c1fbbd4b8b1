#include "graph/plan.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <sstream>

namespace minfer::graph {
namespace {

using backend::Backend;
using backend::BufferId;
using backend::kNoBuffer;

// The backend a KV-using node must run on, or -1 when free to choose.
int kv_bound(const Node& n, const PlanConstraints& c) {
  if (!op_traits(n.op).uses_kv || n.layer < 0) return -1;
  if (static_cast<size_t>(n.layer) >= c.kv_backend.size()) return -1;
  return c.kv_backend[static_cast<size_t>(n.layer)];
}

Result<std::vector<int>> assign(const Graph& g, std::span<Backend* const> backends,
                                const PlanConstraints& constraints) {
  std::vector<int> out(g.nodes.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (const int b = kv_bound(g.nodes[i], constraints); b >= 0) {
      const Node& n = g.nodes[i];
      if (static_cast<size_t>(b) >= backends.size() || !backends[b]->supports_op(n)) {
        const std::string where =
            static_cast<size_t>(b) < backends.size() ? std::string(backends[b]->name()) : "?";
        return Status::internal("node '" + n.name + "' (" + op_name(n.op) + ") must run on " +
                                where + ", which holds layer " + std::to_string(n.layer) +
                                "'s KV cache, but " + where + " does not support it");
      }
      out[i] = b;
      continue;
    }
    for (size_t b = 0; b < backends.size(); ++b) {
      if (backends[b]->supports_op(g.nodes[i])) {
        out[i] = static_cast<int>(b);
        break;
      }
    }
    if (out[i] < 0) {
      const Node& n = g.nodes[i];
      return Status::internal("no backend supports node " + std::to_string(i) + " '" + n.name +
                              "' (" + op_name(n.op) + ", " + dtype_name(n.dtype) + ")");
    }
  }
  return out;
}

std::vector<Split> make_splits(const std::vector<int>& node_backend) {
  std::vector<Split> splits;
  for (size_t i = 0; i < node_backend.size(); ++i) {
    if (splits.empty() || splits.back().backend != node_backend[i]) {
      splits.push_back({node_backend[i], i, i + 1, {}});
    } else {
      splits.back().end = i + 1;
    }
  }
  return splits;
}

// Per-backend slots: logical buffers whose size grows to their largest tenant.
struct SlotPool {
  std::vector<size_t> size;
  std::vector<bool> busy;
  int take(size_t bytes) {
    int best = -1;
    for (size_t s = 0; s < size.size(); ++s) {
      if (busy[s]) continue;
      const bool fits = size[s] >= bytes;
      if (best < 0) {
        best = static_cast<int>(s);
        continue;
      }
      const size_t bs = size[static_cast<size_t>(best)];
      // Prefer the smallest slot that fits, else the largest one (least growth).
      if ((fits && (bs < bytes || size[s] < bs)) || (!fits && bs < bytes && size[s] > bs)) {
        best = static_cast<int>(s);
      }
    }
    if (best < 0) {
      size.push_back(0);
      busy.push_back(false);
      best = static_cast<int>(size.size() - 1);
    }
    size[static_cast<size_t>(best)] = std::max(size[static_cast<size_t>(best)], bytes);
    busy[static_cast<size_t>(best)] = true;
    return best;
  }
  // A slot no earlier node had; its tenant lives to the end, so no later one gets it either.
  int take_unshared(size_t bytes) {
    size.push_back(bytes);
    busy.push_back(true);
    return static_cast<int>(size.size() - 1);
  }
};

std::vector<size_t> last_uses(const Graph& g) {
  std::vector<size_t> last(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    last[i] = i;
    for (NodeId in : g.nodes[i].inputs) last[static_cast<size_t>(in)] = i;
  }
  if (g.logits != kNoNode) last[static_cast<size_t>(g.logits)] = g.nodes.size();
  for (NodeId in : g.input_nodes())
    last[static_cast<size_t>(in)] = g.nodes.size();  // written first
  return last;
}

}  // namespace

BufferId Plan::buffer_in_split(const Split& s, NodeId node) const {
  for (const auto& [staged_node, buf] : s.staged) {
    if (staged_node == node) return buf;
  }
  return node_buffer[static_cast<size_t>(node)];
}

Result<std::vector<int>> kv_placement(const Graph& g, std::span<Backend* const> backends,
                                      int64_t n_layer) {
  std::vector<int> out(static_cast<size_t>(std::max<int64_t>(n_layer, 0)), -1);
  for (int64_t il = 0; il < n_layer; ++il) {
    std::vector<const Node*> users;
    for (const Node& n : g.nodes) {
      if (op_traits(n.op).uses_kv && n.layer == il) users.push_back(&n);
    }
    if (users.empty()) continue;
    for (size_t b = 0; b < backends.size() && out[static_cast<size_t>(il)] < 0; ++b) {
      const bool all = std::all_of(users.begin(), users.end(),
                                   [&](const Node* n) { return backends[b]->supports_op(*n); });
      if (all) out[static_cast<size_t>(il)] = static_cast<int>(b);
    }
    if (out[static_cast<size_t>(il)] < 0) {
      return Status::internal("no backend runs every node of layer " + std::to_string(il) +
                              " that uses its KV cache (first: '" + users.front()->name + "')");
    }
  }
  return out;
}

Result<Plan> build_plan(const Graph& g, std::span<Backend* const> backends,
                        const PlanConstraints& constraints) {
  static std::atomic<uint64_t> next_id{1};
  Plan plan;
  plan.id = next_id.fetch_add(1);
  MINFER_ASSIGN_OR_RETURN(plan.node_backend, assign(g, backends, constraints));
  plan.splits = make_splits(plan.node_backend);

  // Liveness: node -> slot per backend. `holds` says whether a node's death
  // frees its slot (false once an in-place user took the slot over).
  const std::vector<size_t> last = last_uses(g);
  std::vector<SlotPool> pools(backends.size());
  std::vector<int> node_slot(g.nodes.size(), -1);
  std::vector<bool> holds(g.nodes.size(), false);
  std::vector<std::vector<NodeId>> dying_at(g.nodes.size() + 1);
  for (size_t i = 0; i < g.nodes.size(); ++i) dying_at[last[i]].push_back(static_cast<NodeId>(i));
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const int b = plan.node_backend[i];
    // A node without a value (KV store) takes no slot, but the values dying at
    // it must still be released below.
    if (n.bytes() > 0) {
      const bool unshared = static_cast<NodeId>(i) == g.logits || n.op == Op::kInput;
      if (unshared) node_slot[i] = pools[static_cast<size_t>(b)].take_unshared(n.bytes());
      // In place: take over input 0's slot if it dies here, on this backend, same size.
      if (!unshared && op_traits(n.op).in_place && !n.inputs.empty()) {
        const auto in = static_cast<size_t>(n.inputs[0]);
        if (last[in] == i && plan.node_backend[in] == b && holds[in] &&
            g.nodes[in].bytes() == n.bytes() && g.nodes[in].op != Op::kInput) {
          node_slot[i] = node_slot[in];
          holds[in] = false;
        }
      }
      if (node_slot[i] < 0) node_slot[i] = pools[static_cast<size_t>(b)].take(n.bytes());
      holds[i] = true;
    }
    for (NodeId d : dying_at[i]) {
      const auto di = static_cast<size_t>(d);
      if (holds[di]) {
        pools[static_cast<size_t>(plan.node_backend[di])].busy[static_cast<size_t>(node_slot[di])] =
            false;
        holds[di] = false;
      }
    }
  }
  // Materialize slots as backend buffers.
  std::vector<std::vector<BufferId>> slot_buffer(backends.size());
  for (size_t b = 0; b < backends.size(); ++b) {
    for (size_t size : pools[b].size) {
      MINFER_ASSIGN_OR_RETURN(BufferId id, backends[b]->alloc_buffer(size));
      slot_buffer[b].push_back(id);
      plan.owned.push_back({static_cast<int>(b), id});
      plan.planned_bytes += size;
    }
  }
  plan.node_buffer.assign(g.nodes.size(), kNoBuffer);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (node_slot[i] >= 0) {
      plan.node_buffer[i] =
          slot_buffer[static_cast<size_t>(plan.node_backend[i])][static_cast<size_t>(node_slot[i])];
    }
  }
  // Staging for values crossing into each split.
  for (auto& s : plan.splits) {
    for (size_t i = s.begin; i < s.end; ++i) {
      for (NodeId in : g.nodes[i].inputs) {
        if (plan.node_backend[static_cast<size_t>(in)] == s.backend) continue;
        if (std::any_of(s.staged.begin(), s.staged.end(),
                        [&](const auto& p) { return p.first == in; })) {
          continue;
        }
        const size_t bytes = g.at(in).bytes();
        MINFER_ASSIGN_OR_RETURN(BufferId id,
                                backends[static_cast<size_t>(s.backend)]->alloc_fresh(bytes));
        s.staged.push_back({in, id});
        plan.owned.push_back({s.backend, id});
        plan.planned_bytes += bytes;
      }
    }
  }
  return plan;
}

void release_plan(Plan& plan, std::span<Backend* const> backends) {
  for (const auto& [b, id] : plan.owned) backends[static_cast<size_t>(b)]->free_buffer(id);
  plan.owned.clear();
  plan.node_buffer.clear();
  plan.splits.clear();
}

std::string describe_plan(const Graph& g, const Plan& plan, std::span<Backend* const> backends) {
  std::ostringstream out;
  out << "graph: " << g.nodes.size() << " nodes, " << plan.splits.size() << " split(s), "
      << plan.planned_bytes / 1024 << " KiB of buffers\n";
  for (size_t s = 0; s < plan.splits.size(); ++s) {
    const Split& sp = plan.splits[s];
    out << "  split " << s << ": " << backends[static_cast<size_t>(sp.backend)]->name()
        << " nodes [" << sp.begin << ", " << sp.end << ") first '" << g.nodes[sp.begin].name
        << "' staged inputs " << sp.staged.size() << "\n";
  }
  std::map<std::string, std::vector<int>> census;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto& row = census[op_name(g.nodes[i].op)];
    row.resize(backends.size(), 0);
    row[static_cast<size_t>(plan.node_backend[i])]++;
  }
  out << "  op census:";
  for (auto* b : backends) out << " " << b->name();
  out << "\n";
  for (const auto& [op, counts] : census) {
    out << "    " << op;
    for (int c : counts) out << " " << c;
    out << "\n";
  }
  return out.str();
}

}  // namespace minfer::graph
