// ForwardRunner: what a Session (one sequence) and an Engine (many) share to
// run forward passes over a model — the backends, the KV cache regions, the
// graph cache and the per-op profile.
//
// Contract:
//   - create() starts every usable backend kind of the registry in priority
//     order (GPU kinds only when `gpu`; a GPU kind that fails to start is
//     logged once and skipped; the CPU, last, must start), then builds the
//     single-token decode graph of `decode_params`, and places each layer's
//     KV cache where that plan runs the layer's attention (graph::
//     kv_placement): regions of `kv_rows` rows of the given types. Every
//     later plan is held to that placement (graph::PlanConstraints).
//   - run(params, inputs) builds the graph of `params` or reuses a cached
//     one (the decode graph is kept for good; up to `cache_size` others, the
//     least recently used dropped), executes it and returns the logits rows
//     ([n_outputs][n_vocab], valid until the next run).
//   - The all-weights gate: a backend that requires every weight
//     (Backend::requires_all_weights) takes part only with all of them; a
//     missing one is an internal error naming it.
//   - Tensor parallelism (RunOptions::tensor_parallel = N > 1;
//     docs/PARALLEL.md): the runner is rank 0 of N ranks in this process,
//     each over its part of the model (model::split_for_rank), its own CPU
//     backend (with n_threads / N threads) and KV cache, joined by an
//     in-process communicator. run() runs every rank's graph at once, ranks
//     1..N-1 on threads of their own, and returns rank 0's logits, which
//     the all-gather made whole. A model the split does not divide is an
//     error at create(). A rank that fails releases the others (the group
//     is then unusable: every later run is an error).
//   - One rank per process (RunOptions::tensor_parallel_address): create()
//     listens there as rank 0 of a socket group, sends the setup the other
//     ranks must share (runtime/rank_messages.h), and run() sends each
//     forward's params and inputs before running its own part; destroying
//     the runner ends the group. serve_rank() is the other ranks' side.
// Threading: one driving thread.
#pragma once

#include <list>
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
#include "model/tensor_split.h"
#include "parallel/communicator.h"
#include "runtime/kv_cache.h"
#include "runtime/run_options.h"

namespace minfer::runtime {

// The run options (threads, gpu, the MINFER_* switches, the cache types and
// cache_types_are_defaults: with it, the first backend with a
// default_cache_type() for this model replaces both types) and what the
// owner derives from them. n_ctx and max_batch are the owner's: the cache
// is sized by kv_rows.
struct ForwardConfig : RunOptions {
  ForwardConfig() = default;
  explicit ForwardConfig(const RunOptions& run) : RunOptions(run) {}

  int64_t kv_rows = 0;    // KV cache rows (a session's context, an engine's pool)
  size_t cache_size = 1;  // cached graphs besides the decode graph
};

class ForwardRunner {
 public:
  // `decode_params`: the single-token graph (backends is filled in here).
  static Result<std::unique_ptr<ForwardRunner>> create(const model::Model& model,
                                                       const ForwardConfig& config,
                                                       model::GraphParams decode_params);
  ~ForwardRunner();
  ForwardRunner(const ForwardRunner&) = delete;
  ForwardRunner& operator=(const ForwardRunner&) = delete;

  // `params.backends` is overwritten with the set that takes part.
  Result<std::span<const float>> run(model::GraphParams params, const graph::ForwardInputs& inputs);
  // The same with GraphParams::argmax: each output row's greedy token (the
  // first largest logit; -1 when all are -inf or NaN), valid until the next
  // run. Only n_outputs ints come back from the device.
  Result<std::span<const int32_t>> run_argmax(model::GraphParams params,
                                              const graph::ForwardInputs& inputs);

  bool gpu() const { return gpu_; }
  // The GPU backend's name ("CUDA", "Vulkan"), or "" when none takes part.
  std::string_view gpu_name() const;
  int64_t graph_builds() const { return graph_builds_; }
  // Cached graphs besides the decode graph, from now on.
  void set_cache_size(size_t n) { config_.cache_size = n; }
  const graph::OpProfile& op_profile() const { return profile_; }
  // The cache, of the configured types or those choose_cache_types() set.
  const KvCache& kv() const { return kv_; }
  // The memory bandwidth of the first backend that measures its own.
  Result<std::optional<double>> device_bandwidth_gbs();

  // Rank `rank` (1..N-1) of a process-per-rank group whose rank 0 listens
  // at options.tensor_parallel_address: joins, builds its part from rank 0's
  // setup and runs each forward rank 0 sends, until rank 0 ends the group
  // (ok) or fails or goes away (an error).
  static Status serve_rank(const model::Model& model, const RunOptions& options, int rank);

 private:
  struct CachedGraph {
    model::GraphParams params;
    graph::Graph graph;
    graph::Plan plan;
  };
  ForwardRunner(const model::Model& model, const ForwardConfig& config)
      : model_(model), config_(config) {}
  // One rank's runner (the whole model when `part` is null).
  static Result<std::unique_ptr<ForwardRunner>> create_rank(const model::Model& model,
                                                            const ForwardConfig& config,
                                                            model::GraphParams decode_params,
                                                            std::unique_ptr<model::RankModel> part,
                                                            parallel::Communicator* comm);
  static Result<std::unique_ptr<ForwardRunner>> create_part(const model::Model& model,
                                                            ForwardConfig config,
                                                            model::GraphParams decode_params,
                                                            int rank, parallel::Communicator& comm);
  static Result<std::unique_ptr<ForwardRunner>> create_threads(const model::Model& model,
                                                               const ForwardConfig& config,
                                                               model::GraphParams decode_params);
  static Result<std::unique_ptr<ForwardRunner>> create_socket_root(
      const model::Model& model, const ForwardConfig& config, model::GraphParams decode_params);
  Result<std::span<const float>> run_rank(model::GraphParams params,
                                          const graph::ForwardInputs& inputs);
  const model::HParams& hp() const { return part_ ? part_->hp : model_.hparams(); }
  const model::Weights& weights() const { return part_ ? part_->weights : model_.weights(); }
  Status start_backends();
  void choose_cache_types();
  Status place_kv_cache(model::GraphParams decode_params);
  Status check_weights(const model::GraphParams& params, const graph::Graph& g) const;
  Result<CachedGraph> build(const model::GraphParams& params) const;
  Status plan(CachedGraph& c);
  Result<CachedGraph*> prepare(const model::GraphParams& params);
  void release(CachedGraph& c);

  const model::Model& model_;
  ForwardConfig config_;
  std::vector<std::unique_ptr<backend::Backend>> owned_backends_;
  std::vector<backend::Backend*> backends_;
  bool gpu_ = false;           // an all-or-nothing (GPU) backend takes part
  uint32_t participants_ = 0;  // bit b: backends_[b] takes part
  graph::PlanConstraints constraints_;
  KvCache kv_;
  std::optional<CachedGraph> decode_graph_;
  std::list<CachedGraph> cache_;  // most recently used first
  int64_t graph_builds_ = 0;
  std::vector<float> logits_;
  std::vector<int32_t> ids_;
  graph::OpProfile profile_;
  // Tensor parallelism: this rank's part of the model and communicator, and
  // on rank 0 the group's communicators and the other ranks' runners.
  std::unique_ptr<model::RankModel> part_;
  parallel::Communicator* comm_ = nullptr;
  int rank_ = 0;
  std::vector<std::unique_ptr<parallel::Communicator>> group_;
  std::vector<std::unique_ptr<ForwardRunner>> peers_;
  bool remote_peers_ = false;  // rank 0 of a socket group: requests go out first
};

}  // namespace minfer::runtime
