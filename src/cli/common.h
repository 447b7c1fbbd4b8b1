// Pieces shared by the model-running subcommands: options common to all of
// them (model, threads, context, cache type), model loading with a progress
// bar, and session creation.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "cli/args.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace minfer::cli {

// Declares -m, -t, -c, --cache-type, -ctk/--cache-type-k, -ctv/--cache-type-v,
// --batch-size.
void add_model_options(ArgParser& p);
// Declares --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --seed.
void add_sampling_options(ArgParser& p);

// Loads the model named by -m (error if none), with a progress bar on stderr
// unless `quiet`.
Result<std::unique_ptr<model::Model>> load_model(const ArgParser& p, bool quiet = false);

// Session options from -t, -c, the cache types and --batch-size. Cache types
// (f32, f16, q8_0; default f16): MINFER_CACHE_TYPE sets K and V, --cache-type
// beats it, -ctk/-ctv beat both for K or V; a bad value is an error naming its
// source, the value and the allowed types.
Result<runtime::SessionOptions> session_options(const ArgParser& p, int64_t default_ctx);

Result<runtime::SamplerParams> sampler_params(const ArgParser& p);

// Reads -p TEXT or -f FILE (error if neither, or both).
Result<std::string> read_prompt(const ArgParser& p);

}  // namespace minfer::cli
