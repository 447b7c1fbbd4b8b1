// Op conformance: every row of the table (op_conformance_rows.h: every graph
// op, its weight and cache types, odd sizes, one token and batches, the
// fused ops through the fusion pass) on every backend kind of the registry
// that can run here: the CPU against double-precision references, each other
// kind against the CPU. A kind that refuses a row (supports_op, or a fusion
// it does not make) is a skip with the reason, never a pass. The census
// (row x backend: pass with the share of the tolerance used, skip, FAIL) is
// printed at the end. One test runs them all, so a GPU device is opened once.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_conformance_rows.h"
#include "backend/registry.h"
#include "backend/vulkan/vulkan_options.h"
#include "base/log.h"

namespace minfer::conformance {
namespace {

// The environment's options, with the first Vulkan device named when none
// is: the registry takes a CPU Vulkan device (lavapipe, in CI) only when
// named, and it should be checked too.
Options conformance_options() {
  auto o = Options::from_env(backend::option_sections());
  Options out = o.is_ok() ? *o : Options{};
  if (out.section<vulkan::VulkanOptions>().vulkan_device < 0)
    out.section<vulkan::VulkanOptions>().vulkan_device = 0;
  return out;
}

// The registry's kinds, the CPU first (the reference), each with why it
// cannot run here ("" when it can).
struct Kind {
  const backend::BackendKind* kind;
  std::string unavailable;
};

std::vector<Kind> kinds(const Options& options) {
  const model::Weights none;
  const backend::BackendConfig config{none, options, 2};
  std::vector<Kind> out;
  for (const backend::BackendKind& k : backend::backend_kinds()) {
    out.push_back({&k, k.unavailable(config)});
  }
  std::stable_partition(out.begin(), out.end(), [](const Kind& k) { return !k.kind->gpu; });
  return out;
}

// Rows x backends, each cell "pass (share of the tolerance used)", "skip" or
// "FAIL", with the reasons of skips and failures listed under the table.
class Census {
 public:
  explicit Census(std::vector<std::string> columns) : columns_(std::move(columns)) {}

  void set(const std::string& row, size_t column, const std::string& cell,
           const std::string& note = "") {
    if (!cells_.count(row)) order_.push_back(row);
    auto& r = cells_[row];
    r.resize(columns_.size(), "n/a");
    r[column] = cell;
    ++counts_[columns_[column] + " " + cell.substr(0, cell.find(' '))];
    if (!note.empty()) notes_.push_back(row + " on " + columns_[column] + ": " + note);
  }

  std::string table() const;
  const std::string& cell(const std::string& row, size_t column) const {
    return cells_.at(row).at(column);
  }
  // "N pass, N skip, N FAIL" of one column.
  std::string summary(size_t column) const {
    auto n = [&](const char* what) {
      auto it = counts_.find(columns_[column] + " " + what);
      return std::to_string(it == counts_.end() ? 0 : it->second);
    };
    return n("pass") + " pass, " + n("skip") + " skip, " + n("FAIL") + " FAIL";
  }

 private:
  std::vector<std::string> columns_;
  std::vector<std::string> order_;
  std::map<std::string, std::vector<std::string>> cells_;
  std::map<std::string, int> counts_;
  std::vector<std::string> notes_;
};

std::string Census::table() const {
  size_t width = 0;
  for (const std::string& r : order_) width = std::max(width, r.size());
  std::ostringstream out;
  auto line = [&](const std::string& head, const std::vector<std::string>& cells) {
    out << head << std::string(width + 2 - head.size(), ' ');
    for (const std::string& c : cells)
      out << c << std::string(c.size() < 14 ? 14 - c.size() : 1, ' ');
    out << "\n";
  };
  line("op conformance", columns_);
  for (const std::string& r : order_) line(r, cells_.at(r));
  for (const std::string& n : notes_) out << "  " << n << "\n";
  return out.str();
}

// "pass", with the share of the limit used where it is not zero.
std::string pass_cell(double deviation, double limit) {
  if (limit == 0.0 || deviation == 0.0) return "pass";
  char s[32];
  std::snprintf(s, sizeof(s), "pass (%.2f)", deviation / limit);
  return s;
}

// The row's tolerance says how far a backend may be from the exact result.
// The CPU is held to it against double precision; the others are compared
// with the CPU, so within twice it (each within it of the exact result).
double limit_for(const Tolerance& tol, bool against_cpu) {
  return against_cpu ? 2.0 * tol.limit : tol.limit;
}

// Sets the cell of `run` against the wanted values (what the CPU gave, or
// double precision for the CPU itself); a deviation past the limit fails
// the test, naming row and backend.
void judge(const Row& row, const Case& c, const Run& run, const Run* ref, const Kind& kind,
           size_t column, Census& census) {
  const graph::DType dtype =
      c.graph.logits == graph::kNoNode ? graph::DType::kF32 : c.graph.at(c.graph.logits).dtype;
  const std::vector<double> want = ref ? widen(ref->out, dtype) : c.want;
  const std::vector<double> want_k =
      ref && !c.want_k.empty() ? widen(ref->k, graph::DType::kF32) : c.want_k;
  const std::vector<double> want_v =
      ref && !c.want_v.empty() ? widen(ref->v, graph::DType::kF32) : c.want_v;
  const double d = run_deviation(run, c, want, want_k, want_v, row.tol.unit);
  const double limit = limit_for(row.tol, ref != nullptr);
  if (d <= limit) {
    census.set(row.name, column, pass_cell(d, limit));
    return;
  }
  std::ostringstream why;
  why << "deviation " << d << " past " << limit << " ("
      << (ref ? "twice the row's " + describe(row.tol) + " against the CPU"
              : describe(row.tol) + " against double precision")
      << ")";
  census.set(row.name, column, "FAIL", why.str());
  ADD_FAILURE() << row.name << " on " << kind.kind->name << ": " << why.str();
}

// One kind's run of the row (with the row's fusion), or its skip or error in
// the census. reference_share (the CPU's skips): how much of the tolerance
// its unfused run, the reference, used.
std::optional<Run> run_kind(const Row& row, const Case& c, backend::Backend& b, size_t column,
                            Census& census, double reference_share = -1.0) {
  Result<Run> run = run_case(c, b, /*fuse=*/true);
  if (!run.is_ok()) {
    census.set(row.name, column, "FAIL", run.message());
    ADD_FAILURE() << row.name << " on " << b.name() << ": " << run.message();
    return std::nullopt;
  }
  if (!run->skipped.empty()) {
    std::string note = run->skipped;
    if (reference_share >= 0.0) {
      char share[64];
      std::snprintf(share, sizeof(share), "; its unfused chain used %.2f of the tolerance",
                    reference_share);
      note += share;
    }
    census.set(row.name, column, "skip", note);
    return std::nullopt;
  }
  return std::move(*run);
}

// The reference: the CPU on the row's graph as written (no fusion: the CPU
// has no kernels for the fused ops), checked against double precision.
std::optional<Run> reference(const Row& row, const Case& c, backend::Backend& cpu, const Kind& kind,
                             Census& census) {
  Result<Run> run = run_case(c, cpu, /*fuse=*/false);
  std::string error = run.is_ok() ? run->skipped : run.message();
  if (!error.empty()) {
    census.set(row.name, 0, "FAIL", "reference: " + error);
    ADD_FAILURE() << row.name << ": the CPU cannot run the row's graph: " << error;
    return std::nullopt;
  }
  if (!c.fusion) judge(row, c, *run, nullptr, kind, 0, census);
  return std::move(*run);
}

// The row on every kind: the CPU's reference against double precision, each
// other kind against the CPU. A kind that cannot be made fails once and is
// then left out.
void check_row(const Row& row, std::span<Kind> kinds, const Options& options, Census& census) {
  const Case c = row.make(seed_of(row.name));
  const backend::BackendConfig config{c.weights, options, 2};
  auto cpu = kinds[0].kind->create(config);
  ASSERT_TRUE(cpu.is_ok()) << cpu.message();
  const std::optional<Run> ref = reference(row, c, **cpu, kinds[0], census);
  if (!ref) return;
  if (c.fusion) {
    // The unfused chain the others are compared with, against f64 as any
    // CPU row; and, where the CPU makes the row's fusion, the fused run too.
    const double d = run_deviation(*ref, c, c.want, c.want_k, c.want_v, row.tol.unit);
    EXPECT_LE(d, row.tol.limit) << row.name << ": the CPU's unfused chain against double precision";
    if (std::optional<Run> fused = run_kind(row, c, **cpu, 0, census, d / row.tol.limit)) {
      judge(row, c, *fused, nullptr, kinds[0], 0, census);
    }
  }
  for (size_t k = 1; k < kinds.size(); ++k) {
    if (!kinds[k].unavailable.empty()) continue;
    auto b = kinds[k].kind->create(config);
    if (!b.is_ok()) {
      ADD_FAILURE() << kinds[k].kind->name << " cannot be made: " << b.message();
      kinds[k].unavailable = "cannot be made: " + b.message();
      continue;
    }
    if (std::optional<Run> run = run_kind(row, c, **b, k, census)) {
      judge(row, c, *run, &*ref, kinds[k], k, census);
    }
  }
}

// Every op but the graph inputs (which every row writes) has a row.
TEST(OpConformance, EveryOpHasARow) {
  std::set<graph::Op> covered;
  for (const Row& r : conformance_rows()) covered.insert(r.op);
  for (int i = 0; i < static_cast<int>(graph::Op::kCount); ++i) {
    const auto op = static_cast<graph::Op>(i);
    if (op == graph::Op::kInput) continue;
    EXPECT_TRUE(covered.count(op)) << graph::op_name(op) << " has no op-conformance row";
  }
}

TEST(OpConformance, EveryRowOnEveryBackend) {
  const Options options = conformance_options();
  std::vector<Kind> all = kinds(options);
  std::vector<std::string> columns;
  for (const Kind& k : all) columns.emplace_back(k.kind->name);
  Census census(columns);
  set_min_log_level(LogLevel::kWarning);  // not a line per backend made
  for (const Row& row : conformance_rows()) {
    SCOPED_TRACE(row.name);
    check_row(row, all, options, census);
  }
  set_min_log_level(LogLevel::kInfo);
  std::cout << census.table();
  for (size_t k = 0; k < all.size(); ++k) {
    const std::string summary =
        all[k].unavailable.empty() ? census.summary(k) : "not here: " + all[k].unavailable;
    std::cout << all[k].kind->name << ": " << summary << "\n";
    RecordProperty(std::string(all[k].kind->name), summary);
  }
}

// The harness itself: a backend that gets add wrong by one ulp in one
// element fails the add row, naming itself; one that refuses mul is a skip
// of the mul row, not a pass.
class Faulty final : public ForwardingBackend {
 public:
  explicit Faulty(const model::Weights& w)
      : ForwardingBackend(std::make_unique<cpu::CpuBackend>(w, 1)) {}
  std::string_view name() const override { return "Faulty"; }
  bool supports_op(const graph::Node& n) const override {
    return n.op != graph::Op::kMul && ForwardingBackend::supports_op(n);
  }
  Status execute_node(const graph::Node& n, std::span<const backend::BufferId> in,
                      backend::BufferId out, const backend::KvPair* kv) override {
    MINFER_RETURN_IF_ERROR(ForwardingBackend::execute_node(n, in, out, kv));
    if (n.op != graph::Op::kAdd) return Status::ok();
    float first;
    MINFER_RETURN_IF_ERROR(read_host(out, 0, std::as_writable_bytes(std::span(&first, 1))));
    first = std::nextafter(first, INFINITY);
    return write_host(out, 0, std::as_bytes(std::span(&first, 1)));
  }
};

Result<std::unique_ptr<backend::Backend>> create_faulty(const backend::BackendConfig& c) {
  return std::unique_ptr<backend::Backend>(std::make_unique<Faulty>(c.weights));
}

const Row& row_named(const std::string& name) {
  for (const Row& r : conformance_rows()) {
    if (r.name == name) return r;
  }
  ADD_FAILURE() << "no row " << name;
  return conformance_rows().front();
}

TEST(OpConformance, AWrongKernelFailsAndARefusalSkips) {
  static const backend::BackendKind kFaulty{"Faulty", 0, /*gpu=*/true, nullptr, create_faulty};
  const Options options = conformance_options();
  const auto all = backend::backend_kinds();
  const auto cpu = std::find_if(all.begin(), all.end(), [](const auto& k) { return !k.gpu; });
  std::vector<Kind> two = {{&*cpu, ""}, {&kFaulty, ""}};
  Census census({"CPU", "Faulty"});
  EXPECT_NONFATAL_FAILURE(check_row(row_named("add 37x1"), two, options, census),
                          "add 37x1 on Faulty: deviation 1 past 0");
  EXPECT_EQ(census.cell("add 37x1", 0), "pass");
  EXPECT_EQ(census.cell("add 37x1", 1), "FAIL");
  check_row(row_named("mul 37x1"), two, options, census);
  EXPECT_EQ(census.cell("mul 37x1", 1), "skip");
}

}  // namespace
}  // namespace minfer::conformance
