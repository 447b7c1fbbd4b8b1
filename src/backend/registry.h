// The backend registry: every backend kind this build has, in priority order
// (Metal, then CUDA, then Vulkan, then the CPU), with whether it is usable
// here and a factory. The runtime names no backend: it walks this list.
//
// Contract:
//   - backend_kinds() lists the kinds compiled into this build, highest
//     priority first; the CPU kind is always there and always last (it runs
//     every op the builders emit and is every graph's fallback).
//   - unavailable(config) is "" when the kind can run here, else why not
//     (no device, disabled by an option, built without it); it initializes
//     the kind's device on first use.
//   - create(config) makes a backend over config.weights (which must outlive
//     it), or an error saying why; a GPU kind uploads or maps every weight
//     then (its backend's requires_all_weights() is true).
//   - gpu: the kind is skipped when the caller asks for the CPU path only.
//   - option_sections() lists every backend's options section (its MINFER_*
//     switches, base/options.h), those of kinds this build lacks included;
//     the CLI reads the environment with them: Options::from_env(
//     option_sections()). A backend reads its own with options.section<S>().
// Threading: the table is immutable; create() and unavailable() may be
// called from one thread at a time per kind.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "base/options.h"
#include "base/status.h"
#include "model/weights.h"
#include "parallel/communicator.h"

namespace minfer::backend {

struct BackendConfig {
  const model::Weights& weights;
  const Options& options;
  int n_threads = 0;  // CPU worker threads (0: one per hardware thread)
  // This rank's communicator when the model is split over a tensor-parallel
  // group (docs/PARALLEL.md); the backends that have collective kernels
  // (the CPU) run them with it. Null: one rank.
  parallel::Communicator* comm = nullptr;
};

struct BackendKind {
  std::string_view name;
  int priority = 0;  // higher runs first: Metal 400, CUDA 300, Vulkan 200, CPU 100
  bool gpu = false;
  std::string (*unavailable)(const BackendConfig& config) = nullptr;
  Result<std::unique_ptr<Backend>> (*create)(const BackendConfig& config) = nullptr;
};

std::span<const BackendKind> backend_kinds();

OptionSections option_sections();

}  // namespace minfer::backend
