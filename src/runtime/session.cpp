#include "runtime/session.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/registry.h"
#include "base/log.h"
#include "graph/fusion.h"
#include "model/builder.h"

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

Result<std::unique_ptr<Session>> Session::create(const model::Model& model,
                                                 const SessionOptions& options) {
  if (options.n_ctx < 1) {
    return Status::invalid_argument("context size " + std::to_string(options.n_ctx) +
                                    " must be positive");
  }
  if (options.max_batch < 1) return Status::invalid_argument("batch size must be positive");
  std::unique_ptr<Session> s(new Session(model, options));
  MINFER_RETURN_IF_ERROR(s->start_backends());
  MINFER_RETURN_IF_ERROR(s->place_kv_cache());
  return s;
}

// Every usable backend kind of the registry, in priority order; the CPU,
// last, must start. A GPU kind that fails to start is reported and skipped.
Status Session::start_backends() {
  const backend::BackendConfig config{model_.weights(), options_.options, options_.n_threads};
  for (const backend::BackendKind& kind : backend::backend_kinds()) {
    if (kind.gpu && !options_.gpu) continue;
    if (!kind.unavailable(config).empty()) continue;
    auto b = kind.create(config);
    if (!b) {
      if (!kind.gpu) return b.status();
      report_unused(kind.name, b.message());
      continue;
    }
    owned_backends_.push_back(std::move(b).value());
  }
  for (auto& b : owned_backends_) {
    backends_.push_back(b.get());
    gpu_ = gpu_ || b->requires_all_weights();
  }
  participants_ = (uint32_t{1} << backends_.size()) - 1;  // every backend takes part
  return Status::ok();
}

Result<std::optional<double>> Session::device_bandwidth_gbs() {
  for (backend::Backend* b : backends_) {
    MINFER_ASSIGN_OR_RETURN(std::optional<double> gbs, b->memory_bandwidth_gbs());
    if (gbs) return gbs;
  }
  return std::optional<double>();
}

// Each layer's cache lives on the backend that runs the layer's attention in
// the decode plan (built here, and kept as the first cached graph); later
// plans are held to that placement.
Status Session::place_kv_cache() {
  const model::HParams& hp = model_.hparams();
  MINFER_RETURN_IF_ERROR(prepare(graph_params(1, 1)));
  MINFER_ASSIGN_OR_RETURN(std::vector<int> where,
                          graph::kv_placement(current_->graph, current_->plan, hp.n_layer));
  std::vector<backend::Backend*> owners;
  for (int& b : where) {
    if (b < 0) b = static_cast<int>(backends_.size()) - 1;  // a layer without attention
    owners.push_back(backends_[static_cast<size_t>(b)]);
  }
  constraints_.kv_backend = std::move(where);
  const KvCacheShape shape{hp.n_layer, options_.n_ctx, hp.n_head_kv, hp.head_dim};
  MINFER_ASSIGN_OR_RETURN(kv_, KvCache::create(owners, shape, options_.k_type, options_.v_type));
  return Status::ok();
}

Session::~Session() {
  graph::release_plan(decode_graph_.plan, backends_);
  graph::release_plan(batch_graph_.plan, backends_);
}

model::GraphParams Session::graph_params(int64_t n_tokens, int64_t n_outputs) const {
  model::GraphParams params;
  params.n_tokens = n_tokens;
  params.n_outputs = n_outputs;
  params.k_type = options_.k_type;
  params.v_type = options_.v_type;
  params.backends = participants_;
  return params;
}

// The all-weights gate: a backend that takes part all-or-nothing must have
// every weight the graph reads (its creation registered them all).
Status Session::check_weights(const model::GraphParams& params, const graph::Graph& g) const {
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

Status Session::prepare(const model::GraphParams& params) {
  CachedGraph& c = params.n_tokens == 1 && params.n_outputs == 1 ? decode_graph_ : batch_graph_;
  current_ = &c;
  if (c.params && *c.params == params) return Status::ok();
  graph::release_plan(c.plan, backends_);
  c.params.reset();
  MINFER_ASSIGN_OR_RETURN(c.graph, model::build_graph(model_.hparams(), model_.weights(), params));
  MINFER_RETURN_IF_ERROR(check_weights(params, c.graph));
  if (params.fuse) graph::fuse(c.graph, backends_, options_.options);
  MINFER_ASSIGN_OR_RETURN(c.plan, graph::build_plan(c.graph, backends_, constraints_));
  c.params = params;
  ++graph_builds_;
  if (options_.options.graph_trace) {
    log_info(graph::describe_plan(c.graph, c.plan, backends_));
  }
  return Status::ok();
}

Status Session::eval_batch(std::span<const int32_t> tokens, int64_t n_outputs, float* out) {
  MINFER_RETURN_IF_ERROR(prepare(graph_params(static_cast<int64_t>(tokens.size()), n_outputs)));
  positions_.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) positions_[i] = static_cast<int32_t>(n_past_ + i);
  auto kv = [&](int backend, int layer) -> const backend::KvPair* {
    return backends_[static_cast<size_t>(backend)] == kv_.owner(layer) ? kv_.layer(layer) : nullptr;
  };
  graph::ForwardInputs inputs;
  inputs.tokens = tokens;
  inputs.positions = positions_;
  MINFER_RETURN_IF_ERROR(graph::execute(
      current_->graph, current_->plan, backends_, inputs, kv, batch_logits_,
      options_.options.op_profile ? &profile_ : nullptr, options_.options.trace_dir));
  std::memcpy(out, batch_logits_.data(), batch_logits_.size() * sizeof(float));
  n_past_ += static_cast<int64_t>(tokens.size());
  return Status::ok();
}

Result<std::span<const float>> Session::eval(std::span<const int32_t> tokens, int64_t n_outputs) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return Status::invalid_argument("eval needs at least one token");
  if (n_outputs < 1 || n_outputs > n) {
    return Status::invalid_argument("asked for " + std::to_string(n_outputs) + " outputs from " +
                                    std::to_string(n) + " tokens");
  }
  if (n_past_ + n > options_.n_ctx) {
    return Status::out_of_range("context full: " + std::to_string(n_past_) +
                                " tokens in the context + " + std::to_string(n) +
                                " new exceed the context size " + std::to_string(options_.n_ctx) +
                                " (raise it with -c)");
  }
  const int64_t n_vocab = model_.hparams().n_vocab;
  // Checked before the first batch runs, so a refused eval leaves the sequence unchanged.
  for (int32_t t : tokens) {
    if (t < 0 || t >= n_vocab) {
      return Status::invalid_argument("token id " + std::to_string(t) +
                                      " is outside the vocabulary [0, " + std::to_string(n_vocab) +
                                      ")");
    }
  }
  logits_.resize(static_cast<size_t>(n_outputs * n_vocab));
  // Batches of at most max_batch tokens; each yields the outputs that fall in it.
  for (int64_t start = 0; start < n; start += options_.max_batch) {
    const int64_t len = std::min(options_.max_batch, n - start);
    const int64_t first_output = n - n_outputs;  // index of the first token with logits
    const int64_t outs = std::max<int64_t>(0, start + len - std::max(first_output, start));
    // A graph always has at least one output row; keep the last token's and discard it.
    const int64_t graph_outs = std::max<int64_t>(outs, 1);
    std::vector<float> scratch;
    float* dst = logits_.data() + (std::max(first_output, start) - first_output) * n_vocab;
    if (outs == 0) {
      scratch.resize(static_cast<size_t>(n_vocab));
      dst = scratch.data();
    }
    MINFER_RETURN_IF_ERROR(eval_batch(
        tokens.subspan(static_cast<size_t>(start), static_cast<size_t>(len)), graph_outs, dst));
  }
  return std::span<const float>(logits_);
}

}  // namespace minfer::runtime
