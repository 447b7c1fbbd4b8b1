#include "backend/metal/metal_backend.h"

#include <mutex>
#include <utility>

#include "backend/metal/metal_device.h"
#include "backend/metal/metal_options.h"
#include "backend/shader/api_backend.h"

namespace minfer::metal {
namespace {

struct Opened {
  bool tried = false;
  std::shared_ptr<shader::Device> device;
  Status status;
};

// The process's device (opened on first use). Never destroyed: at exit a
// driver may be torn down before static destructors run.
Result<std::shared_ptr<shader::Device>> shared_device(const Options& options) {
  static std::mutex mu;
  static Opened& opened = *new Opened();
  const std::lock_guard<std::mutex> lock(mu);
  if (!opened.tried) {
    opened.tried = true;
    auto d = open_metal_device(options);
    if (d.is_ok()) {
      opened.device = std::shared_ptr<shader::Device>(std::move(d).value());
    } else {
      opened.status = d.status();
    }
  }
  if (!opened.status) return opened.status;
  return opened.device;
}

const shader::ApiKind kMetal{
    "Metal", "MINFER_DISABLE_METAL",
    [](const Options& o) { return o.section<MetalOptions>().disable_metal; }, shared_device,
    default_cache_type};

}  // namespace

Status device_status(const Options& options) {
  return shader::status(kMetal, options);
}

std::string unavailable_reason(const Options& options) {
  return shader::unavailable_reason(kMetal, options);
}

Result<std::unique_ptr<backend::Backend>> create_backend(const model::Weights& weights,
                                                         const Options& options) {
  return shader::create_backend(kMetal, weights, options);
}

}  // namespace minfer::metal
