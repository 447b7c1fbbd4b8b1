#include "backend/vulkan/vulkan_backend.h"

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/gpu/gpu_backend.h"
#include "backend/vulkan/vulkan_device.h"

namespace minfer::vulkan {
namespace {

struct Opened {
  int device_index = 0;
  bool validation = false;
  std::shared_ptr<gpu::Device> device;
  Status status;
};

// The process's device for the options' choice (opened on first use). The
// list is never destroyed: at exit the NVIDIA driver may be torn down before
// static destructors run, and destroying its device then crashed the process.
Result<std::shared_ptr<gpu::Device>> shared_device(const Options& options) {
  static std::mutex mu;
  static std::vector<Opened>& opened = *new std::vector<Opened>();
  const std::lock_guard<std::mutex> lock(mu);
  for (const Opened& o : opened) {
    if (o.device_index == options.vulkan_device && o.validation == options.vulkan_validation) {
      if (!o.status) return o.status;
      return o.device;
    }
  }
  Opened o{options.vulkan_device, options.vulkan_validation, nullptr, Status::ok()};
  auto d = open_device(options, {.refuse_cpu_device = true});
  if (d.is_ok()) {
    o.device = std::shared_ptr<gpu::Device>(std::move(d).value());
  } else {
    o.status = d.status();
  }
  opened.push_back(o);
  if (!o.status) return o.status;
  return o.device;
}

}  // namespace

Status device_status(const Options& options) {
  if (options.disable_vulkan) return Status::unavailable("disabled by MINFER_DISABLE_VULKAN");
  return shared_device(options).status();
}

std::string unavailable_reason(const Options& options) {
  const Status s = device_status(options);
  return s.code() == StatusCode::kUnavailable ? s.message() : "";
}

Result<std::unique_ptr<backend::Backend>> create_backend(const model::Weights& weights,
                                                         const Options& options) {
  if (options.disable_vulkan) return Status::unavailable("disabled by MINFER_DISABLE_VULKAN");
  auto device = shared_device(options);
  if (!device.is_ok()) return device.status().with_context("Vulkan");
  return gpu::create_gpu_backend("Vulkan", std::move(device).value(), weights, options);
}

}  // namespace minfer::vulkan
