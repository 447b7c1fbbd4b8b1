// Perplexity over a token stream, scored as llama.cpp's llama-perplexity
// scores it: the stream is cut into chunks of n_ctx tokens, each evaluated
// independently from an empty cache (the first token replaced by BOS when the
// vocabulary adds one); within a chunk only the second half is scored: the
// logits at positions n_ctx/2 .. n_ctx-2 predict the next token. Negative log
// likelihoods are accumulated in double.
//
// Errors: fewer than 2*n_ctx... (too few tokens for one chunk), bad n_ctx.
// Threading: uses the given Session exclusively.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "base/status.h"
#include "runtime/session.h"

namespace minfer::runtime {

struct PerplexityResult {
  int64_t chunks = 0;
  int64_t scored = 0;    // predictions scored
  double ppl = 0;        // exp(mean nll)
  double ppl_error = 0;  // one standard error, as llama-perplexity prints it
  double mean_nll = 0;
  std::vector<double> running_ppl;  // after each chunk
};

// Called after each chunk with (chunk index, running PPL, the chunk's scored
// logits [n_ctx/2 - 1][n_vocab]). An error stops the scoring and is returned
// (e.g. the reader of the results has gone).
using PerplexityProgress = std::function<Status(int64_t, double, std::span<const float>)>;

// n_chunks <= 0: as many as the tokens allow.
Result<PerplexityResult> perplexity(Session& session, std::span<const int32_t> tokens,
                                    int64_t n_ctx, int64_t n_chunks,
                                    const PerplexityProgress& progress = {});

}  // namespace minfer::runtime
