// The executor over two backends: a PartialBackend that claims some ops in
// front of the real CPU backend. Checks the split table, the staging of every
// value crossing a split boundary, one synchronize() per split, and that the
// logits match a CPU-only run (both delegate to the same CPU kernels, so the
// numbers must agree).
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <set>
#include <utility>
#include <vector>

#include "graph_testutil.h"

namespace minfer::graph {
namespace {

using testing::Forward;
using testing::PartialBackend;
using testing::tiny_model;

struct Config {
  std::string shape;
  std::string claims;  // "matmul" or "elementwise"
};

// Without it gtest prints the struct's raw bytes, padding included.
void PrintTo(const Config& c, std::ostream* os) {
  *os << c.shape << "/" << c.claims;
}

std::string config_name(const ::testing::TestParamInfo<Config>& info) {
  std::string s = info.param.shape + "_" + info.param.claims;
  for (char& c : s) {
    if (c == '-') c = '_';
  }
  return s;
}

class ExecutorTest : public ::testing::TestWithParam<Config> {};

std::unique_ptr<PartialBackend> make_partial(const model::Model& m, const std::string& claims) {
  if (claims == "matmul")
    return std::make_unique<PartialBackend>(m.weights(), std::set{Op::kMatMul});
  return std::make_unique<PartialBackend>(m.weights(), testing::elementwise_ops(),
                                          std::set{Op::kSwiGLU, Op::kGeGLU});
}

// The split table a correct assign + split pass gives: maximal runs of nodes
// with the same first claiming backend.
std::vector<std::pair<int, size_t>> expected_runs(const Graph& g,
                                                  std::span<backend::Backend* const> backends) {
  std::vector<std::pair<int, size_t>> runs;  // (backend, length)
  for (const Node& n : g.nodes) {
    int b = 0;
    while (!backends[static_cast<size_t>(b)]->supports_op(n)) ++b;
    if (runs.empty() || runs.back().first != b) {
      runs.push_back({b, 1});
    } else {
      runs.back().second++;
    }
  }
  return runs;
}

TEST_P(ExecutorTest, SplitsStagingSyncAndLogits) {
  const Config& cfg = GetParam();
  const model::Model& m = tiny_model(cfg.shape);
  cpu::CpuBackend cpu(m.weights(), 1);
  cpu::CpuBackend cpu_only(m.weights(), 1);
  auto partial = make_partial(m, cfg.claims);

  Forward mixed = Forward::make(m, {partial.get(), &cpu}, 1);
  Forward reference = Forward::make(m, {&cpu_only}, 0);

  int checked_plans = 0;
  mixed.on_plan = [&](const Graph& g, const Plan& plan) {
    ++checked_plans;
    partial->reset_counters();
    const auto runs = expected_runs(g, mixed.backends);
    ASSERT_EQ(plan.splits.size(), runs.size());
    size_t begin = 0;
    int partial_splits = 0;
    for (size_t s = 0; s < runs.size(); ++s) {
      const Split& sp = plan.splits[s];
      EXPECT_EQ(sp.backend, runs[s].first) << "split " << s;
      EXPECT_EQ(sp.begin, begin) << "split " << s;
      EXPECT_EQ(sp.end, begin + runs[s].second) << "split " << s;
      if (s > 0) EXPECT_NE(sp.backend, plan.splits[s - 1].backend) << "splits must alternate";
      begin = sp.end;
      if (sp.backend == 0) ++partial_splits;
    }
    EXPECT_EQ(begin, g.nodes.size());
    // Two backends both in use: the table alternates, with several splits on each.
    EXPECT_GE(partial_splits, 2);
    if (cfg.claims == "matmul") {
      // Per layer: q|k|v, attn_output, gate|up, down; then the output matmul.
      EXPECT_EQ(partial_splits, 4 * m.hparams().n_layer + 1);
      EXPECT_EQ(plan.node_backend[static_cast<size_t>(g.logits)], 0);
    }

    // Staging: exactly the values a split reads from the other backend, each in
    // an alloc_fresh buffer shared with nothing else.
    std::map<int, std::set<backend::BufferId>> node_buffers;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (plan.node_buffer[i] != backend::kNoBuffer) {
        node_buffers[plan.node_backend[i]].insert(plan.node_buffer[i]);
      }
    }
    std::set<std::pair<int, backend::BufferId>> staging_seen;
    size_t partial_staged = 0;
    for (size_t s = 0; s < plan.splits.size(); ++s) {
      const Split& sp = plan.splits[s];
      std::set<NodeId> foreign;
      for (size_t i = sp.begin; i < sp.end; ++i) {
        for (NodeId in : g.nodes[i].inputs) {
          if (plan.node_backend[static_cast<size_t>(in)] != sp.backend) foreign.insert(in);
        }
      }
      std::set<NodeId> staged;
      for (const auto& [node, buf] : sp.staged) {
        staged.insert(node);
        EXPECT_TRUE(staging_seen.insert({sp.backend, buf}).second)
            << "split " << s << " reuses staging buffer " << buf;
        EXPECT_FALSE(node_buffers[sp.backend].count(buf))
            << "split " << s << " stages node " << node << " into a planned node buffer";
        EXPECT_GE(mixed.backends[static_cast<size_t>(sp.backend)]->buffer_size(buf),
                  g.at(node).bytes());
        if (sp.backend == 0) {
          EXPECT_TRUE(partial->fresh().count(buf))
              << "split " << s << " staged node " << node << " in a non-fresh buffer";
          ++partial_staged;
        }
      }
      EXPECT_EQ(staged, foreign) << "split " << s;
      if (s > 0) EXPECT_FALSE(foreign.empty()) << "split " << s << " reads nothing from before";
    }
    EXPECT_GT(partial_staged, 0u);
  };
  int expected_syncs = 0;
  mixed.after_run = [&](const Graph& g, const Plan& plan) {
    expected_syncs = 0;
    for (const Split& sp : plan.splits) expected_syncs += sp.backend == 0 ? 1 : 0;
    EXPECT_EQ(partial->syncs(), expected_syncs) << "one synchronize() per split of the backend";
    EXPECT_GT(partial->reads(), 0) << "values produced on the partial backend were read back";
    EXPECT_GT(partial->writes(), 0) << "values staged into the partial backend";
    size_t partial_nodes = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) partial_nodes += plan.node_backend[i] == 0;
    EXPECT_EQ(partial->executed().size(), partial_nodes);
  };

  // A prefill, then two decode steps that read the cache it wrote.
  const std::vector<std::vector<int32_t>> batches = {{1, 17, 42, 300, 5, 511}, {7}, {250}};
  for (const auto& batch : batches) {
    const std::vector<float> got = mixed.run(m, batch);
    const std::vector<float> want = reference.run(m, batch);
    ASSERT_EQ(got.size(), static_cast<size_t>(m.hparams().n_vocab));
    EXPECT_LE(testing::max_abs_diff(got, want), 1e-6f) << "batch of " << batch.size();
  }
  EXPECT_EQ(checked_plans, 3);
  for (const auto& v : partial->violations()) ADD_FAILURE() << v;
}

INSTANTIATE_TEST_SUITE_P(
    TinyArchs, ExecutorTest,
    ::testing::Values(Config{"tiny-qwen2", "matmul"}, Config{"tiny-qwen3", "matmul"},
                      Config{"tiny-llama", "matmul"}, Config{"tiny-gemma3", "matmul"},
                      Config{"tiny-qwen2", "elementwise"}, Config{"tiny-gemma3", "elementwise"},
                      Config{"tiny-qwen3moe", "elementwise"}),
    config_name);

// A backend with no mixture-of-experts kernels (as the GPU backends today)
// in front of the CPU: every MoE node goes to the CPU (as do the KV cache's
// nodes: the cache is the CPU's here), the rest stays in front, values cross
// both ways, and the logits are the CPU-only run's.
TEST(ExecutorMoeTest, MoeOpsRunOnTheNextBackend) {
  const model::Model& m = tiny_model("tiny-qwen3moe");
  const std::set<Op> moe = {Op::kMoeTopK, Op::kMoeWeights, Op::kMatMulId, Op::kMoeSum};
  std::set<Op> claims = {Op::kInput,  Op::kGetRows, Op::kRmsNorm,
                         Op::kMatMul, Op::kRope,    Op::kArgMax};
  for (Op op : testing::elementwise_ops()) claims.insert(op);
  PartialBackend partial(m.weights(), claims, {Op::kSwiGLU});
  cpu::CpuBackend cpu(m.weights(), 1);
  cpu::CpuBackend cpu_only(m.weights(), 1);
  Forward mixed = Forward::make(m, {&partial, &cpu}, 1);
  Forward reference = Forward::make(m, {&cpu_only}, 0);
  int moe_nodes = 0;
  mixed.on_plan = [&](const Graph& g, const Plan& plan) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const bool on_cpu = moe.count(g.nodes[i].op) > 0 || op_traits(g.nodes[i].op).uses_kv;
      moe_nodes += moe.count(g.nodes[i].op) > 0;
      EXPECT_EQ(plan.node_backend[i], on_cpu ? 1 : 0) << g.nodes[i].name;
    }
    const std::string text = describe_plan(g, plan, mixed.backends);
    for (const char* name : {"moe_topk", "moe_weights", "mul_mat_id", "moe_sum"}) {
      EXPECT_NE(text.find(name), std::string::npos) << name << " missing from:\n" << text;
    }
  };
  const std::vector<std::vector<int32_t>> batches = {{1, 17, 42, 300, 5, 511}, {7}};
  for (const auto& batch : batches) {
    const std::vector<float> got = mixed.run(m, batch);
    const std::vector<float> want = reference.run(m, batch);
    ASSERT_EQ(got.size(), static_cast<size_t>(m.hparams().n_vocab));
    EXPECT_LE(testing::max_abs_diff(got, want), 1e-6f) << "batch of " << batch.size();
  }
  // Per layer: the top-k and weights nodes, three expert matmuls and the sum.
  EXPECT_EQ(moe_nodes, 2 * 6 * m.hparams().n_layer);
  for (const auto& v : partial.violations()) ADD_FAILURE() << v;
}

// The PartialBackend's own checks must fire when a node is handed a buffer of
// another backend: otherwise the clean run above would prove nothing.
TEST(PartialBackendTest, FlagsForeignAndUnwrittenBuffers) {
  const model::Model& m = tiny_model("tiny-llama");
  PartialBackend partial(m.weights(), {Op::kAdd});
  auto a = partial.alloc_buffer(16);
  ASSERT_TRUE(a.is_ok());
  Node add;
  add.op = Op::kAdd;
  add.shape = {{4, 1}};
  add.name = "probe_add";
  const std::vector<backend::BufferId> inputs = {*a, 3};  // 3: a CPU-backend id
  EXPECT_FALSE(partial.execute_node(add, inputs, *a, nullptr).is_ok());
  ASSERT_EQ(partial.violations().size(), 2u);
  EXPECT_NE(partial.violations()[0].find("before anything wrote it"), std::string::npos);
  EXPECT_NE(partial.violations()[1].find("not one of this backend's"), std::string::npos);
  partial.free_buffer(*a);
}

// Errors from a backend reach the caller with the node named; nothing is
// retried elsewhere.
TEST(ExecutorErrorTest, BackendErrorNamesTheNode) {
  const model::Model& m = tiny_model("tiny-qwen2");
  cpu::CpuBackend cpu(m.weights(), 1);
  std::vector<backend::Backend*> backends = {&cpu};
  model::GraphParams params;
  params.n_tokens = 2;
  Graph g = testing::build(m, params, backends);
  auto plan = build_plan(g, backends);
  ASSERT_TRUE(plan.is_ok()) << plan.message();
  const std::vector<int32_t> tokens = {1, 2}, positions = {0, 1};
  std::vector<float> logits;
  // No KV cache: the first KV store must fail and say which node and layer.
  const Status st = execute(
      g, *plan, backends, {.tokens = tokens, .positions = positions},
      [](int, int) -> const backend::KvPair* { return nullptr; }, logits);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("blk.0.kv_store"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("layer 0"), std::string::npos) << st.message();
  // Wrong input length: names the input and both counts.
  const std::vector<int32_t> three = {1, 2, 3};
  const Status st2 = execute(
      g, *plan, backends, {.tokens = three, .positions = positions},
      [](int, int) -> const backend::KvPair* { return nullptr; }, logits);
  ASSERT_FALSE(st2.is_ok());
  EXPECT_NE(st2.message().find("'tokens' expects 2 values, got 3"), std::string::npos)
      << st2.message();
  release_plan(*plan, backends);
}

}  // namespace
}  // namespace minfer::graph
