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
// Backends, in priority order: CUDA (when SessionOptions::gpu, a device is
// usable and all weights were uploaded; otherwise the reason is printed once),
// then the CPU. GraphParams::gpu records whether CUDA takes part.
// Levers: MINFER_DISABLE_CUDA=1 forces the CPU; MINFER_GRAPH_TRACE=1 prints each new plan (splits,
// op census); MINFER_OP_PROFILE=1 collects per-op times (op_profile()). Threading: one Session per
// sequence, driven by one thread.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "graph/plan.h"
#include "graph/scheduler.h"
#include "model/graph_params.h"
#include "model/model.h"
#include "runtime/kv_cache.h"

namespace minfer::runtime {

struct SessionOptions {
  int64_t n_ctx = 4096;
  int n_threads = 0;  // 0: all hardware threads
  // KV cache row types: F32, F16 or Q8_0 (head_dim a multiple of 32); K and V
  // may differ. A cache a GPU backend cannot read keeps attention on the CPU.
  quant::TensorType k_type = quant::TensorType::F32;
  quant::TensorType v_type = quant::TensorType::F32;
  int64_t max_batch = 512;
  // Run on a GPU backend when one is usable and every weight reaches it (the
  // all-weights gate); false keeps the CPU path (whose numerics tests pin).
  bool gpu = true;
};

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
  const graph::OpProfile& op_profile() const { return profile_; }
  int64_t graph_builds() const { return graph_builds_; }
  // Whether a GPU backend takes part in this session's graphs.
  bool gpu() const { return gpu_; }
  // The memory bandwidth of the first backend that measures its own
  // (Backend::memory_bandwidth_gbs: a GPU's), nullopt when none does (the
  // CPU alone). Measures on each call (a moment of memory traffic): call it
  // between evals, outside anything timed.
  Result<std::optional<double>> device_bandwidth_gbs();

 private:
  Session(const model::Model& model, const SessionOptions& options)
      : model_(model), options_(options) {}
  Status eval_batch(std::span<const int32_t> tokens, int64_t n_outputs, float* out);
  Status prepare(const model::GraphParams& params);

  const model::Model& model_;
  SessionOptions options_;
  std::vector<std::unique_ptr<backend::Backend>> owned_backends_;
  std::vector<backend::Backend*> backends_;
  KvCache kv_;
  int64_t n_past_ = 0;
  bool gpu_ = false;

  // The graph cache: the last built graph and plan, keyed by its params.
  std::optional<model::GraphParams> cached_params_;
  graph::Graph graph_;
  graph::Plan plan_;
  int64_t graph_builds_ = 0;

  std::vector<int32_t> positions_;
  std::vector<float> batch_logits_;
  std::vector<float> logits_;
  graph::OpProfile profile_;
  bool profiling_ = false;
  bool tracing_ = false;
};

}  // namespace minfer::runtime
