// The speculative-decoding flags that `run`, `serve` and `batched-bench`
// share, with llama.cpp's spellings where it has them, read into the
// engine's pieces: the per-request settings and the drafter.
//
// Contract: speculation() returns no drafter when no flag asks for
// speculation; with one, n_max may still be 0 (--draft-max 0: a drafter that
// never drafts, the one-token-per-step reference on the same kernels). `--spec ngram` drafts by
// prompt lookup; `-md FILE` (or
// `--spec draft` with it) loads a draft model, refused when its vocabulary
// differs from the target's. Bad values are invalid-argument errors naming
// the flag.
#pragma once

#include <memory>

#include "base/status.h"
#include "cli/args.h"
#include "model/model.h"
#include "runtime/run_options.h"
#include "runtime/speculative.h"

namespace minfer::cli {

// Declares --spec, -md/--model-draft, --draft-max, --draft-min, --draft-p-min,
// --spec-ngram-min, --spec-ngram-max.
void add_speculative_options(ArgParser& p);

struct Speculation {
  runtime::SpeculativeParams params;          // for Request::speculative
  std::shared_ptr<runtime::Drafter> drafter;  // for EngineOptions::drafter
  bool on() const { return drafter != nullptr; }
};

// The per-request settings alone (no model needed): n_max 0 when no flag
// asks for speculation.
Result<runtime::SpeculativeParams> speculative_params(const ArgParser& p);

// `run` is the draft model's run configuration (threads, cache types); its
// context is the target's.
Result<Speculation> speculation(const ArgParser& p, const model::Model& target,
                                const runtime::RunOptions& run, bool quiet = false);

}  // namespace minfer::cli
