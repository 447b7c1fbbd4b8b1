// `minfer tp-worker`: one rank (1..N-1) of a model split over N processes.
// Rank 0 is any model command given -tp N --tp-init HOST:PORT; each worker
// loads the same file, joins it there and runs its part of every forward
// until rank 0 ends (docs/PARALLEL.md, "One rank per process").
#include <cstdio>
#include <limits>

#include "cli/commands.h"
#include "cli/common.h"
#include "runtime/forward.h"

namespace minfer::cli {
namespace {

// A worker waits for rank 0's next request as long as rank 0 is idle (a
// server between requests), so its default wait is long; a rank 0 that
// exits or crashes closes the connection, which ends the wait at once.
constexpr double kWorkerTimeoutS = 30.0 * 24 * 3600;

Status run(const ArgParser& p) {
  MINFER_ASSIGN_OR_RETURN(runtime::RunOptions o, run_options(p, 4096));
  if (o.tensor_parallel_address.empty()) {
    return Status::invalid_argument("give rank 0's address: --tp-init HOST:PORT");
  }
  MINFER_ASSIGN_OR_RETURN(int64_t rank, p.get_int("--tp-rank", 0, 1, o.tensor_parallel - 1));
  if (!p.has("--tp-rank")) return Status::invalid_argument("give this rank: --tp-rank R");
  MINFER_ASSIGN_OR_RETURN(int64_t timeout,
                          p.get_int("--tp-timeout", static_cast<int64_t>(kWorkerTimeoutS), 1,
                                    std::numeric_limits<int32_t>::max()));
  o.tensor_parallel_timeout_s = static_cast<double>(timeout);
  MINFER_ASSIGN_OR_RETURN(auto model, load_model(p));
  std::fprintf(stderr, "tp-worker: rank %lld of %d, joining %s\n", static_cast<long long>(rank),
               o.tensor_parallel, o.tensor_parallel_address.c_str());
  return runtime::ForwardRunner::serve_rank(*model, o, static_cast<int>(rank));
}

}  // namespace

int run_tp_worker(std::span<const std::string_view> args) {
  ArgParser p("tp-worker", "-m MODEL.gguf -tp N --tp-rank R --tp-init HOST:PORT [-t THREADS]");
  add_model_options(p);
  p.option("--tp-rank", "R", "this process's rank, 1..N-1 (rank 0 is the model command)");
  p.option("--tp-timeout", "S", "seconds to wait for rank 0 and within each step (30 days)");
  return parse_and_run(p, "tp-worker", args, run);
}

}  // namespace minfer::cli
