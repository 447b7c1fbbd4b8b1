// RunOptions: how a model is run — the context, the CPU threads, the batch
// size, the KV cache types, whether a GPU may take part and the MINFER_*
// switches. The one run configuration: a Session takes it as it is
// (SessionOptions), an Engine adds only what many sequences need
// (EngineOptions: slots, pages, decode turns, step shapes) and the
// ForwardRunner under both adds what its owner derives (cache rows, graph
// cache size).
//
// Contract:
//   - The defaults below are every path's (Session, Engine, the CLI): the
//     CLI keeps each one unless a flag or MINFER_* variable sets it, and marks
//     cache types nobody chose (cache_types_are_defaults; cli::run_options).
//   - Plain values, validated by whoever consumes them (Session::create,
//     Engine::create): a bad value is an invalid-argument error there.
// Threading: plain values.
#pragma once

#include <cstdint>
#include <string>

#include "base/options.h"
#include "quant/tensor_type.h"

namespace minfer::runtime {

struct RunOptions {
  // Context limit of each sequence (prompt + generated), in tokens.
  int64_t n_ctx = 4096;
  int n_threads = 0;  // CPU threads; 0: all hardware threads
  // Tokens per forward pass: a Session splits longer batches, an Engine
  // fills each step up to it (prefill chunks).
  int64_t max_batch = 512;
  // KV cache row types: F32, F16 or Q8_0 (head_dim a multiple of 32); K and V
  // may differ. A cache a GPU backend cannot read keeps attention on the CPU.
  // f16, the documented default (README, MINFER_CACHE_TYPE) and llama.cpp's:
  // half of f32's memory, and on the CPU a long prompt's logits are the same
  // (docs/ARCHITECTURE.md, "Attention follows llama.cpp's two CPU paths").
  quant::TensorType k_type = quant::TensorType::F16;
  quant::TensorType v_type = quant::TensorType::F16;
  // k_type/v_type are defaults, not the user's: a backend that runs this
  // model better with another cache type (Metal) may replace them. Off
  // unless the caller says so, so that types a test sets are kept.
  bool cache_types_are_defaults = false;
  // Run on a GPU backend when one is usable and every weight reaches it (the
  // all-weights gate); false keeps the CPU path (whose numerics tests pin).
  bool gpu = true;
  // Tensor-parallel ranks the model is split over (docs/PARALLEL.md): N > 1
  // runs N in-process CPU ranks, each with n_threads / N threads.
  int tensor_parallel = 1;
  // One rank per process: "HOST:PORT" where this process, rank 0, listens
  // for the other ranks (each a `minfer tp-worker`; docs/PARALLEL.md). Empty:
  // the ranks are threads of this process.
  std::string tensor_parallel_address;
  // How long a rank waits for the others: to join, and within a collective.
  double tensor_parallel_timeout_s = 600.0;
  // The MINFER_* switches (the CLI passes Options::from_env()): which
  // backends and devices, fusions, batch invariance, traces, op profiles.
  Options options;
};

}  // namespace minfer::runtime
