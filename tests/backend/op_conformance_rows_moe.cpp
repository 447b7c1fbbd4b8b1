// The table's mixture-of-experts rows (docs/MOE.md): the experts' choice and
// weights, the expert matmul and the weighted sum. Expert ids reach the
// nodes under test from a MoeTopK feeder, as they do in a layer.
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "backend/moe_testutil.h"
#include "backend/op_conformance_rows.h"
#include "backend/reference_ops.h"
#include "quant/reference.h"

namespace minfer::conformance {
namespace {

using cpu::testing::topk_ref;
using cpu::testing::weights_ref;
using graph::MoeGating;
using graph::NodeId;
using graph::Op;
using quant::TensorType;

struct RouteSpec {
  int64_t n_expert, n_used, tokens;
  MoeGating gating;
};

const char* gating_name(MoeGating g) {
  return g == MoeGating::kSoftmax             ? "softmax"
         : g == MoeGating::kSoftmaxNormalized ? "softmax normalized"
                                              : "top-k softmax";
}

// Router logits [n_expert, tokens]; token 0's best two tie, the lower id first.
std::vector<float> router_logits(CaseBuilder& b, const RouteSpec& s) {
  std::vector<float> x = b.random(s.n_expert * s.tokens, 2.0f);
  x[s.n_expert - 1] = x[1] = 9.0f;
  return x;
}

NodeId route_node(CaseBuilder& b, Op op, const RouteSpec& s, std::vector<NodeId> in, bool feeder) {
  graph::Node n = make_node(op, s.n_used, s.tokens, std::move(in),
                            graph::MoeRouteMeta{s.n_expert, s.n_used, s.gating},
                            op == Op::kMoeTopK ? graph::DType::kI32 : graph::DType::kF32);
  return feeder ? b.feeder(std::move(n)) : b.test(std::move(n));
}

Case topk_case(uint32_t seed, const RouteSpec& s) {
  CaseBuilder b(s.tokens, seed);
  const auto logits = router_logits(b, s);
  const NodeId out = route_node(b, Op::kMoeTopK, s, {b.feed(s.n_expert, logits)}, false);
  const auto ids = topk_ref(logits, s.tokens, s.n_expert, s.n_used, s.gating);
  return b.finish(out, std::vector<double>(ids.begin(), ids.end()));
}

Case weights_case(uint32_t seed, const RouteSpec& s) {
  CaseBuilder b(s.tokens, seed);
  const auto logits = router_logits(b, s);
  const NodeId in = b.feed(s.n_expert, logits);
  const NodeId ids = route_node(b, Op::kMoeTopK, s, {in}, true);
  const NodeId out = route_node(b, Op::kMoeWeights, s, {in, ids}, false);
  const auto want_ids = topk_ref(logits, s.tokens, s.n_expert, s.n_used, s.gating);
  return b.finish(out, weights_ref(logits, want_ids, s.tokens, s.n_expert, s.n_used, s.gating));
}

struct ExpertSpec {
  TensorType type;
  int64_t in, out, n_expert, n_used, tokens;
  bool per_row = false, bias = false;
};

graph::MatMulIdMeta expert_meta(const ExpertSpec& s) {
  graph::MatMulIdMeta m;
  m.weight = "blk.0.ffn_up_exps.weight";
  m.bias = s.bias ? "blk.0.ffn_up_exps.bias" : "";
  m.weight_type = s.type;
  m.in_dim = s.in;
  m.out_dim = s.out;
  m.n_expert = s.n_expert;
  m.n_used = s.n_used;
  m.per_row_input = s.per_row;
  return m;
}

// x (one row per token, or per token and expert with per_row) times the
// experts the router picks for each token.
Case matmul_id_case(uint32_t seed, const ExpertSpec& s) {
  const int64_t n_rows = s.n_used * s.tokens;
  CaseBuilder b(n_rows, seed);
  const RouteSpec route{s.n_expert, s.n_used, s.tokens, MoeGating::kSoftmax};
  const auto logits = router_logits(b, route);
  const NodeId ids = route_node(b, Op::kMoeTopK, route, {b.feed(s.n_expert, logits)}, true);
  const graph::MatMulIdMeta m = expert_meta(s);
  const auto w =
      b.weight(m.weight, s.type, {s.in, s.out, s.n_expert}, b.matrix(s.in, s.out * s.n_expert));
  std::vector<float> bias;
  if (s.bias)
    bias = b.weight(m.bias, TensorType::F32, {s.out, s.n_expert}, b.random(s.out * s.n_expert));
  const auto x = b.random(s.in * (s.per_row ? n_rows : s.tokens));
  const NodeId out = b.test(make_node(Op::kMatMulId, s.out, n_rows, {b.feed(s.in, x), ids}, m));
  const auto picked = topk_ref(logits, s.tokens, s.n_expert, s.n_used, route.gating);
  return b.finish(out, backend::testing::matmul_id_reference(w, bias, x, picked, s.in, s.out,
                                                             s.n_used, s.per_row)
                           .y);
}

// sum over j of y[t * k + j] * w[j, t], each product rounded to f32 and
// added in order of j: the contract's order, so the sum is exact in f32
// (moe_testutil.h's reference, shared with the MoE tests of every backend).
Case moe_sum_case(uint32_t seed, int64_t dim, int64_t n_used, int64_t tokens) {
  CaseBuilder b(n_used * tokens, seed);
  const auto y = b.random(dim * n_used * tokens), w = b.random(n_used * tokens);
  const NodeId out = b.test(make_node(Op::kMoeSum, dim, tokens, {b.feed(dim, y), b.feed(n_used, w)},
                                      graph::MoeSumMeta{n_used}));
  const auto want = backend::testing::moe_sum_reference(y, w, tokens, n_used, dim);
  return b.finish(out, std::vector<double>(want.begin(), want.end()));
}

std::string expert_name(const ExpertSpec& s) {
  return std::string(quant::type_name(s.type)) + " " + std::to_string(s.in) + "x" +
         std::to_string(s.out) + " experts " + std::to_string(s.n_used) + "/" +
         std::to_string(s.n_expert) + " x" + std::to_string(s.tokens) +
         (s.per_row ? " per-row input" : "") + (s.bias ? " bias" : "");
}

void add_route_rows(std::vector<Row>& rows) {
  const RouteSpec specs[] = {{8, 2, 1, MoeGating::kSoftmax},
                             {32, 4, 7, MoeGating::kSoftmaxNormalized},
                             {128, 8, 3, MoeGating::kTopKSoftmax},
                             {60, 4, 5, MoeGating::kSoftmax}};
  for (const RouteSpec& s : specs) {
    const std::string what = std::string(gating_name(s.gating)) + " " + std::to_string(s.n_used) +
                             "/" + std::to_string(s.n_expert) + " x" + std::to_string(s.tokens);
    // The choice is exact; the weights are a softmax (expf's rounding).
    rows.push_back({"moe_topk " + what, Op::kMoeTopK, ulps(0),
                    [s](uint32_t seed) { return topk_case(seed, s); }});
    rows.push_back({"moe_weights " + what, Op::kMoeWeights, rms(1e-5),
                    [s](uint32_t seed) { return weights_case(seed, s); }});
  }
}

void add_expert_rows(std::vector<Row>& rows) {
  std::vector<ExpertSpec> specs;
  for (TensorType t : weight_types()) {
    for (int64_t tokens : {1, 5}) specs.push_back({t, 256, 40, 6, 2, tokens});
  }
  specs.push_back({TensorType::Q8_0, 256, 24, 8, 3, 4, true});
  specs.push_back({TensorType::Q4_K, 256, 33, 4, 2, 3, false, true});
  specs.push_back({TensorType::F32, 64, 17, 4, 4, 2, true, true});
  for (const ExpertSpec& s : specs) {
    rows.push_back({"mul_mat_id " + expert_name(s), Op::kMatMulId, product_tolerance(s.type),
                    [s](uint32_t seed) { return matmul_id_case(seed, s); }});
  }
}

}  // namespace

void add_moe_rows(std::vector<Row>& rows) {
  add_route_rows(rows);
  add_expert_rows(rows);
  struct SumShape {
    int64_t dim, n_used, tokens;
  };
  for (SumShape s : {SumShape{40, 2, 1}, SumShape{1003, 4, 3}}) {
    rows.push_back({"moe_sum " + std::to_string(s.dim) + " experts " + std::to_string(s.n_used) +
                        " x" + std::to_string(s.tokens),
                    Op::kMoeSum, ulps(0),
                    [s](uint32_t seed) { return moe_sum_case(seed, s.dim, s.n_used, s.tokens); }});
  }
}

}  // namespace minfer::conformance
