#include "runtime/session.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace minfer::runtime {

Result<std::unique_ptr<Session>> Session::create(const model::Model& model,
                                                 const SessionOptions& options) {
  if (options.n_ctx < 1) {
    return Status::invalid_argument("context size " + std::to_string(options.n_ctx) +
                                    " must be positive");
  }
  if (options.max_batch < 1) return Status::invalid_argument("batch size must be positive");
  std::unique_ptr<Session> s(new Session(model, options));
  ForwardConfig config(options);
  config.kv_rows = options.n_ctx;
  config.cache_size = 1;  // the last prompt's graph beside the decode graph
  MINFER_ASSIGN_OR_RETURN(s->runner_, ForwardRunner::create(model, config, s->graph_params(1, 1)));
  s->options_.k_type = s->runner_->kv().k_type();
  s->options_.v_type = s->runner_->kv().v_type();
  return s;
}

Session::~Session() = default;

model::GraphParams Session::graph_params(int64_t n_tokens, int64_t n_outputs) const {
  model::GraphParams params;
  params.n_tokens = n_tokens;
  params.n_outputs = n_outputs;
  params.k_type = options_.k_type;
  params.v_type = options_.v_type;
  return params;
}

Status Session::eval_batch(std::span<const int32_t> tokens, int64_t n_outputs, float* out) {
  positions_.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) positions_[i] = static_cast<int32_t>(n_past_ + i);
  graph::ForwardInputs inputs;
  inputs.tokens = tokens;
  inputs.positions = positions_;
  MINFER_ASSIGN_OR_RETURN(
      std::span<const float> logits,
      runner_->run(graph_params(static_cast<int64_t>(tokens.size()), n_outputs), inputs));
  std::memcpy(out, logits.data(), logits.size() * sizeof(float));
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
