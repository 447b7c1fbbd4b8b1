// The registry kind of a GPU API (Vulkan, Metal) over the shared GPU backend:
// what every API's entry does the same way — say why it cannot run, keep the
// error its device met, and make the backend "Name" over the process's
// device (shader_backend.h) — written once; the API supplies its switch and
// its device.
//
// Contract:
//   - status(api, options): unavailable "disabled by <disabled_by>" when
//     api.disabled(options), else the status of api.device(options), which
//     opens the process's device once and shares it (each API's own cache).
//   - unavailable_reason(): status()'s message when it is unavailable, ""
//     when the device runs or failed otherwise (a kernel the driver refused,
//     say): then create_backend() returns that error, so the runner reports
//     it instead of quietly running elsewhere.
//   - create_backend(): the GPU backend named api.name over the device, with
//     api.cache_policy as its default_cache_type().
// Threading: as the API's device cache (locked).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "backend/shader/device.h"
#include "backend/shader/shader_backend.h"
#include "base/options.h"
#include "base/status.h"
#include "model/weights.h"

namespace minfer::shader {

struct ApiKind {
  std::string_view name;         // "Vulkan"
  std::string_view disabled_by;  // "MINFER_DISABLE_VULKAN"
  bool (*disabled)(const Options& options) = nullptr;
  Result<std::shared_ptr<Device>> (*device)(const Options& options) = nullptr;
  CacheTypePolicy cache_policy = nullptr;
};

Status status(const ApiKind& api, const Options& options);
std::string unavailable_reason(const ApiKind& api, const Options& options);
Result<std::unique_ptr<backend::Backend>> create_backend(const ApiKind& api,
                                                         const model::Weights& weights,
                                                         const Options& options);

}  // namespace minfer::shader
