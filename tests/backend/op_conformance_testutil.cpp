#include "backend/op_conformance_testutil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "graph/executor.h"
#include "graph/fusion.h"
#include "graph/plan.h"
#include "quant/reference.h"
#include "runtime/kv_cache.h"

namespace minfer::conformance {
namespace {

using backend::Backend;
using backend::BufferId;
using graph::Node;

bool under_test(const Node& n) {
  return n.name.starts_with("test.");
}

// The backend under test as the plan sees it: it claims the nodes under test
// it supports and nothing else, so the feeders go to the feeders' CPU.
class NodesUnderTest final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  bool supports_op(const Node& n) const override {
    return under_test(n) && ForwardingBackend::supports_op(n);
  }
};

// The plan's buffers, given back however the run ends.
struct PlanGuard {
  graph::Plan plan;
  std::span<Backend* const> backends;
  ~PlanGuard() { graph::release_plan(plan, backends); }
};

Result<std::vector<std::byte>> encode_rows(quant::TensorType type, const std::vector<float>& x,
                                           int64_t row) {
  MINFER_ASSIGN_OR_RETURN(const uint64_t rb, quant::row_bytes(type, row));
  const int64_t rows = static_cast<int64_t>(x.size()) / row;
  std::vector<std::byte> out(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    MINFER_RETURN_IF_ERROR(quant::quantize_row(type, x.data() + r * row, out.data() + r * rb, row));
  }
  return out;
}

Result<std::vector<float>> read_rows(Backend& b, BufferId id, quant::TensorType type, int64_t row,
                                     int64_t rows) {
  MINFER_ASSIGN_OR_RETURN(const uint64_t rb, quant::row_bytes(type, row));
  std::vector<std::byte> bytes(rb * static_cast<size_t>(rows));
  MINFER_RETURN_IF_ERROR(b.read_host(id, 0, bytes));
  std::vector<float> out(static_cast<size_t>(row * rows));
  for (int64_t r = 0; r < rows; ++r) {
    MINFER_RETURN_IF_ERROR(
        quant::dequantize_row(type, bytes.data() + r * rb, out.data() + r * row, row));
  }
  return out;
}

// Layer 0's cache on `owner`, its rows filled from the spec.
Result<runtime::KvCache> make_cache(Backend& owner, const KvSpec& s) {
  MINFER_ASSIGN_OR_RETURN(
      runtime::KvCache cache,
      runtime::KvCache::create(&owner, {1, s.n_ctx, s.n_head_kv, s.head_dim}, s.k_type, s.v_type));
  const int64_t row = s.n_head_kv * s.head_dim;
  MINFER_ASSIGN_OR_RETURN(const auto k, encode_rows(s.k_type, s.k_init, row));
  MINFER_ASSIGN_OR_RETURN(const auto v, encode_rows(s.v_type, s.v_init, row));
  MINFER_RETURN_IF_ERROR(owner.write_host(cache.layer(0)->k, 0, k));
  MINFER_RETURN_IF_ERROR(owner.write_host(cache.layer(0)->v, 0, v));
  return cache;
}

// Why the fused graph lacks the row's fusion ("" when it has it).
std::string missing_fusion(const graph::Graph& g, const Fusion& f) {
  for (const Node& n : g.nodes) {
    if (n.op != f.op) continue;
    if (!f.in_norm) return "";
    const graph::InputNorm* norm = nullptr;
    if (const auto* m = std::get_if<graph::MatMulMeta>(&n.meta)) norm = &m->in_norm;
    if (const auto* m = std::get_if<graph::FusedFfnMeta>(&n.meta)) norm = &m->in_norm;
    if (const auto* m = std::get_if<graph::FusedQkvMeta>(&n.meta)) norm = &m->in_norm;
    if (norm != nullptr && norm->on) return "";
    return std::string("input norm not folded into ") + graph::op_name(f.op);
  }
  return std::string("not fused into ") + graph::op_name(f.op);
}

// Why `tested` does not run the graph's nodes under test ("" when it does).
std::string refused(const graph::Graph& g, const Backend& tested) {
  for (const Node& n : g.nodes) {
    if (under_test(n) && !tested.supports_op(n)) {
      return std::string("supports_op refuses ") + graph::op_name(n.op);
    }
  }
  return "";
}

// Every node under test planned on the backend under test and every feeder
// on the feeders' CPU: the split the row means to check.
Status check_assignment(const graph::Graph& g, const graph::Plan& plan) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const int want = under_test(n) ? 0 : 1;
    if (n.op != graph::Op::kInput && plan.node_backend[i] != want) {
      return Status::internal("node '" + n.name + "' planned on the wrong backend");
    }
  }
  return Status::ok();
}

Status read_cache(Backend& owner, const runtime::KvCache& cache, const KvSpec& s, Run& run) {
  const int64_t row = s.n_head_kv * s.head_dim;
  MINFER_ASSIGN_OR_RETURN(run.k, read_rows(owner, cache.layer(0)->k, s.k_type, row, s.n_ctx));
  MINFER_ASSIGN_OR_RETURN(run.v, read_rows(owner, cache.layer(0)->v, s.v_type, row, s.n_ctx));
  return Status::ok();
}

// Distance in units in the last place, on the line of floats ordered by value.
double ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0.0 : INFINITY;
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof(i));
    return i < 0 ? static_cast<int64_t>(std::numeric_limits<int32_t>::min()) - i
                 : static_cast<int64_t>(i);
  };
  return static_cast<double>(std::llabs(ordered(a) - ordered(b)));
}

}  // namespace

std::string describe(const Tolerance& t) {
  std::ostringstream s;
  if (t.unit == Tolerance::Unit::kUlps) {
    s << t.limit << " ulps";
  } else {
    s << "rms " << t.limit;
  }
  return s.str();
}

CaseBuilder::CaseBuilder(int64_t n_ids, uint32_t seed) : n_ids_(n_ids), seed_(seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n_ids));
  std::iota(ids.begin(), ids.end(), 0);
  input(graph::InputKind::kTokens, std::move(ids), n_ids);
}

std::vector<float> CaseBuilder::random(int64_t n, float scale) {
  std::mt19937 rng(seed_++);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

std::vector<float> CaseBuilder::weight(const std::string& name, quant::TensorType type,
                                       std::vector<int64_t> dims,
                                       const std::vector<float>& values) {
  const int64_t row = dims[0];
  auto bytes = encode_rows(type, values, row);
  EXPECT_TRUE(bytes.is_ok()) << name << ": " << bytes.message();
  if (!bytes) return {};
  std::vector<uint8_t> raw(bytes->size());
  std::memcpy(raw.data(), bytes->data(), raw.size());
  const Status s = case_.weights.add_derived(name, type, std::move(dims), std::move(raw));
  EXPECT_TRUE(s.is_ok()) << name << ": " << s.message();
  return round_trip(type, values, row);
}

graph::NodeId CaseBuilder::feed(int64_t width, const std::vector<float>& values) {
  const int64_t rows = static_cast<int64_t>(values.size()) / width;
  EXPECT_LE(rows, n_ids_) << "a feed of more rows than the case's ids";
  // The weight holds n_ids rows (the ones past `rows` zero); a gather of the
  // first `rows` follows when fewer are wanted.
  std::vector<float> padded(values);
  padded.resize(static_cast<size_t>(width * n_ids_), 0.0f);
  const std::string name = "feed." + std::to_string(n_feeds_++);
  weight(name, quant::TensorType::F32, {width, n_ids_}, padded);
  graph::NodeId id = feeder(make_node(graph::Op::kGetRows, width, n_ids_, {case_.graph.tokens},
                                      graph::GetRowsMeta{name, {}, 1.0f}));
  if (rows == n_ids_) return id;
  std::vector<int32_t> first(static_cast<size_t>(rows));
  std::iota(first.begin(), first.end(), 0);
  return feeder(make_node(graph::Op::kGetRows, width, rows, {id},
                          graph::GetRowsMeta{"", std::move(first), 1.0f}));
}

graph::NodeId CaseBuilder::input(graph::InputKind kind, std::vector<int32_t> values, int64_t ne0,
                                 int64_t ne1) {
  graph::Graph& g = case_.graph;
  const std::pair<graph::NodeId*, std::vector<int32_t>*> slots[] = {
      {&g.tokens, &case_.tokens},         {&g.positions, &case_.positions},
      {&g.cells, &case_.cells},           {&g.seq_slots, &case_.seq_slots},
      {&g.page_table, &case_.page_table}, {&g.output_rows, &case_.output_rows}};
  const auto& [node, host] = slots[static_cast<size_t>(kind)];
  Node n = make_node(graph::Op::kInput, ne0, ne1, {}, graph::InputMeta{kind}, graph::DType::kI32);
  n.name = "input." + std::to_string(static_cast<int>(kind));
  *node = g.add(std::move(n));
  *host = std::move(values);
  return *node;
}

graph::NodeId CaseBuilder::feeder(Node n) {
  n.name = "feed." + std::to_string(case_.graph.nodes.size()) + "." + graph::op_name(n.op);
  return case_.graph.add(std::move(n));
}

graph::NodeId CaseBuilder::test(Node n) {
  n.name = "test." + std::to_string(case_.graph.nodes.size()) + "." + graph::op_name(n.op);
  n.layer = 0;
  return case_.graph.add(std::move(n));
}

Case CaseBuilder::finish(graph::NodeId output, std::vector<double> want) {
  case_.graph.logits = output;
  case_.want = std::move(want);
  return std::move(case_);
}

Node make_node(graph::Op op, int64_t ne0, int64_t ne1, std::vector<graph::NodeId> inputs,
               graph::NodeMeta meta, graph::DType dtype) {
  Node n;
  n.op = op;
  n.dtype = dtype;
  n.shape.ne = {ne0, ne1};
  n.inputs = std::move(inputs);
  n.meta = std::move(meta);
  return n;
}

Result<Run> run_case(const Case& c, Backend& tested, bool fuse) {
  cpu::CpuBackend feeders(c.weights, 1);
  NodesUnderTest under(tested);
  Backend* const list[] = {&under, &feeders};
  graph::Graph g = c.graph;
  if (fuse && c.fusion) {
    graph::fuse(g, list, c.fusion->options);
    if (std::string why = missing_fusion(g, *c.fusion); !why.empty()) return Run{why, {}, {}, {}};
  }
  if (std::string why = refused(g, tested); !why.empty()) return Run{why, {}, {}, {}};
  std::optional<runtime::KvCache> cache;
  if (c.kv.n_ctx > 0) {
    MINFER_ASSIGN_OR_RETURN(runtime::KvCache made, make_cache(tested, c.kv));
    cache.emplace(std::move(made));
  }
  graph::PlanConstraints constraints;
  if (cache) constraints.kv_backend = {0};
  MINFER_ASSIGN_OR_RETURN(graph::Plan plan, graph::build_plan(g, list, constraints));
  PlanGuard guard{std::move(plan), list};
  MINFER_RETURN_IF_ERROR(check_assignment(g, guard.plan));
  graph::ForwardInputs in{c.tokens, c.positions, c.cells, c.seq_slots, c.page_table, c.output_rows};
  const graph::KvResolver kv = [&](int b, int layer) -> const backend::KvPair* {
    return b == 0 && cache ? cache->layer(layer) : nullptr;
  };
  Run run;
  MINFER_RETURN_IF_ERROR(graph::execute(g, guard.plan, list, in, kv, run.out));
  // Again: a backend that replays splits (begin_split) replays them now, and
  // must give the same bits (the stores write what they wrote before).
  std::vector<float> again;
  MINFER_RETURN_IF_ERROR(graph::execute(g, guard.plan, list, in, kv, again));
  // (memcmp of an empty output would pass it null pointers.)
  if (again.size() != run.out.size() ||
      (!again.empty() &&
       std::memcmp(again.data(), run.out.data(), again.size() * sizeof(float)) != 0)) {
    return Status::internal(
        "a second run of the plan (replayed where the backend replays "
        "splits) differs from the first");
  }
  if (cache) MINFER_RETURN_IF_ERROR(read_cache(tested, *cache, c.kv, run));
  return run;
}

double deviation(std::span<const float> got, std::span<const double> want, graph::DType dtype,
                 Tolerance::Unit unit) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0.0;
  if (dtype == graph::DType::kI32) {
    for (size_t i = 0; i < got.size(); ++i) {
      int32_t id;
      std::memcpy(&id, &got[i], sizeof(id));
      worst = std::max(worst, std::fabs(double(id) - want[i]));
    }
    return worst;
  }
  if (unit == Tolerance::Unit::kUlps) {
    for (size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, ulp_distance(got[i], static_cast<float>(want[i])));
    }
    return worst;
  }
  double ss = 0.0;
  for (double w : want) ss += w * w;
  const double rms = std::sqrt(ss / std::max<double>(1.0, double(want.size())));
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(double(got[i]) - want[i]);
    worst = std::max(worst, std::isnan(d) ? INFINITY : d);
  }
  return worst == 0.0 ? 0.0 : worst / rms;
}

double run_deviation(const Run& run, const Case& c, std::span<const double> want,
                     std::span<const double> want_k, std::span<const double> want_v,
                     Tolerance::Unit unit) {
  double worst = 0.0;
  if (c.graph.logits != graph::kNoNode) {
    worst = deviation(run.out, want, c.graph.at(c.graph.logits).dtype, unit);
  }
  if (!want_k.empty()) {
    worst = std::max(worst, deviation(run.k, want_k, graph::DType::kF32, unit));
    worst = std::max(worst, deviation(run.v, want_v, graph::DType::kF32, unit));
  }
  return worst;
}

std::vector<double> widen(std::span<const float> v, graph::DType dtype) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == graph::DType::kI32) {
      int32_t id;
      std::memcpy(&id, &v[i], sizeof(id));
      out[i] = id;
    } else {
      out[i] = v[i];
    }
  }
  return out;
}

std::vector<float> narrow(std::span<const double> v) {
  return std::vector<float>(v.begin(), v.end());
}

std::vector<float> round_trip(quant::TensorType type, const std::vector<float>& values,
                              int64_t row) {
  auto bytes = encode_rows(type, values, row);
  EXPECT_TRUE(bytes.is_ok()) << bytes.message();
  if (!bytes) return {};
  std::vector<float> out(values.size());
  const size_t rb = bytes->size() / (values.size() / static_cast<size_t>(row));
  for (size_t r = 0; r < values.size() / static_cast<size_t>(row); ++r) {
    const Status s = quant::dequantize_row(type, bytes->data() + r * rb, out.data() + r * row, row);
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  return out;
}

uint32_t seed_of(const std::string& name) {
  uint32_t h = 2166136261u;
  for (unsigned char ch : name) h = (h ^ ch) * 16777619u;
  return h;
}

}  // namespace minfer::conformance
