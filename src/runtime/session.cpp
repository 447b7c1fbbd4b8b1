#include "runtime/session.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "graph/fusion.h"
#include "model/builder.h"

namespace minfer::runtime {
namespace {

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// Prints why CUDA does not take part, once per distinct reason.
void report_no_gpu(const std::string& reason) {
  static std::string last;
  if (reason == last) return;
  last = reason;
  std::fprintf(stderr, "minfer: CUDA not used: %s; running on the CPU\n", reason.c_str());
}

}  // namespace

Result<std::unique_ptr<Session>> Session::create(const model::Model& model,
                                                 const SessionOptions& options) {
  const model::HParams& hp = model.hparams();
  if (options.n_ctx < 1) {
    return Status::error("context size " + std::to_string(options.n_ctx) + " must be positive");
  }
  if (options.max_batch < 1) return Status::error("batch size must be positive");
  std::unique_ptr<Session> s(new Session(model, options));
  if (options.gpu && cuda::available()) {
    auto gpu = cuda::create_backend(model.weights());
    if (gpu.is_ok()) {
      s->owned_backends_.push_back(std::move(gpu).value());
      s->gpu_ = true;
    } else {
      report_no_gpu(gpu.message());
    }
  }
  MINFER_ASSIGN_OR_RETURN(auto cpu, cpu::CpuBackend::create(model.weights(), options.n_threads));
  s->owned_backends_.push_back(std::move(cpu));
  for (auto& b : s->owned_backends_) s->backends_.push_back(b.get());
  // The KV cache lives on the backend that runs attention: the first one that
  // supports it (probing with a representative node).
  graph::Node probe;
  probe.op = graph::Op::kAttention;
  graph::AttentionMeta probe_meta;
  probe_meta.n_head = hp.n_head;
  probe_meta.n_head_kv = hp.n_head_kv;
  probe_meta.head_dim = hp.head_dim;
  probe_meta.k_type = options.k_type;
  probe_meta.v_type = options.v_type;
  probe.meta = probe_meta;
  backend::Backend* kv_owner = s->backends_.back();
  for (auto* b : s->backends_) {
    if (b->supports_op(probe)) {
      kv_owner = b;
      break;
    }
  }
  const KvCacheShape kv_shape{hp.n_layer, options.n_ctx, hp.n_head_kv, hp.head_dim};
  MINFER_ASSIGN_OR_RETURN(s->kv_,
                          KvCache::create(kv_owner, kv_shape, options.k_type, options.v_type));
  s->profiling_ = env_on("MINFER_OP_PROFILE");
  s->tracing_ = env_on("MINFER_GRAPH_TRACE");
  return s;
}

Session::~Session() {
  graph::release_plan(plan_, backends_);
}

Result<std::optional<double>> Session::device_bandwidth_gbs() {
  for (backend::Backend* b : backends_) {
    MINFER_ASSIGN_OR_RETURN(std::optional<double> gbs, b->memory_bandwidth_gbs());
    if (gbs) return gbs;
  }
  return std::optional<double>();
}

Status Session::prepare(const model::GraphParams& params) {
  if (cached_params_ && *cached_params_ == params) return Status::ok();
  graph::release_plan(plan_, backends_);
  cached_params_.reset();
  MINFER_ASSIGN_OR_RETURN(graph_, model::build_graph(model_.hparams(), model_.weights(), params));
  if (params.gpu) {  // the all-weights gate: every weight the graph reads is on the GPU
    for (const std::string& w : graph::weights_read(graph_)) {
      if (!backends_.front()->has_weight(w)) {
        return Status::error("weight '" + w + "' is not on " +
                             std::string(backends_.front()->name()));
      }
    }
  }
  if (params.fuse) graph::fuse(graph_, backends_);
  MINFER_ASSIGN_OR_RETURN(plan_, graph::build_plan(graph_, backends_));
  cached_params_ = params;
  ++graph_builds_;
  if (tracing_) {
    std::fprintf(stderr, "%s", graph::describe_plan(graph_, plan_, backends_).c_str());
  }
  return Status::ok();
}

Status Session::eval_batch(std::span<const int32_t> tokens, int64_t n_outputs, float* out) {
  model::GraphParams params;
  params.n_tokens = static_cast<int64_t>(tokens.size());
  params.n_outputs = n_outputs;
  params.k_type = kv_.k_type();
  params.v_type = kv_.v_type();
  params.gpu = gpu_;
  MINFER_RETURN_IF_ERROR(prepare(params));
  positions_.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) positions_[i] = static_cast<int32_t>(n_past_ + i);
  const int kv_backend = [&] {
    for (size_t b = 0; b < backends_.size(); ++b) {
      if (backends_[b] == kv_.owner()) return static_cast<int>(b);
    }
    return -1;
  }();
  auto kv = [&](int backend, int layer) -> const backend::KvPair* {
    return backend == kv_backend ? kv_.layer(layer) : nullptr;
  };
  graph::ForwardInputs inputs{tokens, positions_};
  MINFER_RETURN_IF_ERROR(graph::execute(graph_, plan_, backends_, inputs, kv, batch_logits_,
                                        profiling_ ? &profile_ : nullptr));
  std::memcpy(out, batch_logits_.data(), batch_logits_.size() * sizeof(float));
  n_past_ += static_cast<int64_t>(tokens.size());
  return Status::ok();
}

Result<std::span<const float>> Session::eval(std::span<const int32_t> tokens, int64_t n_outputs) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return Status::error("eval needs at least one token");
  if (n_outputs < 1 || n_outputs > n) {
    return Status::error("asked for " + std::to_string(n_outputs) + " outputs from " +
                         std::to_string(n) + " tokens");
  }
  if (n_past_ + n > options_.n_ctx) {
    return Status::error("context full: " + std::to_string(n_past_) + " tokens in the context + " +
                         std::to_string(n) + " new exceed the context size " +
                         std::to_string(options_.n_ctx) + " (raise it with -c)");
  }
  const int64_t n_vocab = model_.hparams().n_vocab;
  // Checked before the first batch runs, so a refused eval leaves the sequence unchanged.
  for (int32_t t : tokens) {
    if (t < 0 || t >= n_vocab) {
      return Status::error("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                           std::to_string(n_vocab) + ")");
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
