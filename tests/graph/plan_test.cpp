// build_plan on real graphs of every tiny architecture: the allocator's
// liveness invariants, the split/staging bookkeeping, describe_plan, and the
// assignment error for a node no backend runs.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph_testutil.h"

namespace minfer::graph {
namespace {

using testing::PartialBackend;
using testing::tiny_model;

// Ops the allocator may run in place (output in the buffer of input 0 when
// that input dies at the node). Kept here, independent of plan.cpp, so that a
// new in-place op is a deliberate change to both.
bool may_run_in_place(Op op) {
  switch (op) {
    case Op::kAdd:
    case Op::kMul:
    case Op::kScale:
    case Op::kSilu:
    case Op::kGelu:
    case Op::kRmsNorm:
    case Op::kRope:
    case Op::kSwiGLU:
    case Op::kGeGLU:
      return true;
    default:
      return false;
  }
}

// Checks every allocation invariant of `plan` and returns planned/sum(node bytes).
double check_allocation(const Graph& g, const Plan& plan,
                        std::span<backend::Backend* const> backends, const std::string& what) {
  SCOPED_TRACE(what);
  const size_t n = g.nodes.size();
  // Live range of node i: from its definition to its last reader. Graph
  // inputs are written before the first node runs and the logits are read
  // after the last, so both span the whole forward pass.
  std::vector<size_t> def(n), last(n);
  for (size_t i = 0; i < n; ++i) {
    def[i] = i;
    last[i] = i;
    for (NodeId in : g.nodes[i].inputs) last[static_cast<size_t>(in)] = i;
  }
  for (NodeId id : {g.tokens, g.positions}) def[static_cast<size_t>(id)] = 0;
  for (NodeId id : {g.tokens, g.positions, g.logits}) last[static_cast<size_t>(id)] = n;

  size_t sum_bytes = 0;
  std::map<std::pair<int, backend::BufferId>, std::vector<size_t>> tenants;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = g.nodes[i];
    sum_bytes += node.bytes();
    const backend::BufferId buf = plan.node_buffer[i];
    if (node.bytes() == 0) {
      EXPECT_EQ(buf, backend::kNoBuffer) << "node " << i << " '" << node.name << "' has no value";
      continue;
    }
    EXPECT_NE(buf, backend::kNoBuffer) << "node " << i << " '" << node.name << "'";
    const int b = plan.node_backend[i];
    EXPECT_GE(backends[static_cast<size_t>(b)]->buffer_size(buf), node.bytes())
        << "node " << i << " '" << node.name << "'";
    tenants[{b, buf}].push_back(i);
  }

  int in_place = 0;
  for (const auto& [key, nodes] : tenants) {
    for (size_t x = 0; x < nodes.size(); ++x) {
      for (size_t y = x + 1; y < nodes.size(); ++y) {
        const size_t i = nodes[x], j = nodes[y];  // i < j
        const Node& nj = g.nodes[j];
        for (NodeId special : {g.tokens, g.positions, g.logits}) {
          EXPECT_NE(static_cast<NodeId>(i), special)
              << "'" << g.nodes[i].name << "' shares its buffer with '" << nj.name << "'";
          EXPECT_NE(static_cast<NodeId>(j), special)
              << "'" << nj.name << "' shares its buffer with '" << g.nodes[i].name << "'";
        }
        const bool overlap = def[j] <= last[i] && def[i] <= last[j];
        if (!overlap) continue;
        const bool allowed = last[i] == j && may_run_in_place(nj.op) && !nj.inputs.empty() &&
                             nj.inputs[0] == static_cast<NodeId>(i) &&
                             plan.node_backend[i] == plan.node_backend[j];
        EXPECT_TRUE(allowed) << "nodes " << i << " '" << g.nodes[i].name << "' (live to " << last[i]
                             << ") and " << j << " '" << nj.name << "' share buffer " << key.second;
        // The in-place pair hands the buffer over: no third tenant may overlap.
        in_place += allowed ? 1 : 0;
      }
    }
  }
  EXPECT_GT(in_place, 0) << "no node ran in place: the residual adds should";

  // planned_bytes counts each buffer once, and the plan owns exactly those.
  size_t staging_bytes = 0;
  for (const Split& sp : plan.splits) {
    for (const auto& [node, buf] : sp.staged) {
      staging_bytes += backends[static_cast<size_t>(sp.backend)]->buffer_size(buf);
    }
  }
  size_t owned_bytes = 0;
  std::set<std::pair<int, backend::BufferId>> owned;
  for (const auto& [b, id] : plan.owned) {
    EXPECT_TRUE(owned.insert({b, id}).second) << "buffer " << id << " owned twice";
    owned_bytes += backends[static_cast<size_t>(b)]->buffer_size(id);
  }
  EXPECT_EQ(owned_bytes, plan.planned_bytes);
  for (const auto& [key, nodes] : tenants) {
    EXPECT_TRUE(owned.count(key)) << "node buffer " << key.second << " is not owned by the plan";
  }
  // Staging copies are per split by design (alloc_fresh); the liveness
  // reuse is judged on the node buffers alone.
  EXPECT_LE(staging_bytes, plan.planned_bytes);
  std::printf(
      "  %-44s %3zu nodes, %5.1f KiB of node values -> %5.1f KiB of buffers (%.3f)"
      " + %5.1f KiB staging\n",
      what.c_str(), n, sum_bytes / 1024.0, (plan.planned_bytes - staging_bytes) / 1024.0,
      static_cast<double>(plan.planned_bytes - staging_bytes) / sum_bytes, staging_bytes / 1024.0);
  return static_cast<double>(plan.planned_bytes - staging_bytes) / static_cast<double>(sum_bytes);
}

struct Case {
  int64_t n_tokens, n_outputs;
  bool partial;  // {Partial(matmul), CPU} instead of {CPU}
};

TEST(PlanTest, AllocatorInvariantsOnEveryArch) {
  const std::vector<Case> cases = {{7, 1, false},  {7, 7, false}, {1, 1, false},
                                   {32, 1, false}, {7, 1, true},  {7, 7, true}};
  for (const std::string& shape : testing::tiny_shapes()) {
    const model::Model& m = tiny_model(shape);
    for (const Case& c : cases) {
      cpu::CpuBackend cpu(m.weights(), 1);
      PartialBackend partial(m.weights(), {Op::kMatMul});
      std::vector<backend::Backend*> backends;
      if (c.partial) backends.push_back(&partial);
      backends.push_back(&cpu);
      model::GraphParams params;
      params.n_tokens = c.n_tokens;
      params.n_outputs = c.n_outputs;
      const Graph g = testing::build(m, params, backends);
      auto plan = build_plan(g, backends);
      ASSERT_TRUE(plan.is_ok()) << plan.message();
      const std::string what = shape + " n_tokens=" + std::to_string(c.n_tokens) +
                               " n_outputs=" + std::to_string(c.n_outputs) +
                               (c.partial ? " {Partial, CPU}" : " {CPU}");
      const double ratio = check_allocation(g, *plan, backends, what);
      ::testing::Test::RecordProperty(what, std::to_string(ratio));
      // Liveness reuse must pay off: two layers' intermediates fit in a
      // fraction of their sum.
      EXPECT_LT(ratio, 0.45) << what;
      release_plan(*plan, backends);
    }
  }
}

// A value whose last reader has no output of its own (the KV store) is
// released there, so a later node of the same size reuses its buffer.
TEST(PlanTest, ValueDyingAtAKvStoreIsReleased) {
  const model::Model& m = tiny_model("tiny-llama");
  cpu::CpuBackend cpu(m.weights(), 1);
  std::vector<backend::Backend*> backends = {&cpu};
  auto node = [](Op op, DType t, Shape shape, std::vector<NodeId> in, std::string name) {
    Node n;
    n.op = op;
    n.dtype = t;
    n.shape = shape;
    n.inputs = std::move(in);
    n.name = std::move(name);
    return n;
  };
  Graph g;
  g.tokens = g.add(node(Op::kInput, DType::kI32, {{4, 1}}, {}, "tokens"));
  g.positions = g.add(node(Op::kInput, DType::kI32, {{4, 1}}, {}, "positions"));
  const NodeId x = g.add(node(Op::kGetRows, DType::kF32, {{64, 4}}, {g.tokens}, "x"));
  g.at(x).meta = GetRowsMeta{};
  g.add(node(Op::kKvStore, DType::kF32, {{0, 0}}, {x, x, g.positions}, "store"));
  const NodeId z = g.add(node(Op::kGetRows, DType::kF32, {{64, 4}}, {g.tokens}, "z"));
  g.at(z).meta = GetRowsMeta{};
  g.logits = g.add(node(Op::kScale, DType::kF32, {{64, 4}}, {z}, "logits"));
  auto plan = build_plan(g, backends);
  ASSERT_TRUE(plan.is_ok()) << plan.message();
  EXPECT_EQ(plan->node_buffer[static_cast<size_t>(z)], plan->node_buffer[static_cast<size_t>(x)]);
  EXPECT_EQ(plan->node_buffer[3], backend::kNoBuffer);
  // tokens, positions, x|z, logits.
  EXPECT_EQ(plan->owned.size(), 4u);
  release_plan(*plan, backends);
}

TEST(PlanTest, DescribePlanNamesSplitsAndCensus) {
  const model::Model& m = tiny_model("tiny-qwen2");
  cpu::CpuBackend cpu(m.weights(), 1);
  PartialBackend partial(m.weights(), {Op::kMatMul});
  std::vector<backend::Backend*> backends = {&partial, &cpu};
  model::GraphParams params;
  params.n_tokens = 4;
  const Graph g = testing::build(m, params, backends);
  auto plan = build_plan(g, backends);
  ASSERT_TRUE(plan.is_ok()) << plan.message();
  const std::string text = describe_plan(g, *plan, backends);
  EXPECT_NE(text.find(std::to_string(g.nodes.size()) + " nodes, " +
                      std::to_string(plan->splits.size()) + " split(s)"),
            std::string::npos)
      << text;
  for (size_t s = 0; s < plan->splits.size(); ++s) {
    const Split& sp = plan->splits[s];
    const std::string line = "split " + std::to_string(s) + ": " +
                             (sp.backend == 0 ? "Partial" : "CPU") + " nodes [" +
                             std::to_string(sp.begin) + ", " + std::to_string(sp.end) + ")";
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_NE(text.find("op census: Partial CPU"), std::string::npos) << text;
  // Per op, one count per backend in priority order.
  std::map<std::string, std::pair<int, int>> census;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto& row = census[op_name(g.nodes[i].op)];
    (plan->node_backend[i] == 0 ? row.first : row.second)++;
  }
  for (const auto& [op, counts] : census) {
    const std::string line =
        "    " + op + " " + std::to_string(counts.first) + " " + std::to_string(counts.second);
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n" << text;
  }
  // 7 matmuls per layer plus the output matmul, all on the partial backend.
  EXPECT_NE(text.find("    mul_mat " + std::to_string(7 * m.hparams().n_layer + 1) + " 0\n"),
            std::string::npos)
      << text;
  release_plan(*plan, backends);
}

TEST(PlanTest, AssignErrorNamesTheNode) {
  const model::Model& m = tiny_model("tiny-llama");
  cpu::CpuBackend cpu(m.weights(), 1);
  std::vector<backend::Backend*> backends = {&cpu};
  model::GraphParams params;
  params.n_tokens = 3;
  Graph g = testing::build(m, params, backends);

  // A fused op the CPU has no kernel for.
  Graph fused = g;
  NodeId target = kNoNode;
  for (size_t i = 0; i < fused.nodes.size(); ++i) {
    if (fused.nodes[i].name == "blk.1.ffn_glu") target = static_cast<NodeId>(i);
  }
  ASSERT_NE(target, kNoNode);
  fused.at(target).op = Op::kFusedFFN;
  auto r = build_plan(fused, backends);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.message(), "no backend supports node " + std::to_string(target) +
                             " 'blk.1.ffn_glu' (fused_ffn, f32)");

  // A matmul over a weight the backend does not have.
  Graph missing = g;
  for (auto& n : missing.nodes) {
    if (n.name == "blk.0.attn_k.weight") std::get<MatMulMeta>(n.meta).weight = "blk.0.nope.weight";
  }
  r = build_plan(missing, backends);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("'blk.0.attn_k.weight' (mul_mat, f32)"), std::string::npos)
      << r.message();

  // A backend list that cannot run the graph inputs at all.
  PartialBackend only_matmul(m.weights(), {Op::kMatMul});
  std::vector<backend::Backend*> matmul_only = {&only_matmul};
  r = build_plan(g, matmul_only);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.message(), "no backend supports node 0 'tokens' (input, i32)");
}

}  // namespace
}  // namespace minfer::graph

namespace minfer::graph {
namespace {

// Where each layer's KV cache lives is the plan's decision (the backend that
// runs the layer's attention), and later plans are held to it: a node that
// uses a layer's cache never quietly runs away from it.
TEST(PlanTest, KvPlacementFollowsAttentionAndBindsLaterPlans) {
  const model::Model& m = tiny_model("tiny-llama");
  const int64_t n_layer = m.hparams().n_layer;
  cpu::CpuBackend cpu(m.weights(), 1);
  model::GraphParams params;
  params.n_tokens = 1;
  params.fuse = false;
  // A backend without attention: every cache stays with the CPU.
  testing::PartialBackend no_attention(m.weights(), {Op::kMatMul, Op::kRmsNorm, Op::kAdd});
  std::vector<backend::Backend*> backends = {&no_attention, &cpu};
  Graph g = testing::build(m, params, backends);
  auto plan = build_plan(g, backends);
  ASSERT_TRUE(plan.is_ok()) << plan.message();
  auto where = kv_placement(g, backends, n_layer);
  ASSERT_TRUE(where.is_ok()) << where.message();
  EXPECT_EQ(*where, std::vector<int>(static_cast<size_t>(n_layer), 1));
  release_plan(*plan, backends);

  // A backend with attention and its KV store takes every layer's cache.
  testing::PartialBackend with_attention(m.weights(), {Op::kKvStore, Op::kAttention});
  backends = {&with_attention, &cpu};
  g = testing::build(m, params, backends);
  plan = build_plan(g, backends);
  ASSERT_TRUE(plan.is_ok()) << plan.message();
  where = kv_placement(g, backends, n_layer);
  ASSERT_TRUE(where.is_ok()) << where.message();
  EXPECT_EQ(*where, std::vector<int>(static_cast<size_t>(n_layer), 0));
  release_plan(*plan, backends);

  // A backend that would store the rows but not attend over them (CUDA with
  // a paged pool): both stay with the CPU, never split across two.
  testing::PartialBackend store_only(m.weights(), {Op::kKvStore});
  backends = {&store_only, &cpu};
  g = testing::build(m, params, backends);
  where = kv_placement(g, backends, n_layer);
  ASSERT_TRUE(where.is_ok()) << where.message();
  EXPECT_EQ(*where, std::vector<int>(static_cast<size_t>(n_layer), 1));

  // Held to a placement on the backend without attention: an error naming
  // the node, the backend and the layer, not a move to the CPU.
  PlanConstraints bound;
  bound.kv_backend.assign(static_cast<size_t>(n_layer), 0);
  backends = {&no_attention, &cpu};
  g = testing::build(m, params, backends);
  auto refused = build_plan(g, backends, bound);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInternal);
  EXPECT_EQ(refused.message(),
            "node 'blk.0.kv_store' (kv_store) must run on Partial, which holds layer 0's KV "
            "cache, but Partial does not support it");
  // Held to the CPU while the other backend could run attention: the CPU it is.
  bound.kv_backend.assign(static_cast<size_t>(n_layer), 1);
  backends = {&with_attention, &cpu};
  g = testing::build(m, params, backends);
  plan = build_plan(g, backends, bound);
  ASSERT_TRUE(plan.is_ok()) << plan.message();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (op_traits(g.nodes[i].op).uses_kv) EXPECT_EQ(plan->node_backend[i], 1) << g.nodes[i].name;
  }
  release_plan(*plan, backends);
}

}  // namespace
}  // namespace minfer::graph
