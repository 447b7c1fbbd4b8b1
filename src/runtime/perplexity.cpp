#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>

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

}  // namespace

Result<PerplexityResult> perplexity(Session& session, std::span<const int32_t> tokens,
                                    int64_t n_ctx, int64_t n_chunks,
                                    const PerplexityProgress& progress) {
  if (n_ctx < 4)
    return Status::invalid_argument("perplexity context " + std::to_string(n_ctx) + " < 4");
  if (n_ctx > session.n_ctx()) {
    return Status::out_of_range("perplexity context " + std::to_string(n_ctx) +
                                " exceeds the session's context " +
                                std::to_string(session.n_ctx()));
  }
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  const int64_t max_chunks = n_tokens / n_ctx;
  if (max_chunks < 1) {
    return Status::invalid_argument("need at least " + std::to_string(n_ctx) +
                                    " tokens for one chunk of " + std::to_string(n_ctx) +
                                    ", the text has " + std::to_string(n_tokens));
  }
  const int64_t chunks = n_chunks > 0 ? std::min(n_chunks, max_chunks) : max_chunks;
  const tokenizer::Tokenizer& tok = session.model().tokenizer();
  const bool add_bos = tok.vocab().add_bos && tok.bos() >= 0;
  const int64_t first = n_ctx / 2;
  const int64_t n_vocab = session.model().hparams().n_vocab;

  PerplexityResult r;
  double nll = 0, nll2 = 0;
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  for (int64_t c = 0; c < chunks; ++c) {
    std::copy_n(tokens.begin() + c * n_ctx, n_ctx, chunk.begin());
    if (add_bos) chunk[0] = tok.bos();
    session.reset();
    // Logits for positions first .. n_ctx-1; the last row predicts past the chunk.
    MINFER_ASSIGN_OR_RETURN(std::span<const float> logits, session.eval(chunk, n_ctx - first));
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const auto row =
          logits.subspan(static_cast<size_t>((j - first) * n_vocab), static_cast<size_t>(n_vocab));
      const int32_t target = tokens[static_cast<size_t>(c * n_ctx + j + 1)];
      const double v = nll_of(row, target);
      nll += v;
      nll2 += v * v;
      r.scored++;
    }
    r.running_ppl.push_back(std::exp(nll / static_cast<double>(r.scored)));
    if (progress) {
      MINFER_RETURN_IF_ERROR(
          progress(c, r.running_ppl.back(),
                   logits.first(static_cast<size_t>((n_ctx - 1 - first) * n_vocab))));
    }
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
