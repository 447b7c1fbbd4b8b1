#include "backend/registry.h"

#include "backend/backend_options.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_options.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_options.h"
#include "backend/metal/metal_options.h"
#include "backend/shader/shader_options.h"
#include "backend/vulkan/vulkan_options.h"
#if MINFER_HAS_METAL
#include "backend/metal/metal_backend.h"
#endif
#if MINFER_HAS_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#endif

namespace minfer::backend {
namespace {

std::string cuda_unavailable(const BackendConfig& c) {
  if (c.options.section<cuda::CudaOptions>().disable_cuda) return "disabled by MINFER_DISABLE_CUDA";
  return cuda::available() ? "" : cuda::unavailable_reason();
}

Result<std::unique_ptr<Backend>> cuda_create(const BackendConfig& c) {
  return cuda::create_backend(c.weights, c.options);
}

#if MINFER_HAS_METAL
std::string metal_unavailable(const BackendConfig& c) {
  return metal::unavailable_reason(c.options);
}

Result<std::unique_ptr<Backend>> metal_create(const BackendConfig& c) {
  return metal::create_backend(c.weights, c.options);
}
#endif

#if MINFER_HAS_VULKAN
std::string vulkan_unavailable(const BackendConfig& c) {
  return vulkan::unavailable_reason(c.options);
}

Result<std::unique_ptr<Backend>> vulkan_create(const BackendConfig& c) {
  return vulkan::create_backend(c.weights, c.options);
}
#endif

std::string cpu_unavailable(const BackendConfig&) {
  return "";
}

Result<std::unique_ptr<Backend>> cpu_create(const BackendConfig& c) {
  MINFER_ASSIGN_OR_RETURN(
      auto cpu,
      cpu::CpuBackend::create(c.weights, c.n_threads,
                              !c.options.section<cpu::CpuOptions>().cpu_no_repack, c.comm));
  return std::unique_ptr<Backend>(std::move(cpu));
}

const BackendKind kKinds[] = {
#if MINFER_HAS_METAL
    {"Metal", 400, /*gpu=*/true, metal_unavailable, metal_create},
#endif
    {"CUDA", 300, /*gpu=*/true, cuda_unavailable, cuda_create},
#if MINFER_HAS_VULKAN
    {"Vulkan", 200, /*gpu=*/true, vulkan_unavailable, vulkan_create},
#endif
    {"CPU", 100, /*gpu=*/false, cpu_unavailable, cpu_create},
};

}  // namespace

std::span<const BackendKind> backend_kinds() {
  return kKinds;
}

OptionSections option_sections() {
  static const OptionSection* const kSections[] = {
      option_section<metal::MetalOptions>(),
      option_section<cuda::CudaOptions>(),
      option_section<vulkan::VulkanOptions>(),
      option_section<shader::ShaderOptions>(),
      option_section<GpuOptions>(),
      option_section<cpu::CpuOptions>(),
  };
  return kSections;
}

}  // namespace minfer::backend
