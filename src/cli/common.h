// Pieces shared by the model-running subcommands: options common to all of
// them (model, threads, context, cache type) read into the one run
// configuration (runtime::RunOptions), model loading with a progress bar, and
// engine creation.
#pragma once

#include <memory>
#include <string>

#include "base/options.h"
#include "base/status.h"
#include "cli/args.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/run_options.h"
#include "runtime/sampler.h"

namespace minfer::cli {

// The MINFER_* environment, read once for the whole command (Options::
// from_env()); main() refuses to run a command when it is invalid.
const Result<Options>& environment();

// Declares -m, -t, -c, --cache-type, -ctk/--cache-type-k, -ctv/--cache-type-v,
// --batch-size.
void add_model_options(ArgParser& p);
// Declares --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --seed.
void add_sampling_options(ArgParser& p);

// Loads the model named by -m (error if none), with a progress bar on stderr
// unless `quiet`.
Result<std::unique_ptr<model::Model>> load_model(const ArgParser& p, bool quiet = false);

// The largest context any command accepts (2^24 tokens, 16× the longest
// trained context of the supported models); a model's own limit is lower.
inline constexpr int64_t kMaxContext = int64_t{1} << 24;
// -t accepts at most this many threads per hardware thread.
inline constexpr int64_t kMaxThreadsPerCore = 4;

// The most threads -t accepts on this machine: kMaxThreadsPerCore per hardware thread.
int64_t max_thread_count();
// -t/--threads: 0 (all hardware threads) up to max_thread_count().
Result<int> thread_count(const ArgParser& p);

// The run configuration (runtime::RunOptions) from -t, -c, the cache types,
// --batch-size and the MINFER_* environment; what no flag or variable sets
// keeps RunOptions' default. Cache types (f32, f16, q8_0): MINFER_CACHE_TYPE
// sets K and V, --cache-type beats it, -ctk/-ctv beat both for K or V; a bad
// value is an error naming its source, the value and the allowed types.
// Types nobody chose are marked RunOptions::cache_types_are_defaults.
Result<runtime::RunOptions> run_options(const ArgParser& p, int64_t default_ctx);
// -tp/--tensor-parallel-size N, or --tensor-split's count of equal shares.
Result<int> tensor_parallel_ranks(const ArgParser& p);
// --tp-init HOST:PORT (or tcp://HOST:PORT) for `ranks` ranks; "" when absent.
Result<std::string> tensor_parallel_address(const ArgParser& p, int ranks);
// The same from -c and the cache types alone, for a command that sets the
// threads and the batch size itself (bench, whose -t and -b take lists).
Result<runtime::RunOptions> context_options(const ArgParser& p, int64_t default_ctx);

// A seed flag: absent or -1 picks a fresh random seed (the commands print
// it); otherwise 0 .. 2^64-1.
Result<uint64_t> seed_option(const ArgParser& p, std::string_view flag);

Result<runtime::SamplerParams> sampler_params(const ArgParser& p);

// Reads -p TEXT or -f FILE (`-f -`: standard input; error if neither, or both).
Result<std::string> read_prompt(const ArgParser& p);
// An engine for one sequence at a time (run, chat, perplexity), of context
// run.n_ctx: nothing shares its batches, so batch invariance is off (the
// fastest kernels run).
runtime::EngineOptions solo_engine_options(const runtime::RunOptions& run);
Result<std::unique_ptr<runtime::Engine>> solo_engine(const model::Model& model,
                                                     const runtime::RunOptions& run);
// A whole file as text; errors name `what` ("prompt file") and the path.
Result<std::string> read_text_file(const std::string& path, std::string_view what);

}  // namespace minfer::cli
