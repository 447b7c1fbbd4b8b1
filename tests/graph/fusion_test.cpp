// The fusion pass on real graphs: Mul(Silu(g), u) -> SwiGLU and
// Mul(Gelu(g), u) -> GeGLU exactly when the backend that would run both nodes
// claims the fused op; whole-row norms folded into the matmuls reading them;
// MINFER_NO_FUSE_GLU=1; dead-node removal and id
// renumbering.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "graph_testutil.h"

namespace minfer::graph {
namespace {

using testing::PartialBackend;
using testing::tiny_model;

int count(const Graph& g, Op op) {
  int c = 0;
  for (const Node& n : g.nodes) c += n.op == op;
  return c;
}

NodeId find(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].name == name) return static_cast<NodeId>(i);
  }
  return kNoNode;
}

Graph unfused(const model::Model& m, int64_t n_tokens = 3) {
  model::GraphParams params;
  params.n_tokens = n_tokens;
  auto g = model::build_graph(m.hparams(), m.weights(), params);
  EXPECT_TRUE(g.is_ok()) << g.message();
  return g ? std::move(*g) : Graph{};
}

// Every id in the graph points at a node before its user (execution order),
// and the graph's named inputs and output are where they say.
void check_well_formed(const Graph& g) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (NodeId in : g.nodes[i].inputs) {
      ASSERT_GE(in, 0) << "node " << i << " '" << g.nodes[i].name << "'";
      ASSERT_LT(static_cast<size_t>(in), i) << "node " << i << " '" << g.nodes[i].name << "'";
    }
  }
  ASSERT_NE(g.tokens, kNoNode);
  ASSERT_NE(g.positions, kNoNode);
  ASSERT_NE(g.logits, kNoNode);
  EXPECT_EQ(g.at(g.tokens).name, "tokens");
  EXPECT_EQ(g.at(g.positions).name, "positions");
  EXPECT_EQ(g.at(g.logits).name, "logits");
  EXPECT_EQ(static_cast<size_t>(g.logits), g.nodes.size() - 1);
}

struct Arch {
  std::string shape;
  Op act, fused;
  const char* act_name;
};

const std::vector<Arch>& archs() {
  static const std::vector<Arch> kArchs = {
      {"tiny-qwen2", Op::kSilu, Op::kSwiGLU, "ffn_silu"},
      {"tiny-qwen3", Op::kSilu, Op::kSwiGLU, "ffn_silu"},
      {"tiny-llama", Op::kSilu, Op::kSwiGLU, "ffn_silu"},
      {"tiny-gemma3", Op::kGelu, Op::kGeGLU, "ffn_gelu"},
  };
  return kArchs;
}

TEST(FusionTest, GluFusedOnCpuAndGraphRenumbered) {
  for (const Arch& a : archs()) {
    SCOPED_TRACE(a.shape);
    const model::Model& m = tiny_model(a.shape);
    const int n_layer = static_cast<int>(m.hparams().n_layer);
    cpu::CpuBackend cpu(m.weights(), 1);
    std::vector<backend::Backend*> backends = {&cpu};
    const Graph before = unfused(m);
    Graph g = before;
    ASSERT_EQ(count(g, a.act), n_layer);
    EXPECT_EQ(fuse(g, backends), n_layer);
    EXPECT_EQ(count(g, a.act), 0);
    EXPECT_EQ(count(g, a.fused), n_layer);
    EXPECT_EQ(count(g, Op::kMul), 0);
    EXPECT_EQ(g.nodes.size(), before.nodes.size() - static_cast<size_t>(n_layer));
    check_well_formed(g);
    // The fused node reads the gate and up projections directly, keeps the
    // name of the Mul it replaced, and its reader follows the renumbering.
    for (int il = 0; il < n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      const NodeId glu = find(g, p + "ffn_glu");
      ASSERT_NE(glu, kNoNode);
      EXPECT_EQ(g.at(glu).op, a.fused);
      ASSERT_EQ(g.at(glu).inputs.size(), 2u);
      EXPECT_EQ(g.at(g.at(glu).inputs[0]).name, p + "ffn_gate.weight");
      EXPECT_EQ(g.at(g.at(glu).inputs[1]).name, p + "ffn_up.weight");
      const NodeId down = find(g, p + "ffn_down.weight");
      ASSERT_NE(down, kNoNode);
      EXPECT_EQ(g.at(down).inputs, std::vector<NodeId>{glu});
      EXPECT_EQ(find(g, p + a.act_name), kNoNode);
    }
    // Every other node survives with its inputs, renamed to the new ids.
    std::map<std::string, std::vector<std::string>> want, got;
    for (const Node& n : before.nodes) {
      if (n.op == a.act || n.op == Op::kMul) continue;
      for (NodeId in : n.inputs) want[n.name].push_back(before.at(in).name);
    }
    for (const Node& n : g.nodes) {
      if (n.op == a.fused) continue;
      for (NodeId in : n.inputs) got[n.name].push_back(g.at(in).name);
    }
    EXPECT_EQ(got, want);
  }
}

TEST(FusionTest, OnlyWhenTheAssignedBackendClaimsTheFusedOp) {
  const model::Model& m = tiny_model("tiny-qwen2");
  const int n_layer = static_cast<int>(m.hparams().n_layer);
  cpu::CpuBackend cpu(m.weights(), 1);
  const std::set<Op> elementwise = testing::elementwise_ops();

  {  // The partial backend runs Silu and Mul but has no SwiGLU kernel: no fusion,
     // even though the CPU behind it would have one.
    PartialBackend partial(m.weights(), elementwise, /*fused=*/{});
    std::vector<backend::Backend*> backends = {&partial, &cpu};
    Graph g = unfused(m);
    EXPECT_EQ(fuse(g, backends), 0);
    EXPECT_EQ(count(g, Op::kSwiGLU), 0);
  }
  {  // It claims SwiGLU: fused, and the fused node is assigned to it.
    PartialBackend partial(m.weights(), elementwise, {Op::kSwiGLU});
    std::vector<backend::Backend*> backends = {&partial, &cpu};
    Graph g = unfused(m);
    EXPECT_EQ(fuse(g, backends), n_layer);
    auto plan = build_plan(g, backends);
    ASSERT_TRUE(plan.is_ok()) << plan.message();
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (g.nodes[i].op == Op::kSwiGLU) EXPECT_EQ(plan->node_backend[i], 0) << g.nodes[i].name;
    }
    release_plan(*plan, backends);
  }
  {  // Silu and Mul land on different backends: no fusion.
    PartialBackend partial(m.weights(), {Op::kMul, Op::kSwiGLU}, {Op::kSwiGLU});
    std::vector<backend::Backend*> backends = {&partial, &cpu};
    Graph g = unfused(m);
    EXPECT_EQ(fuse(g, backends), 0);
    EXPECT_EQ(count(g, Op::kSilu), n_layer);
  }
  {  // GeGLU is not SwiGLU: a backend claiming only GeGLU does not fuse qwen2.
    PartialBackend partial(m.weights(), elementwise, {Op::kGeGLU});
    std::vector<backend::Backend*> backends = {&partial, &cpu};
    Graph g = unfused(m);
    EXPECT_EQ(fuse(g, backends), 0);
  }
}

// A backend that claims kRmsNorm and matmuls with a folded input norm takes
// every whole-row norm read only by matmuls: each matmul reads the norm's
// input with the norm in its in_norm (a layer's q, k and v share theirs);
// a norm with any other reader stays.
TEST(FusionTest, WholeRowNormFoldsIntoEveryMatmulReadingIt) {
  const model::Model& m = tiny_model("tiny-qwen2");
  const int n_layer = static_cast<int>(m.hparams().n_layer);
  cpu::CpuBackend cpu(m.weights(), 1);
  std::set<Op> ops = testing::elementwise_ops();
  ops.insert({Op::kMatMul, Op::kRmsNorm});
  {
    PartialBackend partial(m.weights(), ops, {Op::kRmsNorm});
    partial.fold_input_norms();
    std::vector<backend::Backend*> backends = {&partial, &cpu};
    Graph g = unfused(m);
    const Graph before = g;
    // Per layer q, k, v (attn_norm), gate and up (ffn_norm); the output norm.
    EXPECT_EQ(fuse(g, backends), 5 * n_layer + 1);
    check_well_formed(g);
    EXPECT_EQ(count(g, Op::kRmsNorm), 0);
    int folded = 0;
    for (const Node& n : g.nodes) {
      const auto* mm = std::get_if<MatMulMeta>(&n.meta);
      if (mm == nullptr) continue;
      const NodeId old_id = find(before, n.name);
      ASSERT_NE(old_id, kNoNode) << n.name;
      const Node& old_norm = before.at(before.at(old_id).inputs[0]);
      // Matmuls over anything else (the o and down projections) keep theirs.
      ASSERT_EQ(mm->in_norm.on, old_norm.op == Op::kRmsNorm) << n.name;
      if (!mm->in_norm.on) continue;
      ++folded;
      // The norm's weight and eps, and the norm's own input (an Add or the
      // embedding rows, never a norm).
      const Node& x = g.at(n.inputs[0]);
      EXPECT_NE(x.op, Op::kRmsNorm) << n.name;
      const auto& nm = std::get<RmsNormMeta>(old_norm.meta);
      EXPECT_EQ(mm->in_norm.weight, nm.weight) << n.name;
      EXPECT_EQ(mm->in_norm.eps, nm.eps) << n.name;
      EXPECT_EQ(x.name, before.at(old_norm.inputs[0]).name) << n.name;
    }
    EXPECT_EQ(folded, 5 * n_layer + 1);
  }
  {  // The matmuls run on the CPU, which cannot fold a norm: every norm stays.
    ops.erase(Op::kMatMul);
    PartialBackend partial(m.weights(), ops, {Op::kRmsNorm});
    partial.fold_input_norms();
    std::vector<backend::Backend*> backends = {&partial, &cpu};
    Graph g = unfused(m);
    EXPECT_EQ(fuse(g, backends), 0);
  }
  {  // Without the claim nothing folds.
    ops.insert(Op::kMatMul);
    PartialBackend partial(m.weights(), ops, {});
    partial.fold_input_norms();
    std::vector<backend::Backend*> backends = {&partial, &cpu};
    Graph g = unfused(m);
    const int norms = count(g, Op::kRmsNorm);
    EXPECT_EQ(fuse(g, backends), 0);
    EXPECT_EQ(count(g, Op::kRmsNorm), norms);
  }
  {  // The CPU backend itself refuses a matmul with a folded norm.
    Graph g = unfused(m);
    for (Node& n : g.nodes) {
      auto* mm = std::get_if<MatMulMeta>(&n.meta);
      if (mm == nullptr) continue;
      EXPECT_TRUE(cpu.supports_op(n)) << n.name;
      mm->in_norm = InputNorm{true, "", 1e-6f};
      EXPECT_FALSE(cpu.supports_op(n)) << n.name;
    }
  }
}

// A mixture-of-experts layer on the CPU: the experts' Mul(Silu(gate), up)
// becomes SwiGLU over [n_ff_exp, k*T]; nothing else around the MoE ops
// fuses. On a backend that folds input norms, ffn_norm stays a node (the
// expert matmuls read it too) while attn_norm and the output norm fold.
TEST(FusionTest, MoeLayerFusesOnlyItsGlu) {
  const model::Model& m = tiny_model("tiny-qwen3moe");
  const int n_layer = static_cast<int>(m.hparams().n_layer);
  cpu::CpuBackend cpu(m.weights(), 1);
  {
    std::vector<backend::Backend*> backends = {&cpu};
    Graph g = unfused(m);
    EXPECT_EQ(fuse(g, backends), n_layer);  // one SwiGLU per layer
    check_well_formed(g);
    EXPECT_EQ(count(g, Op::kSwiGLU), n_layer);
    EXPECT_EQ(count(g, Op::kMatMulId), 3 * n_layer);
    EXPECT_EQ(count(g, Op::kMoeSum), n_layer);
    for (const Node& n : g.nodes) {
      if (n.op != Op::kSwiGLU) continue;
      EXPECT_EQ(g.at(n.inputs[0]).op, Op::kMatMulId) << n.name;
      EXPECT_EQ(g.at(n.inputs[1]).op, Op::kMatMulId) << n.name;
    }
  }
  std::set<Op> ops = testing::elementwise_ops();
  ops.insert({Op::kMatMul, Op::kRmsNorm});
  PartialBackend partial(m.weights(), ops, {Op::kRmsNorm});
  partial.fold_input_norms();
  std::vector<backend::Backend*> backends = {&partial, &cpu};
  Graph g = unfused(m);
  // Per layer q, k and v (attn_norm); the output norm.
  EXPECT_EQ(fuse(g, backends), 3 * n_layer + 1);
  check_well_formed(g);
  int whole_row_norms = 0;  // the per-head q/k norms are never folded
  for (const Node& n : g.nodes) {
    if (n.op != Op::kRmsNorm || std::get<RmsNormMeta>(n.meta).group != 0) continue;
    ++whole_row_norms;
    EXPECT_NE(n.name.find("ffn_norm"), std::string::npos) << n.name;
  }
  EXPECT_EQ(whole_row_norms, n_layer);
}

TEST(FusionTest, OptionTurnsThePassOff) {
  const model::Model& m = tiny_model("tiny-gemma3");
  cpu::CpuBackend cpu(m.weights(), 1);
  std::vector<backend::Backend*> backends = {&cpu};
  const Graph before = unfused(m);
  Options off;
  off.no_fuse_glu = true;
  Graph g = before;
  EXPECT_EQ(fuse(g, backends, off), 0);
  EXPECT_EQ(g.nodes.size(), before.nodes.size());
  EXPECT_EQ(count(g, Op::kGelu), static_cast<int>(m.hparams().n_layer));
  g = before;
  EXPECT_EQ(fuse(g, backends, Options{}), static_cast<int>(m.hparams().n_layer));
  // MINFER_NO_FUSE_GLU reaches the pass through Options::from_env().
  for (const char* on : {"1", "yes"}) {
    auto o = Options::parse([&](std::string_view name) -> std::optional<std::string> {
      if (name == "MINFER_NO_FUSE_GLU") return std::string(on);
      return std::nullopt;
    });
    ASSERT_TRUE(o.is_ok()) << o.message();
    g = before;
    EXPECT_EQ(fuse(g, backends, *o), 0) << "MINFER_NO_FUSE_GLU=" << on;
  }
}

// Fused and unfused graphs compute the same logits on the CPU (the fused
// kernel is the same arithmetic).
TEST(FusionTest, FusedLogitsMatchUnfused) {
  for (const Arch& a : archs()) {
    SCOPED_TRACE(a.shape);
    const model::Model& m = tiny_model(a.shape);
    cpu::CpuBackend cpu_a(m.weights(), 1), cpu_b(m.weights(), 1);
    auto fused = testing::Forward::make(m, {&cpu_a}, 0);
    auto plain = testing::Forward::make(m, {&cpu_b}, 0);
    const std::vector<int32_t> tokens = {3, 99, 4, 200};
    const std::vector<float> x = fused.run(m, tokens);
    plain.options.no_fuse_glu = true;
    const std::vector<float> y = plain.run(m, tokens);
    EXPECT_LE(testing::max_abs_diff(x, y), 1e-5f);
  }
}

TEST(FusionTest, RemoveDeadNodesKeepsSideEffectsAndRenumbers) {
  // tokens, positions, a dead chain, a KV store nobody reads (kept: it writes
  // the cache), and the logits.
  Graph g;
  auto node = [](Op op, std::vector<NodeId> in, std::string name) {
    Node n;
    n.op = op;
    n.shape = {{4, 2}};
    n.inputs = std::move(in);
    n.name = std::move(name);
    return n;
  };
  Node tok = node(Op::kInput, {}, "tokens");
  tok.dtype = DType::kI32;
  g.tokens = g.add(tok);
  const NodeId dead0 = g.add(node(Op::kGetRows, {g.tokens}, "dead0"));
  Node pos = node(Op::kInput, {}, "positions");
  pos.dtype = DType::kI32;
  g.positions = g.add(pos);
  const NodeId x = g.add(node(Op::kGetRows, {g.tokens}, "x"));
  g.add(node(Op::kSilu, {dead0}, "dead1"));
  Node store = node(Op::kKvStore, {x, x, g.positions}, "store");
  store.shape = {{0, 0}};
  g.add(store);
  g.logits = g.add(node(Op::kScale, {x}, "logits"));
  g.add(node(Op::kAdd, {g.logits, x}, "dead_after_logits"));

  remove_dead_nodes(g);
  std::vector<std::string> names;
  for (const Node& n : g.nodes) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tokens", "positions", "x", "store", "logits"}));
  EXPECT_EQ(g.tokens, 0);
  EXPECT_EQ(g.positions, 1);
  EXPECT_EQ(g.logits, 4);
  EXPECT_EQ(g.at(2).inputs, std::vector<NodeId>{0});
  EXPECT_EQ(g.at(3).inputs, (std::vector<NodeId>{2, 2, 1}));
  EXPECT_EQ(g.at(4).inputs, std::vector<NodeId>{2});
}

}  // namespace
}  // namespace minfer::graph
