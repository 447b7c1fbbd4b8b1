#include "graph/fusion.h"

#include <cstdlib>

namespace minfer::graph {
namespace {

backend::Backend* first_supporting(const Node& n, std::span<backend::Backend* const> backends) {
  for (auto* b : backends) {
    if (b->supports_op(n)) return b;
  }
  return nullptr;
}

std::vector<int> count_users(const Graph& g) {
  std::vector<int> users(g.nodes.size(), 0);
  for (const auto& n : g.nodes) {
    for (NodeId in : n.inputs) users[static_cast<size_t>(in)]++;
  }
  return users;
}

}  // namespace

void remove_dead_nodes(Graph& g) {
  std::vector<bool> live(g.nodes.size(), false);
  auto mark = [&](NodeId id) {
    if (id != kNoNode) live[static_cast<size_t>(id)] = true;
  };
  mark(g.tokens);
  mark(g.positions);
  mark(g.logits);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    if (n.op == Op::kKvStore) live[i] = true;  // side effect on the cache
    if (!live[i]) continue;
    for (NodeId in : n.inputs) live[static_cast<size_t>(in)] = true;
  }
  std::vector<NodeId> remap(g.nodes.size(), kNoNode);
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!live[i]) continue;
    remap[i] = static_cast<NodeId>(kept.size());
    kept.push_back(std::move(g.nodes[i]));
  }
  for (auto& n : kept) {
    for (NodeId& in : n.inputs) in = remap[static_cast<size_t>(in)];
  }
  auto re = [&](NodeId id) { return id == kNoNode ? kNoNode : remap[static_cast<size_t>(id)]; };
  g.tokens = re(g.tokens);
  g.positions = re(g.positions);
  g.logits = re(g.logits);
  g.nodes = std::move(kept);
}

int fuse(Graph& g, std::span<backend::Backend* const> backends) {
  if (const char* off = std::getenv("MINFER_NO_FUSE_GLU"); off != nullptr && *off && *off != '0') {
    return 0;
  }
  const std::vector<int> users = count_users(g);
  int fused = 0;
  for (auto& n : g.nodes) {
    if (n.op != Op::kMul || n.inputs.size() != 2) continue;
    const Node& act = g.at(n.inputs[0]);
    if ((act.op != Op::kSilu && act.op != Op::kGelu) || users[n.inputs[0]] != 1) continue;
    const Op fused_op = act.op == Op::kSilu ? Op::kSwiGLU : Op::kGeGLU;
    backend::Backend* b = first_supporting(n, backends);
    if (b == nullptr || b != first_supporting(act, backends) || !b->supports_fused(fused_op)) {
      continue;
    }
    Node candidate = n;
    candidate.op = fused_op;
    candidate.inputs = {act.inputs[0], n.inputs[1]};
    if (!b->supports_op(candidate)) continue;
    n = std::move(candidate);
    ++fused;
  }
  if (fused > 0) remove_dead_nodes(g);
  return fused;
}

}  // namespace minfer::graph
