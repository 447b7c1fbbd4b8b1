#include "backend/metal/metal_backend.h"

#include <mutex>
#include <utility>

#include "backend/gpu/gpu_backend.h"
#include "backend/metal/metal_device.h"

namespace minfer::metal {
namespace {

struct Opened {
  bool tried = false;
  std::shared_ptr<gpu::Device> device;
  Status status;
};

// The process's device (opened on first use). Never destroyed: at exit a
// driver may be torn down before static destructors run.
Result<std::shared_ptr<gpu::Device>> shared_device(const Options& options) {
  static std::mutex mu;
  static Opened& opened = *new Opened();
  const std::lock_guard<std::mutex> lock(mu);
  if (!opened.tried) {
    opened.tried = true;
    auto d = open_metal_device(options);
    if (d.is_ok()) {
      opened.device = std::shared_ptr<gpu::Device>(std::move(d).value());
    } else {
      opened.status = d.status();
    }
  }
  if (!opened.status) return opened.status;
  return opened.device;
}

}  // namespace

Status device_status(const Options& options) {
  if (options.disable_metal) return Status::unavailable("disabled by MINFER_DISABLE_METAL");
  return shared_device(options).status();
}

std::string unavailable_reason(const Options& options) {
  const Status s = device_status(options);
  return s.code() == StatusCode::kUnavailable ? s.message() : "";
}

Result<std::unique_ptr<backend::Backend>> create_backend(const model::Weights& weights,
                                                         const Options& options) {
  if (options.disable_metal) return Status::unavailable("disabled by MINFER_DISABLE_METAL");
  auto device = shared_device(options);
  if (!device.is_ok()) return device.status().with_context("Metal");
  return gpu::create_gpu_backend("Metal", std::move(device).value(), weights, options,
                                 default_cache_type);
}

}  // namespace minfer::metal
