// Session: one sequence's inference state over a Model — the backends, the KV
// cache and the graph cache — and the forward pass.
//
// eval(tokens, n_outputs) runs one batch at positions n_past .. n_past+n-1,
// appends its keys/values to the cache and returns the logits of the last
// n_outputs tokens ([n_outputs][n_vocab], valid until the next eval). A batch
// is one graph; the graph and its plan are reused while GraphParams match
// (every decode step after the first), rebuilt otherwise. Batches longer than
// max_batch are split. Exceeding the context is an error that says by how much.
//
// Backends: every usable kind of the registry (backend/registry.h), in
// priority order, GPU kinds only when RunOptions::gpu (a GPU kind that
// fails to start is logged once and skipped), the CPU last. GraphParams::
// backends records which take part. Each layer's KV cache lives on the
// backend that runs its attention in the decode plan; later plans are held
// to that placement (graph::PlanConstraints).
// Levers (RunOptions::options): disable_cuda forces the CPU; graph_trace logs each new plan
// (splits, op census); op_profile collects per-op times (op_profile()). Threading: one Session
// per sequence, driven by one thread.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "base/options.h"
#include "base/status.h"
#include "graph/executor.h"
#include "graph/plan.h"
#include "model/graph_params.h"
#include "model/model.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "runtime/run_options.h"

namespace minfer::runtime {

// A session has no options of its own: it runs by the shared run
// configuration (runtime/run_options.h), defaults included.
using SessionOptions = RunOptions;

class Session {
 public:
  static Result<std::unique_ptr<Session>> create(const model::Model& model,
                                                 const SessionOptions& options);
  ~Session();

  Result<std::span<const float>> eval(std::span<const int32_t> tokens, int64_t n_outputs = 1);

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return options_.n_ctx; }
  // Forgets the sequence (the cache contents become unreachable).
  void reset() { n_past_ = 0; }
  // Keeps only the first n tokens of the sequence (n <= n_past(); n < 0 keeps
  // none); later evals overwrite the rest of the cache.
  void truncate(int64_t n) { n_past_ = std::clamp<int64_t>(n, 0, n_past_); }
  const model::Model& model() const { return model_; }
  const graph::OpProfile& op_profile() const { return runner_->op_profile(); }
  int64_t graph_builds() const { return runner_->graph_builds(); }
  // Whether a GPU backend takes part in this session's graphs.
  bool gpu() const { return runner_->gpu(); }
  std::string_view gpu_name() const { return runner_->gpu_name(); }
  // The memory bandwidth of the first backend that measures its own
  // (Backend::memory_bandwidth_gbs: a GPU's), nullopt when none does (the
  // CPU alone). Measures on each call (a moment of memory traffic): call it
  // between evals, outside anything timed.
  Result<std::optional<double>> device_bandwidth_gbs() { return runner_->device_bandwidth_gbs(); }

 private:
  Session(const model::Model& model, const SessionOptions& options)
      : model_(model), options_(options) {}
  model::GraphParams graph_params(int64_t n_tokens, int64_t n_outputs) const;
  Status eval_batch(std::span<const int32_t> tokens, int64_t n_outputs, float* out);

  const model::Model& model_;
  SessionOptions options_;
  std::unique_ptr<ForwardRunner> runner_;  // backends, KV cache, graph cache
  int64_t n_past_ = 0;
  std::vector<int32_t> positions_;
  std::vector<float> logits_;
};

}  // namespace minfer::runtime
