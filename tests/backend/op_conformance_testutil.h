// The op-conformance harness: each row of the table (op_conformance_rows.h)
// is a small graph whose nodes under test run on one backend, through the
// path a forward pass takes: graph::fuse where the row checks a fusion,
// graph::build_plan, graph::execute. The CPU backend's result is checked
// against a double-precision reference (reference_ops.h), every other
// backend's against the CPU's.
//
// A case's graph has two kinds of node. Feeders (named "feed.*") turn the
// case's host data into the inputs of the nodes under test and always run on
// a CPU backend of their own: graph inputs are i32 only, so f32 data enters
// as rows of an in-memory F32 weight gathered over the token ids, as
// embedding rows enter a real graph. Nodes under test (named "test.*") run
// on the backend under test. The two form real splits: values cross through
// read_host / write_host into alloc_fresh staging buffers.
//
// Tolerances are per row, in one of two units: ulps (the largest distance in
// units in the last place; 0 is bit-equal; an i32 output's ids must be
// equal) for ops whose result is exact, or rms (the largest |got - want| over
// the root mean square of want) for ops whose arithmetic may differ. A
// tolerance bounds a backend's distance from the exact result: the CPU is
// held to it against the reference, the others to twice it against the CPU.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/options.h"
#include "graph/ir.h"
#include "model/weights.h"
#include "quant/tensor_type.h"

namespace minfer::conformance {

struct Tolerance {
  enum class Unit : uint8_t { kUlps, kRms };
  Unit unit = Unit::kUlps;
  double limit = 0.0;
};

constexpr Tolerance ulps(double n) {
  return {Tolerance::Unit::kUlps, n};
}
constexpr Tolerance rms(double r) {
  return {Tolerance::Unit::kRms, r};
}

// "0 ulps", "rms 1e-05".
std::string describe(const Tolerance& t);

// A fusion a row checks: graph::fuse with `options` must turn the row's
// chain into a node of `op` (with its input norm folded in when in_norm) on
// the backend under test. A backend that does not make it skips the row.
struct Fusion {
  graph::Op op = graph::Op::kCount;
  bool in_norm = false;
  Options options;
};

// Layer 0's KV cache, for the rows whose ops use one: its shape, row types
// and the values its rows hold before the run (stored through the types'
// encodings).
struct KvSpec {
  int64_t n_ctx = 0;  // 0: the row uses no cache
  int64_t n_head_kv = 0, head_dim = 0;
  quant::TensorType k_type = quant::TensorType::F32;
  quant::TensorType v_type = quant::TensorType::F32;
  std::vector<float> k_init, v_init;  // [n_ctx][n_head_kv * head_dim]
};

// What one row runs and what it must give. Backends made over `weights`
// must not outlive the case.
struct Case {
  model::Weights weights;
  graph::Graph graph;  // graph.logits: the output compared (kNoNode: none)
  std::vector<int32_t> tokens, positions, cells, seq_slots, page_table, output_rows;
  KvSpec kv;
  std::optional<Fusion> fusion;
  std::vector<double> want;            // the output, in double (an i32 output's ids)
  std::vector<double> want_k, want_v;  // the cache after the run (empty: not compared)
};

// One row of the table: the op it checks (the coverage test counts them),
// a name saying its types and shapes, the tolerance, and its case, built
// from a seed derived from the name.
struct Row {
  std::string name;
  graph::Op op = graph::Op::kCount;
  Tolerance tol;
  std::function<Case(uint32_t seed)> make;
};

// Builds a Case: weights, feeders and the nodes under test.
class CaseBuilder {
 public:
  // n_ids: the number of token ids the feeders gather by (ids 0..n_ids-1),
  // at least the rows of every input fed.
  CaseBuilder(int64_t n_ids, uint32_t seed);

  // n values drawn from N(0, scale), the next ones of the case's stream.
  std::vector<float> random(int64_t n, float scale = 1.0f);
  // A trained model's scales: matrix rows of `in` values N(0, 1/sqrt(in))
  // (unit outputs for unit inputs: attention logits of a few units, not
  // hundreds, whose softmax would turn rounding into large differences),
  // norm weights 1 + N(0, 0.2) (weights N(0, 1) would make normalized values
  // products of two normals, whose outliers 8-bit activation blocks round
  // coarsely).
  std::vector<float> matrix(int64_t in, int64_t rows) {
    return random(in * rows, 1.0f / std::sqrt(float(in)));
  }
  std::vector<float> norm_weights(int64_t n) {
    std::vector<float> w = random(n, 0.2f);
    for (float& x : w) x += 1.0f;
    return w;
  }
  // A weight of `type` encoded from `values` (dims[0] the row length);
  // returns the values it decodes to (what every backend must read).
  std::vector<float> weight(const std::string& name, quant::TensorType type,
                            std::vector<int64_t> dims, const std::vector<float>& values);
  // An f32 input [width, values.size() / width] holding `values`.
  graph::NodeId feed(int64_t width, const std::vector<float>& values);
  // A graph input of `kind` [ne0, ne1] holding `values`.
  graph::NodeId input(graph::InputKind kind, std::vector<int32_t> values, int64_t ne0,
                      int64_t ne1 = 1);
  // A feeder node (runs on the feeders' CPU), or a node under test (layer 0).
  graph::NodeId feeder(graph::Node n);
  graph::NodeId test(graph::Node n);

  Case& c() { return case_; }
  Case finish(graph::NodeId output, std::vector<double> want);

 private:
  Case case_;
  int64_t n_ids_;
  uint32_t seed_;
  int n_feeds_ = 0;
};

// A node of `op` with output shape [ne0, ne1] and its inputs.
graph::Node make_node(graph::Op op, int64_t ne0, int64_t ne1, std::vector<graph::NodeId> inputs,
                      graph::NodeMeta meta = {}, graph::DType dtype = graph::DType::kF32);

// What one backend gave for a case.
struct Run {
  std::string skipped;      // non-empty: why the backend does not run the row
  std::vector<float> out;   // the output (an i32 output's bits)
  std::vector<float> k, v;  // layer 0's cache after the run, decoded
};

// A backend that passes every call to another one, which it may own (split
// replay and alloc_fresh included): the base of the harness's wrappers.
class ForwardingBackend : public backend::Backend {
 public:
  explicit ForwardingBackend(backend::Backend& inner) : inner_(inner) {}
  explicit ForwardingBackend(std::unique_ptr<backend::Backend> owned)
      : owned_(std::move(owned)), inner_(*owned_) {}

  std::string_view name() const override { return inner_.name(); }
  bool requires_all_weights() const override { return inner_.requires_all_weights(); }
  bool supports_op(const graph::Node& n) const override { return inner_.supports_op(n); }
  bool supports_fused(graph::Op op) const override { return inner_.supports_fused(op); }
  bool has_weight(std::string_view name) const override { return inner_.has_weight(name); }
  Result<backend::BufferId> alloc_buffer(size_t bytes) override {
    return inner_.alloc_buffer(bytes);
  }
  Result<backend::BufferId> alloc_fresh(size_t bytes) override { return inner_.alloc_fresh(bytes); }
  void free_buffer(backend::BufferId id) override { inner_.free_buffer(id); }
  size_t buffer_size(backend::BufferId id) const override { return inner_.buffer_size(id); }
  Status execute_node(const graph::Node& n, std::span<const backend::BufferId> in,
                      backend::BufferId out, const backend::KvPair* kv) override {
    return inner_.execute_node(n, in, out, kv);
  }
  Status read_host(backend::BufferId id, size_t offset, std::span<std::byte> dst) override {
    return inner_.read_host(id, offset, dst);
  }
  Status write_host(backend::BufferId id, size_t offset, std::span<const std::byte> src) override {
    return inner_.write_host(id, offset, src);
  }
  Status synchronize() override { return inner_.synchronize(); }
  Result<bool> begin_split(uint64_t key) override { return inner_.begin_split(key); }
  Status end_split() override { return inner_.end_split(); }

 private:
  std::unique_ptr<backend::Backend> owned_;  // before inner_: it may refer to it
  backend::Backend& inner_;
};

// Runs `c`: the nodes under test on `tested` (after the row's fusion, when
// `fuse`), the feeders on a CPU backend of their own. A node under test that
// `tested` refuses, or a fusion it does not make, is a skip naming it. The
// plan runs twice (the second time replayed, on a backend that replays
// splits): a second run that differs from the first is an error.
Result<Run> run_case(const Case& c, backend::Backend& tested, bool fuse);

// How far `got` is from `want` in `unit` (see the header comment); a NaN
// where want has none, or a size mismatch, is infinitely far.
double deviation(std::span<const float> got, std::span<const double> want, graph::DType dtype,
                 Tolerance::Unit unit);

// The widest deviation of a run's output and cache from the wanted ones.
double run_deviation(const Run& run, const Case& c, std::span<const double> want,
                     std::span<const double> want_k, std::span<const double> want_v,
                     Tolerance::Unit unit);

// The values as doubles (a run's output becoming the reference of the others).
std::vector<double> widen(std::span<const float> v, graph::DType dtype);
std::vector<float> narrow(std::span<const double> v);

// Rows of `row` values as a tensor of `type` holds them: encoded with the
// reference quantizer and decoded again (a cache row as stored).
std::vector<float> round_trip(quant::TensorType type, const std::vector<float>& values,
                              int64_t row);

// The seed of a row: FNV-1a of its name, so a row keeps its data when rows
// are added or reordered.
uint32_t seed_of(const std::string& name);

}  // namespace minfer::conformance
