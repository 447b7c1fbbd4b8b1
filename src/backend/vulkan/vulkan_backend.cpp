#include "backend/vulkan/vulkan_backend.h"

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/shader/api_backend.h"
#include "backend/vulkan/vulkan_device.h"
#include "backend/vulkan/vulkan_options.h"

namespace minfer::vulkan {
namespace {

struct Opened {
  int device_index = 0;
  bool validation = false;
  std::shared_ptr<shader::Device> device;
  Status status;
};

// The process's device for the options' choice (opened on first use). The
// list is never destroyed: at exit the NVIDIA driver may be torn down before
// static destructors run, and destroying its device then crashed the process.
Result<std::shared_ptr<shader::Device>> shared_device(const Options& options) {
  static std::mutex mu;
  static std::vector<Opened>& opened = *new std::vector<Opened>();
  const std::lock_guard<std::mutex> lock(mu);
  for (const Opened& o : opened) {
    if (o.device_index == options.section<VulkanOptions>().vulkan_device &&
        o.validation == options.section<VulkanOptions>().vulkan_validation) {
      if (!o.status) return o.status;
      return o.device;
    }
  }
  Opened o{options.section<VulkanOptions>().vulkan_device,
           options.section<VulkanOptions>().vulkan_validation, nullptr, Status::ok()};
  auto d = open_device(options, {.refuse_cpu_device = true});
  if (d.is_ok()) {
    o.device = std::shared_ptr<shader::Device>(std::move(d).value());
  } else {
    o.status = d.status();
  }
  opened.push_back(o);
  if (!o.status) return o.status;
  return o.device;
}

const shader::ApiKind kVulkan{
    "Vulkan", "MINFER_DISABLE_VULKAN",
    [](const Options& o) { return o.section<VulkanOptions>().disable_vulkan; }, shared_device};

}  // namespace

Status device_status(const Options& options) {
  return shader::status(kVulkan, options);
}

std::string unavailable_reason(const Options& options) {
  return shader::unavailable_reason(kVulkan, options);
}

Result<std::unique_ptr<backend::Backend>> create_backend(const model::Weights& weights,
                                                         const Options& options) {
  return shader::create_backend(kVulkan, weights, options);
}

Result<shader::DeviceInfo> device_info(const Options& options) {
  MINFER_RETURN_IF_ERROR(device_status(options));
  MINFER_ASSIGN_OR_RETURN(std::shared_ptr<shader::Device> d, shared_device(options));
  return d->info();
}

}  // namespace minfer::vulkan
