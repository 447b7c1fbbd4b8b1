#include "runtime/forward.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

#include "backend/registry.h"
#include "base/log.h"
#include "graph/fusion.h"
#include "model/builder.h"
#include "parallel/local_group.h"
#include "parallel/socket_group.h"
#include "runtime/rank_messages.h"

namespace minfer::runtime {
namespace {

// Logs why a GPU backend does not take part, once per distinct reason.
void report_unused(std::string_view backend, const std::string& reason) {
  static std::string last;
  const std::string line = std::string(backend) + " not used: " + reason + "; running on the CPU";
  if (line == last) return;
  last = line;
  log_warning(line);
}

}  // namespace

Result<std::unique_ptr<ForwardRunner>> ForwardRunner::create(const model::Model& model,
                                                             const ForwardConfig& config,
                                                             model::GraphParams decode_params) {
  if (config.tensor_parallel == 1)
    return create_rank(model, config, decode_params, nullptr, nullptr);
  MINFER_RETURN_IF_ERROR(model::check_split(model.hparams(), config.tensor_parallel));
  if (!config.tensor_parallel_address.empty()) {
    return create_socket_root(model, config, decode_params);
  }
  return create_threads(model, config, decode_params);
}

// Rank `rank` of `ranks`: its part of the model on a CPU runner of its own
// (docs/PARALLEL.md: ranks are CPU ranks). On failure the group is told, so
// that no other rank waits for this one.
Result<std::unique_ptr<ForwardRunner>> ForwardRunner::create_part(const model::Model& model,
                                                                  ForwardConfig config,
                                                                  model::GraphParams decode_params,
                                                                  int rank,
                                                                  parallel::Communicator& comm) {
  config.gpu = false;
  decode_params.tp_rank = rank;
  decode_params.tp_ranks = comm.size();
  auto part = model::split_for_rank(model.hparams(), model.weights(), rank, comm.size());
  auto runner =
      part ? create_rank(model, config, decode_params,
                         std::make_unique<model::RankModel>(std::move(part).value()), &comm)
           : Result<std::unique_ptr<ForwardRunner>>(part.status());
  if (!runner) {
    comm.fail(runner.status());
    return runner.status();
  }
  (*runner)->rank_ = rank;
  return runner;
}

// N ranks on threads of this process, sharing its cores.
Result<std::unique_ptr<ForwardRunner>> ForwardRunner::create_threads(
    const model::Model& model, const ForwardConfig& config, model::GraphParams decode_params) {
  const int ranks = config.tensor_parallel;
  MINFER_ASSIGN_OR_RETURN(auto group, parallel::make_local_group(ranks));
  ForwardConfig rank_config = config;
  const int threads = config.n_threads > 0 ? config.n_threads
                                           : static_cast<int>(std::thread::hardware_concurrency());
  rank_config.n_threads = std::max(1, threads / ranks);
  std::vector<std::unique_ptr<ForwardRunner>> runners;
  for (int r = 0; r < ranks; ++r) {
    MINFER_ASSIGN_OR_RETURN(auto runner,
                            create_part(model, rank_config, decode_params, r, *group[r]));
    runners.push_back(std::move(runner));
  }
  std::unique_ptr<ForwardRunner> first = std::move(runners[0]);
  for (size_t r = 1; r < runners.size(); ++r) first->peers_.push_back(std::move(runners[r]));
  first->group_ = std::move(group);
  return first;
}

// Rank 0 of one rank per process: the others join at the address, then get
// the setup their runners must share.
Result<std::unique_ptr<ForwardRunner>> ForwardRunner::create_socket_root(
    const model::Model& model, const ForwardConfig& config, model::GraphParams decode_params) {
  const int ranks = config.tensor_parallel;
  MINFER_ASSIGN_OR_RETURN(auto comm,
                          parallel::connect_socket_group(config.tensor_parallel_address, 0, ranks,
                                                         config.tensor_parallel_timeout_s));
  MINFER_ASSIGN_OR_RETURN(auto first, create_part(model, config, decode_params, 0, *comm));
  RankSetup setup{config.kv_rows, first->config_.k_type, first->config_.v_type,
                  static_cast<int64_t>(config.cache_size), decode_params};
  std::vector<std::byte> message = encode_setup(setup);
  MINFER_RETURN_IF_ERROR(parallel::broadcast_bytes(*comm, message, 0));
  first->group_.push_back(std::move(comm));
  first->remote_peers_ = true;
  return first;
}

Result<std::unique_ptr<ForwardRunner>> ForwardRunner::create_rank(
    const model::Model& model, const ForwardConfig& config, model::GraphParams decode_params,
    std::unique_ptr<model::RankModel> part, parallel::Communicator* comm) {
  std::unique_ptr<ForwardRunner> r(new ForwardRunner(model, config));
  r->part_ = std::move(part);
  r->comm_ = comm;
  MINFER_RETURN_IF_ERROR(r->start_backends());
  r->choose_cache_types();
  decode_params.k_type = r->config_.k_type;
  decode_params.v_type = r->config_.v_type;
  MINFER_RETURN_IF_ERROR(r->place_kv_cache(decode_params));
  return r;
}

ForwardRunner::~ForwardRunner() {
  if (remote_peers_) {  // an empty message ends the other ranks' loops
    std::vector<std::byte> end;
    (void)parallel::broadcast_bytes(*comm_, end, 0);
  }
  if (decode_graph_) release(*decode_graph_);
  for (CachedGraph& c : cache_) release(c);
}

void ForwardRunner::release(CachedGraph& c) {
  graph::release_plan(c.plan, backends_);
}

// Every usable backend kind of the registry, in priority order, with at
// most one GPU kind (the first usable one: CUDA before Vulkan), since each
// holds a copy of every weight.
Status ForwardRunner::start_backends() {
  const backend::BackendConfig bc{weights(), config_.options, config_.n_threads, comm_};
  bool have_gpu = false;
  for (const backend::BackendKind& kind : backend::backend_kinds()) {
    if (kind.gpu && (!config_.gpu || have_gpu)) continue;
    if (!kind.unavailable(bc).empty()) continue;
    auto b = kind.create(bc);
    if (!b) {
      if (!kind.gpu) return b.status();
      report_unused(kind.name, b.message());
      continue;
    }
    have_gpu = have_gpu || kind.gpu;
    owned_backends_.push_back(std::move(b).value());
  }
  for (auto& b : owned_backends_) {
    backends_.push_back(b.get());
    gpu_ = gpu_ || b->requires_all_weights();
  }
  participants_ = (uint32_t{1} << backends_.size()) - 1;  // every backend takes part
  return Status::ok();
}

// Where the cache types are defaults, the first backend that prefers others
// for this model sets them (Metal: f32 for small models).
void ForwardRunner::choose_cache_types() {
  if (!config_.cache_types_are_defaults) return;
  const model::HParams& hp = this->hp();
  const std::vector<const backend::Backend*> all(backends_.begin(), backends_.end());
  const KvCacheShape shape{hp.n_layer, config_.kv_rows, hp.n_head_kv, hp.head_dim};
  if (auto t = preferred_cache_type(all, shape)) config_.k_type = config_.v_type = *t;
}

// Each layer's cache lives on the first backend that runs every node using
// it in the decode graph (which is then planned and kept for good); every plan is
// held to that placement.
Status ForwardRunner::place_kv_cache(model::GraphParams decode_params) {
  const model::HParams& hp = this->hp();
  decode_params.backends = participants_;
  MINFER_ASSIGN_OR_RETURN(CachedGraph c, build(decode_params));
  MINFER_ASSIGN_OR_RETURN(std::vector<int> where,
                          graph::kv_placement(c.graph, backends_, hp.n_layer));
  std::vector<backend::Backend*> owners;
  for (int& b : where) {
    if (b < 0) b = static_cast<int>(backends_.size()) - 1;  // a layer without attention
    owners.push_back(backends_[static_cast<size_t>(b)]);
  }
  constraints_.kv_backend = std::move(where);
  const KvCacheShape shape{hp.n_layer, config_.kv_rows, hp.n_head_kv, hp.head_dim};
  MINFER_ASSIGN_OR_RETURN(kv_, KvCache::create(owners, shape, config_.k_type, config_.v_type));
  MINFER_RETURN_IF_ERROR(plan(c));  // the same graph, now under the placement
  decode_graph_ = std::move(c);
  return Status::ok();
}

std::string_view ForwardRunner::gpu_name() const {
  for (const backend::Backend* b : backends_) {
    if (b->requires_all_weights()) return b->name();
  }
  return "";
}

Result<std::optional<double>> ForwardRunner::device_bandwidth_gbs() {
  for (backend::Backend* b : backends_) {
    MINFER_ASSIGN_OR_RETURN(std::optional<double> gbs, b->memory_bandwidth_gbs());
    if (gbs) return gbs;
  }
  return std::optional<double>();
}

// The all-weights gate: a backend that takes part all-or-nothing must have
// every weight the graph reads (its creation registered them all).
Status ForwardRunner::check_weights(const model::GraphParams& params, const graph::Graph& g) const {
  for (size_t b = 0; b < backends_.size(); ++b) {
    if ((params.backends >> b & 1u) == 0 || !backends_[b]->requires_all_weights()) continue;
    for (const std::string& w : graph::weights_read(g)) {
      if (!backends_[b]->has_weight(w)) {
        return Status::internal("weight '" + w + "' is not on " +
                                std::string(backends_[b]->name()));
      }
    }
  }
  return Status::ok();
}

// The fused graph of `params`, its weights checked against the gate.
Result<ForwardRunner::CachedGraph> ForwardRunner::build(const model::GraphParams& params) const {
  CachedGraph c;
  c.params = params;
  MINFER_ASSIGN_OR_RETURN(c.graph, model::build_graph(hp(), weights(), params));
  MINFER_RETURN_IF_ERROR(check_weights(params, c.graph));
  if (params.fuse) graph::fuse(c.graph, backends_, config_.options);
  return c;
}

Status ForwardRunner::plan(CachedGraph& c) {
  MINFER_ASSIGN_OR_RETURN(c.plan, graph::build_plan(c.graph, backends_, constraints_));
  ++graph_builds_;
  if (config_.options.graph_trace) log_info(graph::describe_plan(c.graph, c.plan, backends_));
  return Status::ok();
}

Result<ForwardRunner::CachedGraph*> ForwardRunner::prepare(const model::GraphParams& params) {
  if (decode_graph_ && decode_graph_->params == params) return &*decode_graph_;
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (it->params != params) continue;
    cache_.splice(cache_.begin(), cache_, it);  // most recently used first
    return &cache_.front();
  }
  MINFER_ASSIGN_OR_RETURN(CachedGraph c, build(params));
  MINFER_RETURN_IF_ERROR(plan(c));
  if (cache_.size() >= config_.cache_size && !cache_.empty()) {
    release(cache_.back());
    cache_.pop_back();
  }
  cache_.push_front(std::move(c));
  return &cache_.front();
}

// Every rank's graph at once: ranks 1..N-1 on threads of their own (or in
// their own processes), rank 0 on this one. A rank that fails, rank 0
// included, releases the others from the collectives.
Result<std::span<const float>> ForwardRunner::run(model::GraphParams params,
                                                  const graph::ForwardInputs& inputs) {
  if (remote_peers_) {  // the other processes' ranks get the request first
    std::vector<std::byte> request = encode_forward(params, inputs);
    MINFER_RETURN_IF_ERROR(parallel::broadcast_bytes(*comm_, request, 0));
  }
  std::vector<Status> peer_status(peers_.size(), Status::ok());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < peers_.size(); ++i) {
    threads.emplace_back([&, i] {
      auto out = peers_[i]->run_rank(params, inputs);
      if (!out) {
        peer_status[i] = out.status();
        peers_[i]->comm_->fail(out.status());
      }
    });
  }
  auto out = run_rank(params, inputs);
  if (!out && comm_ != nullptr) comm_->fail(out.status());
  for (std::thread& t : threads) t.join();
  if (!out) return out.status();
  for (const Status& s : peer_status) {
    if (!s) return s;
  }
  return out;
}

Result<std::span<const float>> ForwardRunner::run_rank(model::GraphParams params,
                                                       const graph::ForwardInputs& inputs) {
  params.backends = participants_;
  params.tp_rank = rank_;
  params.tp_ranks = comm_ != nullptr ? comm_->size() : 1;
  MINFER_ASSIGN_OR_RETURN(CachedGraph * c, prepare(params));
  auto kv = [&](int backend, int layer) -> const backend::KvPair* {
    return backends_[static_cast<size_t>(backend)] == kv_.owner(layer) ? kv_.layer(layer) : nullptr;
  };
  MINFER_RETURN_IF_ERROR(graph::execute(c->graph, c->plan, backends_, inputs, kv, logits_,
                                        config_.options.op_profile ? &profile_ : nullptr,
                                        config_.options.trace_dir));
  return std::span<const float>(logits_);
}

Result<std::span<const int32_t>> ForwardRunner::run_argmax(model::GraphParams params,
                                                           const graph::ForwardInputs& inputs) {
  params.argmax = true;
  MINFER_ASSIGN_OR_RETURN(std::span<const float> out, run(params, inputs));
  ids_.resize(out.size());
  std::memcpy(ids_.data(), out.data(), out.size_bytes());  // the i32 output's bytes
  return std::span<const int32_t>(ids_);
}

}  // namespace minfer::runtime

namespace minfer::runtime {

Status ForwardRunner::serve_rank(const model::Model& model, const RunOptions& options, int rank) {
  const int ranks = options.tensor_parallel;
  if (rank < 1 || rank >= ranks) {
    return Status::invalid_argument("rank " + std::to_string(rank) + " is not one of ranks 1.." +
                                    std::to_string(ranks - 1));
  }
  MINFER_RETURN_IF_ERROR(model::check_split(model.hparams(), ranks));
  MINFER_ASSIGN_OR_RETURN(
      auto comm, parallel::connect_socket_group(options.tensor_parallel_address, rank, ranks,
                                                options.tensor_parallel_timeout_s));
  std::vector<std::byte> message;
  MINFER_RETURN_IF_ERROR(parallel::broadcast_bytes(*comm, message, 0));
  MINFER_ASSIGN_OR_RETURN(RankSetup setup, decode_setup(message));
  ForwardConfig config(options);
  config.kv_rows = setup.kv_rows;
  config.k_type = setup.k_type;
  config.v_type = setup.v_type;
  config.cache_types_are_defaults = false;  // rank 0 chose them
  config.cache_size = static_cast<size_t>(setup.cache_size);
  MINFER_ASSIGN_OR_RETURN(auto runner,
                          create_part(model, config, setup.decode_params, rank, *comm));
  for (;;) {
    MINFER_RETURN_IF_ERROR(parallel::broadcast_bytes(*comm, message, 0));
    if (message.empty()) return Status::ok();  // rank 0 ended the group
    MINFER_ASSIGN_OR_RETURN(RankForward f, decode_forward(message));
    auto out = runner->run_rank(f.params, f.inputs());
    if (!out) {
      comm->fail(out.status());
      return out.status();
    }
  }
}

}  // namespace minfer::runtime
