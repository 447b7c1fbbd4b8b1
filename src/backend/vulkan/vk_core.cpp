// Instance, physical-device choice, feature probe and logical device.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/vulkan/vk_device.h"
#include "backend/vulkan/vulkan_options.h"
#include "base/log.h"

namespace minfer::vulkan {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

std::string version_text(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

bool has_extension(const std::vector<VkExtensionProperties>& list, const char* name) {
  return std::any_of(list.begin(), list.end(), [&](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  const LogLevel level = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT
                             ? LogLevel::kError
                             : LogLevel::kWarning;
  log_message(level, std::string("Vulkan validation: ") + (data ? data->pMessage : "?"));
  return VK_FALSE;
}

// Layers and extensions of the instance (validation only when asked and installed).
struct InstanceSetup {
  std::vector<const char*> layers, extensions;
  bool debug_utils = false;
  VkInstanceCreateFlags flags = 0;
};

Result<InstanceSetup> instance_setup(const Options& options) {
  InstanceSetup s;
  uint32_t n = 0;
  MINFER_VK_CHECK(vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr));
  std::vector<VkExtensionProperties> exts(n);
  MINFER_VK_CHECK(vkEnumerateInstanceExtensionProperties(nullptr, &n, exts.data()));
  // MoltenVK and other portability drivers are listed only when asked for.
  if (has_extension(exts, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    s.extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    s.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  if (!options.section<VulkanOptions>().vulkan_validation) return s;
  MINFER_VK_CHECK(vkEnumerateInstanceLayerProperties(&n, nullptr));
  std::vector<VkLayerProperties> layers(n);
  MINFER_VK_CHECK(vkEnumerateInstanceLayerProperties(&n, layers.data()));
  const bool found = std::any_of(layers.begin(), layers.end(), [](const VkLayerProperties& l) {
    return std::strcmp(l.layerName, kValidationLayer) == 0;
  });
  if (!found) {
    log_warning("MINFER_VULKAN_VALIDATION=1 but VK_LAYER_KHRONOS_validation is not installed");
    return s;
  }
  s.layers.push_back(kValidationLayer);
  if (has_extension(exts, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
    s.extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    s.debug_utils = true;
  }
  return s;
}

Status create_instance(const Options& options, Core& core) {
  MINFER_ASSIGN_OR_RETURN(const InstanceSetup setup, instance_setup(options));
  auto app = vk_struct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = "minfer";
  app.pEngineName = "minfer";
  app.apiVersion = VK_API_VERSION_1_3;  // the highest this code uses; 1.2 devices are fine
  auto ci = vk_struct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  ci.flags = setup.flags;
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<uint32_t>(setup.layers.size());
  ci.ppEnabledLayerNames = setup.layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(setup.extensions.size());
  ci.ppEnabledExtensionNames = setup.extensions.data();
  const VkResult r = vkCreateInstance(&ci, nullptr, &core.instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
    return Status::unavailable("no Vulkan driver (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER)");
  }
  MINFER_VK_CHECK(r);
  if (setup.debug_utils) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(core.instance, "vkCreateDebugUtilsMessengerEXT"));
    auto mi = vk_struct<VkDebugUtilsMessengerCreateInfoEXT>(
        VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
    mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mi.pfnUserCallback = on_validation_message;
    if (create != nullptr) MINFER_VK_CHECK(create(core.instance, &mi, nullptr, &core.messenger));
  }
  return Status::ok();
}

// The compute queue family of a device (one with compute, preferring one
// without graphics), or UINT32_MAX.
uint32_t compute_family(VkPhysicalDevice pd, uint32_t& timestamp_bits) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fams.data());
  uint32_t best = UINT32_MAX;
  for (uint32_t i = 0; i < n; ++i) {
    if (!(fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (best == UINT32_MAX || !(fams[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = i;
  }
  timestamp_bits = best == UINT32_MAX ? 0 : fams[best].timestampValidBits;
  return best;
}

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 1;
    default:
      return 0;
  }
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

// Why device `pd` cannot be used ("" when it can).
std::string unsuitable(VkPhysicalDevice pd) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(pd, &p);
  if (p.apiVersion < VK_API_VERSION_1_2) {
    return std::string(p.deviceName) + " has Vulkan " + version_text(p.apiVersion) +
           " (minfer needs 1.2)";
  }
  uint32_t timestamp_bits = 0;
  if (compute_family(pd, timestamp_bits) == UINT32_MAX)
    return std::string(p.deviceName) + " has no compute queue";
  return "";
}

Status choose_physical_device(const Options& options, Core& core) {
  uint32_t n = 0;
  MINFER_VK_CHECK(vkEnumeratePhysicalDevices(core.instance, &n, nullptr));
  std::vector<VkPhysicalDevice> devices(n);
  MINFER_VK_CHECK(vkEnumeratePhysicalDevices(core.instance, &n, devices.data()));
  if (n == 0) return Status::unavailable("no Vulkan device");
  if (options.section<VulkanOptions>().vulkan_device >= 0) {
    const uint32_t want = static_cast<uint32_t>(options.section<VulkanOptions>().vulkan_device);
    if (want >= n) {
      return Status::unavailable("MINFER_VULKAN_DEVICE=" + std::to_string(want) + " but " +
                                 std::to_string(n) + " Vulkan device(s) present");
    }
    const std::string why = unsuitable(devices[want]);
    if (!why.empty())
      return Status::unavailable("MINFER_VULKAN_DEVICE=" + std::to_string(want) + ": " + why);
    core.physical = devices[want];
    core.index = want;
    return Status::ok();
  }
  std::string reasons;
  int best_rank = -1;
  for (uint32_t i = 0; i < n; ++i) {
    const std::string why = unsuitable(devices[i]);
    if (!why.empty()) {
      reasons += (reasons.empty() ? "" : "; ") + why;
      continue;
    }
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(devices[i], &p);
    if (type_rank(p.deviceType) > best_rank) {
      best_rank = type_rank(p.deviceType);
      core.physical = devices[i];
      core.index = i;
    }
  }
  if (core.physical == VK_NULL_HANDLE)
    return Status::unavailable("no suitable Vulkan device: " + reasons);
  return Status::ok();
}

}  // namespace

Core::~Core() {
  if (device != VK_NULL_HANDLE) vkDestroyDevice(device, nullptr);
  if (messenger != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy != nullptr) destroy(instance, messenger, nullptr);
  }
  if (instance != VK_NULL_HANDLE) vkDestroyInstance(instance, nullptr);
}

Status create_logical_device(const OpenConfig& config, Core& core);  // vk_features.cpp

Result<std::unique_ptr<Core>> create_core(const Options& options, const OpenConfig& config) {
  if (options.section<VulkanOptions>().disable_vulkan)
    return Status::unavailable("disabled by MINFER_DISABLE_VULKAN");
  auto core = std::make_unique<Core>();
  MINFER_RETURN_IF_ERROR(create_instance(options, *core));
  MINFER_RETURN_IF_ERROR(choose_physical_device(options, *core));
  vkGetPhysicalDeviceProperties(core->physical, &core->properties);
  vkGetPhysicalDeviceMemoryProperties(core->physical, &core->memory);
  uint32_t timestamp_bits = 0;
  core->queue_family = compute_family(core->physical, timestamp_bits);
  if (timestamp_bits > 0 && core->properties.limits.timestampPeriod > 0) {
    core->info.timestamp_period_ns = core->properties.limits.timestampPeriod;
  }
  core->info.type = type_name(core->properties.deviceType);
  core->info.name = core->properties.deviceName;
  core->info.api = "Vulkan " + version_text(core->properties.apiVersion);
  if (config.refuse_cpu_device && options.section<VulkanOptions>().vulkan_device < 0 &&
      core->properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    return Status::unavailable("the Vulkan device '" + core->info.name +
                               "' runs on the CPU (set MINFER_VULKAN_DEVICE=" +
                               std::to_string(core->index) + " to use it anyway)");
  }
  MINFER_RETURN_IF_ERROR(create_logical_device(config, *core));
  vkGetDeviceQueue(core->device, core->queue_family, 0, &core->queue);
  return core;
}

}  // namespace minfer::vulkan
