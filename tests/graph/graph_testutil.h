// Helpers for the graph tests: tiny synthetic models (written once per test
// binary) and PartialBackend, a backend that claims only some ops and checks
// how the executor drives it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "graph/executor.h"
#include "graph/fusion.h"
#include "graph/ir.h"
#include "graph/plan.h"
#include "model/builder.h"
#include "model/model.h"
#include "runtime/kv_cache.h"
#include "synth/synth.h"

namespace minfer::graph::testing {

inline const std::vector<std::string>& tiny_shapes() {
  static const std::vector<std::string> kShapes = {"tiny-qwen2", "tiny-qwen3", "tiny-llama",
                                                   "tiny-gemma3"};
  return kShapes;
}

// Synthesizes `shape` once per process and keeps the loaded model for the
// whole run; the files live in a per-process temp dir removed at exit.
inline const model::Model& tiny_model(const std::string& shape) {
  struct Cache {
    std::filesystem::path dir;
    std::map<std::string, std::unique_ptr<model::Model>> models;
    ~Cache() {
      models.clear();
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static Cache cache{
      std::filesystem::temp_directory_path() / ("minfer_graph_test_" + std::to_string(getpid())),
      {}};
  auto it = cache.models.find(shape);
  if (it != cache.models.end()) return *it->second;
  std::filesystem::create_directories(cache.dir);
  synth::SynthOptions o;
  o.shape = shape;
  o.quant = "Q8_0";
  o.seed = 3;
  o.output_path = (cache.dir / (shape + ".gguf")).string();
  o.n_threads = 2;
  const Status st = synth::synthesize(o);
  if (!st) ADD_FAILURE() << "synthesize " << shape << ": " << st.message();
  auto m = model::Model::load(o.output_path);
  if (!m) {
    ADD_FAILURE() << "load " << shape << ": " << m.message();
    std::abort();
  }
  return *(cache.models[shape] = std::move(*m));
}

// Wraps its own cpu::CpuBackend (so its buffers are a pool separate from the
// CPU backend it runs beside: values crossing between the two really go
// through read_host/write_host) and claims only the ops in `ops`. Its buffer
// ids are offset so that an id of another backend handed to it by mistake is
// recognized instead of silently aliasing one of its own.
class PartialBackend final : public backend::Backend {
 public:
  static constexpr backend::BufferId kIdBase = 100000;

  PartialBackend(const model::Weights& weights, std::set<Op> ops, std::set<Op> fused = {})
      : inner_(weights, 1), ops_(std::move(ops)), fused_(std::move(fused)) {}

  std::string_view name() const override { return "Partial"; }
  bool supports_op(const Node& node) const override {
    if (ops_.count(node.op) == 0) return false;
    const auto* mm = std::get_if<graph::MatMulMeta>(&node.meta);
    if (folds_input_norms_ && mm != nullptr && mm->in_norm.on) {
      Node plain = node;  // claims the folded norm itself (for fusion tests; never run)
      std::get<graph::MatMulMeta>(plain.meta).in_norm = {};
      return inner_.supports_op(plain);
    }
    return inner_.supports_op(node);
  }
  // Claims matmuls with an input norm folded in (the CUDA backend does).
  void fold_input_norms() { folds_input_norms_ = true; }
  bool supports_fused(Op fused) const override { return fused_.count(fused) > 0; }
  bool has_weight(std::string_view name) const override { return inner_.has_weight(name); }

  Result<backend::BufferId> alloc_buffer(size_t bytes) override {
    MINFER_ASSIGN_OR_RETURN(backend::BufferId id, inner_.alloc_buffer(bytes));
    live_.insert(id + kIdBase);
    return id + kIdBase;
  }
  Result<backend::BufferId> alloc_fresh(size_t bytes) override {
    MINFER_ASSIGN_OR_RETURN(backend::BufferId id, alloc_buffer(bytes));
    fresh_.insert(id);
    return id;
  }
  void free_buffer(backend::BufferId id) override {
    if (live_.erase(id) == 0) violations_.push_back("free of unknown buffer " + std::to_string(id));
    written_.erase(id);
    inner_.free_buffer(id - kIdBase);
  }
  size_t buffer_size(backend::BufferId id) const override {
    return live_.count(id) ? inner_.buffer_size(id - kIdBase) : 0;
  }

  Status execute_node(const Node& node, std::span<const backend::BufferId> inputs,
                      backend::BufferId out, const backend::KvPair* kv) override {
    executed_.push_back(node.name);
    if (!supports_op(node))
      violations_.push_back("asked to run unclaimed node '" + node.name + "'");
    std::vector<backend::BufferId> mapped;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const backend::BufferId id = inputs[i];
      if (id == backend::kNoBuffer) {
        mapped.push_back(id);
        continue;
      }
      // An input must be one of this backend's buffers holding a value: either
      // written by a node run here or staged in through write_host.
      if (!live_.count(id)) {
        violations_.push_back("node '" + node.name + "' input " + std::to_string(i) +
                              " is buffer " + std::to_string(id) + ", not one of this backend's");
      } else if (!written_.count(id)) {
        violations_.push_back("node '" + node.name + "' input " + std::to_string(i) +
                              " reads buffer " + std::to_string(id) + " before anything wrote it");
      }
      mapped.push_back(id - kIdBase);
    }
    if (node.bytes() > 0) {
      if (!live_.count(out)) {
        violations_.push_back("node '" + node.name + "' output buffer " + std::to_string(out) +
                              " is not one of this backend's");
      }
      written_.insert(out);
    }
    return inner_.execute_node(node, mapped, out == backend::kNoBuffer ? out : out - kIdBase, kv);
  }

  Status read_host(backend::BufferId id, size_t offset, std::span<std::byte> dst) override {
    ++reads_;
    return inner_.read_host(id - kIdBase, offset, dst);
  }
  Status write_host(backend::BufferId id, size_t offset, std::span<const std::byte> src) override {
    ++writes_;
    written_.insert(id);
    return inner_.write_host(id - kIdBase, offset, src);
  }
  Status synchronize() override {
    ++syncs_;
    return Status::ok();
  }

  void reset_counters() {
    syncs_ = reads_ = writes_ = 0;
    executed_.clear();
  }

  int syncs() const { return syncs_; }
  int reads() const { return reads_; }
  int writes() const { return writes_; }
  const std::set<backend::BufferId>& fresh() const { return fresh_; }
  const std::vector<std::string>& executed() const { return executed_; }
  const std::vector<std::string>& violations() const { return violations_; }

 private:
  cpu::CpuBackend inner_;
  std::set<Op> ops_, fused_;
  bool folds_input_norms_ = false;
  std::set<backend::BufferId> live_, fresh_, written_;
  std::vector<std::string> executed_, violations_;
  int syncs_ = 0, reads_ = 0, writes_ = 0;
};

inline std::set<Op> elementwise_ops() {
  return {Op::kAdd, Op::kMul, Op::kScale, Op::kSilu, Op::kGelu, Op::kSwiGLU, Op::kGeGLU};
}

// Builds the model's graph for `params` and runs the fusion pass as a
// Session does.
inline Graph build(const model::Model& m, const model::GraphParams& params,
                   std::span<backend::Backend* const> backends, const Options& options = {}) {
  auto g = model::build_graph(m.hparams(), m.weights(), params);
  EXPECT_TRUE(g.is_ok()) << g.message();
  if (!g) return {};
  if (params.fuse) fuse(*g, backends, options);
  return std::move(*g);
}

// Runs successive batches through build_plan + execute over a KV cache on
// backends[kv_backend], the way a Session does, and returns each batch's
// logits (last token only).
struct Forward {
  std::vector<backend::Backend*> backends;
  int kv_backend = 0;
  runtime::KvCache kv;
  int64_t n_past = 0;
  Options options;  // the fusion switches build() applies
  // Called after each plan is built and before it runs (to inspect it).
  std::function<void(const Graph&, const Plan&)> on_plan;
  // Called after each batch ran.
  std::function<void(const Graph&, const Plan&)> after_run;

  static Forward make(const model::Model& m, std::vector<backend::Backend*> bs, int kv_index,
                      int64_t n_ctx = 64, quant::TensorType kv_type = quant::TensorType::F32) {
    Forward f;
    f.backends = std::move(bs);
    f.kv_backend = kv_index;
    const runtime::KvCacheShape shape{m.hparams().n_layer, n_ctx, m.hparams().n_head_kv,
                                      m.hparams().head_dim};
    auto kv = runtime::KvCache::create(f.backends[static_cast<size_t>(kv_index)], shape, kv_type,
                                       kv_type);
    EXPECT_TRUE(kv.is_ok()) << kv.message();
    if (kv) f.kv = std::move(*kv);
    return f;
  }

  std::vector<float> run(const model::Model& m, std::span<const int32_t> tokens) {
    model::GraphParams params;
    params.n_tokens = static_cast<int64_t>(tokens.size());
    params.k_type = kv.k_type();
    params.v_type = kv.v_type();
    Graph g = build(m, params, backends, options);
    auto plan = build_plan(g, backends);
    EXPECT_TRUE(plan.is_ok()) << plan.message();
    if (!plan) return {};
    if (on_plan) on_plan(g, *plan);
    std::vector<int32_t> positions(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) positions[i] = static_cast<int32_t>(n_past + i);
    const KvResolver resolver = [&](int b, int layer) -> const backend::KvPair* {
      return b == kv_backend ? kv.layer(layer) : nullptr;
    };
    std::vector<float> logits;
    ForwardInputs inputs;
    inputs.tokens = tokens;
    inputs.positions = positions;
    const Status st = execute(g, *plan, backends, inputs, resolver, logits);
    EXPECT_TRUE(st.is_ok()) << st.message();
    if (after_run) after_run(g, *plan);
    release_plan(*plan, backends);
    n_past += static_cast<int64_t>(tokens.size());
    return logits;
  }
};

inline float max_abs(std::span<const float> a) {
  float m = 0.0f;
  for (float x : a) m = std::max(m, std::fabs(x));
  return m;
}

inline float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

}  // namespace minfer::graph::testing
