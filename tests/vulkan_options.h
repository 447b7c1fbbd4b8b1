// The options of the end-to-end Vulkan tests (tests/model, tests/runtime):
// the environment's, with CUDA off (so that Vulkan is the GPU backend) and
// the first Vulkan device named unless MINFER_VULKAN_DEVICE chose one (a CPU
// device such as lavapipe is used only when named). Built with MINFER_HAS_VULKAN.
#pragma once

#include <gtest/gtest.h>

#include "backend/cuda/cuda_options.h"
#include "backend/registry.h"
#include "backend/vulkan/vulkan_backend.h"
#include "backend/vulkan/vulkan_options.h"
#include "base/options.h"

namespace minfer::testing {

inline Options vulkan_options() {
  auto o = Options::from_env(backend::option_sections());
  Options out = o.is_ok() ? *o : Options{};
  out.section<cuda::CudaOptions>().disable_cuda = true;
  if (out.section<vulkan::VulkanOptions>().vulkan_device < 0)
    out.section<vulkan::VulkanOptions>().vulkan_device = 0;
  return out;
}

}  // namespace minfer::testing

// Skips only when there is no Vulkan device (unavailable); any other failure
// to open one (a kernel the driver refuses, say) fails the test.
#define MINFER_SKIP_WITHOUT_VULKAN_BACKEND()                                         \
  do {                                                                               \
    const ::minfer::Status s_ =                                                      \
        ::minfer::vulkan::device_status(::minfer::testing::vulkan_options());        \
    if (s_.code() == ::minfer::StatusCode::kUnavailable) {                           \
      GTEST_SKIP() << "no Vulkan device: " << s_.message();                          \
    }                                                                                \
    ASSERT_TRUE(s_.is_ok()) << "opening the Vulkan device failed: " << s_.message(); \
  } while (0)
