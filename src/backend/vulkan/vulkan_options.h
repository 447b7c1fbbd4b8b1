// The Vulkan backend's switches, as an options section (base/options.h).
// Header-only so that a build without Vulkan still lists them.
#pragma once

#include <span>

#include "base/options.h"

namespace minfer::vulkan {

struct VulkanOptions {
  bool disable_vulkan = false;  // MINFER_DISABLE_VULKAN: no Vulkan device
  int vulkan_device = -1;       // MINFER_VULKAN_DEVICE: which Vulkan device (-1: the best)
  // MINFER_VULKAN_VALIDATION: the Khronos validation layer, where installed.
  bool vulkan_validation = false;

  static std::span<const OptionField<VulkanOptions>> fields() {
    // clang-format off
    static const OptionField<VulkanOptions> kRows[] = {
        {{"MINFER_DISABLE_VULKAN", "1: no Vulkan device"}, &VulkanOptions::disable_vulkan},
        {{"MINFER_VULKAN_DEVICE", "N: which Vulkan device (default: discrete > integrated > cpu)"}, IntOption<VulkanOptions>{&VulkanOptions::vulkan_device, 0, 1023}},
        {{"MINFER_VULKAN_VALIDATION", "1: enable the Khronos validation layer if installed"}, &VulkanOptions::vulkan_validation},
    };
    // clang-format on
    return kRows;
  }
};

}  // namespace minfer::vulkan
