#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace minfer::runtime {
namespace {

// -log softmax(logits)[target], in double.
double nll_of(std::span<const float> logits, int32_t target) {
  float max = logits[0];
  for (float l : logits) max = std::max(max, l);
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max));
  return std::log(sum) - static_cast<double>(logits[static_cast<size_t>(target)] - max);
}

Status check_inputs(const Engine& engine, int64_t n_ctx, int64_t n_tokens) {
  if (n_ctx < 4) {
    return Status::invalid_argument("perplexity context " + std::to_string(n_ctx) + " < 4");
  }
  if (n_ctx > engine.options().n_ctx) {
    return Status::out_of_range("perplexity context " + std::to_string(n_ctx) +
                                " exceeds the engine's context of a sequence " +
                                std::to_string(engine.options().n_ctx));
  }
  if (!engine.idle()) return Status::invalid_argument("the engine is running other requests");
  if (n_tokens < n_ctx) {
    return Status::invalid_argument("need at least " + std::to_string(n_ctx) +
                                    " tokens for one chunk of " + std::to_string(n_ctx) +
                                    ", the text has " + std::to_string(n_tokens));
  }
  return Status::ok();
}

// Steps the engine until request `id` ends; its error, if it failed.
Status run_to_end(Engine& engine, SequenceId id) {
  for (;;) {
    MINFER_ASSIGN_OR_RETURN(std::vector<SequenceEvent> events, engine.step());
    for (const SequenceEvent& e : events) {
      if (e.id != id || e.finished == FinishReason::kNone) continue;
      if (e.finished == FinishReason::kError) return Status::internal(e.error);
      return Status::ok();
    }
  }
}

}  // namespace

Result<PerplexityResult> perplexity(Engine& engine, std::span<const int32_t> tokens,
                                    const PerplexityOptions& o) {
  const int64_t n_ctx = o.n_ctx;
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  MINFER_RETURN_IF_ERROR(check_inputs(engine, n_ctx, n_tokens));
  const int64_t max_chunks = n_tokens / n_ctx;
  const int64_t chunks = o.n_chunks > 0 ? std::min(o.n_chunks, max_chunks) : max_chunks;
  const tokenizer::Tokenizer& tok = engine.model().tokenizer();
  const bool add_bos = tok.vocab().add_bos && tok.bos() >= 0;
  const int64_t first = n_ctx / 2;
  const auto n_vocab = static_cast<size_t>(engine.model().hparams().n_vocab);

  PerplexityResult r;
  double nll = 0, nll2 = 0;
  std::vector<float> kept;  // with_logits: the chunk's scored rows
  for (int64_t c = 0; c < chunks; ++c) {
    Request req;
    req.prompt.assign(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
    if (add_bos) req.prompt[0] = tok.bos();
    req.max_tokens = 0;
    req.prompt_logits_from = first;
    kept.clear();
    // Rows first .. n_ctx-2 predict the chunk's tokens; the last predicts past it.
    req.on_prompt_logits = [&](int64_t pos, std::span<const float> rows) {
      for (size_t i = 0; i * n_vocab < rows.size(); ++i, ++pos) {
        if (pos >= n_ctx - 1) break;
        const auto row = rows.subspan(i * n_vocab, n_vocab);
        const double v = nll_of(row, tokens[static_cast<size_t>(c * n_ctx + pos + 1)]);
        nll += v;
        nll2 += v * v;
        r.scored++;
        if (o.with_logits) kept.insert(kept.end(), row.begin(), row.end());
      }
      return Status::ok();
    };
    MINFER_ASSIGN_OR_RETURN(SequenceId id, engine.add(std::move(req)));
    MINFER_RETURN_IF_ERROR(run_to_end(engine, id));
    r.running_ppl.push_back(std::exp(nll / static_cast<double>(r.scored)));
    if (o.progress) MINFER_RETURN_IF_ERROR(o.progress(c, r.running_ppl.back(), kept));
  }
  r.chunks = chunks;
  r.mean_nll = nll / static_cast<double>(r.scored);
  r.ppl = std::exp(r.mean_nll);
  const double var = nll2 / static_cast<double>(r.scored) - r.mean_nll * r.mean_nll;
  r.ppl_error =
      var > 0 && r.scored > 1 ? std::sqrt(var / static_cast<double>(r.scored - 1)) * r.ppl : 0.0;
  return r;
}

}  // namespace minfer::runtime
