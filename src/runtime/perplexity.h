// Perplexity over a token stream, scored as llama.cpp's llama-perplexity
// scores it: the stream is cut into chunks of n_ctx tokens, each evaluated
// independently from an empty cache (the first token replaced by BOS when the
// vocabulary adds one); within a chunk only the second half is scored: the
// logits at positions n_ctx/2 .. n_ctx-2 predict the next token. Negative log
// likelihoods are accumulated in double.
//
// Each chunk is one score-only request on the engine (Request::
// on_prompt_logits): its prefill runs as the engine's steps, with no other
// work, and no cached page stands for a scored position.
//
// Errors: too few tokens for one chunk, bad n_ctx, an engine that is busy or
// whose per-sequence context is shorter than a chunk.
// Threading: uses the given Engine exclusively.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "base/status.h"
#include "runtime/engine.h"

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
// logits [n_ctx/2 - 1][n_vocab], empty unless asked for). An error stops the
// scoring and is returned (e.g. the reader of the results has gone).
using PerplexityProgress = std::function<Status(int64_t, double, std::span<const float>)>;

struct PerplexityOptions {
  int64_t n_ctx = 512;
  int64_t n_chunks = 0;  // <= 0: as many as the tokens allow
  PerplexityProgress progress;
  bool with_logits = false;  // hand progress each chunk's scored logits
};

Result<PerplexityResult> perplexity(Engine& engine, std::span<const int32_t> tokens,
                                    const PerplexityOptions& options);

}  // namespace minfer::runtime
