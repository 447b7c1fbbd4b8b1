// The feature probe, the limits and the logical device.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/vulkan/vk_device.h"

namespace minfer::vulkan {
namespace {

// What the device supports, as the structures Vulkan fills in.
struct Probe {
  VkPhysicalDeviceVulkan11Features f11 = vk_struct<VkPhysicalDeviceVulkan11Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
  VkPhysicalDeviceVulkan12Features f12 = vk_struct<VkPhysicalDeviceVulkan12Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  VkPhysicalDeviceVulkan13Features f13 = vk_struct<VkPhysicalDeviceVulkan13Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES);
  VkPhysicalDeviceFeatures2 features =
      vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  VkPhysicalDeviceVulkan11Properties p11 = vk_struct<VkPhysicalDeviceVulkan11Properties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES);
  VkPhysicalDeviceVulkan12Properties p12 = vk_struct<VkPhysicalDeviceVulkan12Properties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES);
  VkPhysicalDeviceProperties2 properties =
      vk_struct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
  std::vector<VkExtensionProperties> extensions;

  Probe() = default;
  Probe(const Probe&) = delete;  // the structures point at each other
  Probe& operator=(const Probe&) = delete;
};

Status probe(const Core& core, Probe& p) {
  const bool v13 = core.properties.apiVersion >= VK_API_VERSION_1_3;
  p.features.pNext = &p.f11;
  p.f11.pNext = &p.f12;
  p.f12.pNext = v13 ? &p.f13 : nullptr;
  vkGetPhysicalDeviceFeatures2(core.physical, &p.features);
  p.properties.pNext = &p.p11;
  p.p11.pNext = &p.p12;
  vkGetPhysicalDeviceProperties2(core.physical, &p.properties);
  uint32_t n = 0;
  MINFER_VK_CHECK(vkEnumerateDeviceExtensionProperties(core.physical, nullptr, &n, nullptr));
  p.extensions.resize(n);
  MINFER_VK_CHECK(
      vkEnumerateDeviceExtensionProperties(core.physical, nullptr, &n, p.extensions.data()));
  return Status::ok();
}

bool has_extension(const Probe& p, const char* name) {
  return std::any_of(p.extensions.begin(), p.extensions.end(), [&](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}

shader::DeviceLimits limits_of(const VkPhysicalDeviceLimits& l, const Probe& p) {
  shader::DeviceLimits out;
  for (int a = 0; a < 3; ++a) {
    out.max_workgroup_count[a] = l.maxComputeWorkGroupCount[a];
    out.max_workgroup_size[a] = l.maxComputeWorkGroupSize[a];
  }
  out.max_workgroup_invocations = l.maxComputeWorkGroupInvocations;
  out.max_shared_memory_bytes = l.maxComputeSharedMemorySize;
  out.max_storage_buffer_range = l.maxStorageBufferRange;
  out.min_storage_buffer_offset_alignment = l.minStorageBufferOffsetAlignment;
  out.max_push_constant_bytes = l.maxPushConstantsSize;
  out.subgroup_size = p.p11.subgroupSize;
  return out;
}

shader::DeviceFeatures features_of(const Core& core, const Probe& p) {
  shader::DeviceFeatures f;
  f.storage_buffer_8bit = p.f12.storageBuffer8BitAccess;
  f.storage_buffer_16bit = p.f11.storageBuffer16BitAccess;
  f.shader_float16 = p.f12.shaderFloat16;
  f.shader_int8 = p.f12.shaderInt8;
  f.subgroup_arithmetic = (p.p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                          (p.p11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) &&
                          (p.p11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  f.integer_dot_product =
      core.properties.apiVersion >= VK_API_VERSION_1_3 && p.f13.shaderIntegerDotProduct;
  return f;
}

// Buffers are host visible where the device shares the host's memory.
bool unified_memory(const Core& core) {
  const VkPhysicalDeviceType t = core.properties.deviceType;
  if (t != VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU && t != VK_PHYSICAL_DEVICE_TYPE_CPU) return false;
  return find_memory_type(core.memory, ~0u, kMappedDeviceMemory) != UINT32_MAX;
}

}  // namespace

Status create_logical_device(const OpenConfig& config, Core& core) {
  Probe p;
  MINFER_RETURN_IF_ERROR(probe(core, p));
  core.info.limits = limits_of(core.properties.limits, p);
  core.info.features = features_of(core, p);
  core.info.unified_memory = config.allow_unified_memory && unified_memory(core);
  core.host_access_memory = !core.info.unified_memory && config.allow_host_access_memory &&
                            find_memory_type(core.memory, ~0u, kMappedDeviceMemory) != UINT32_MAX;
  core.info.driver = std::string(p.p12.driverName) + ", " + p.p12.driverInfo;
  // Enable exactly what the kernels may use (and the device has).
  const shader::DeviceFeatures& f = core.info.features;
  auto e11 = vk_struct<VkPhysicalDeviceVulkan11Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
  e11.storageBuffer16BitAccess = f.storage_buffer_16bit;
  auto e12 = vk_struct<VkPhysicalDeviceVulkan12Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  e12.storageBuffer8BitAccess = f.storage_buffer_8bit;
  e12.shaderFloat16 = f.shader_float16;
  e12.shaderInt8 = f.shader_int8;
  auto e13 = vk_struct<VkPhysicalDeviceVulkan13Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES);
  e13.shaderIntegerDotProduct = f.integer_dot_product;
  e11.pNext = &e12;
  if (core.properties.apiVersion >= VK_API_VERSION_1_3) e12.pNext = &e13;

  std::vector<const char*> extensions;
  const bool push =
      config.allow_push_descriptors && has_extension(p, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  if (push) extensions.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  // A portability driver (MoltenVK) requires its subset extension to be enabled.
  if (has_extension(p, "VK_KHR_portability_subset"))
    extensions.push_back("VK_KHR_portability_subset");

  const float priority = 1.0f;
  auto qi = vk_struct<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  qi.queueFamilyIndex = core.queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  auto di = vk_struct<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  di.pNext = &e11;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  di.ppEnabledExtensionNames = extensions.data();
  MINFER_VK_CHECK(vkCreateDevice(core.physical, &di, nullptr, &core.device));
  if (push) {
    core.push_descriptor = reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(
        vkGetDeviceProcAddr(core.device, "vkCmdPushDescriptorSetKHR"));
  }
  return Status::ok();
}

uint32_t find_memory_type(const VkPhysicalDeviceMemoryProperties& memory, uint32_t type_bits,
                          VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    if ((type_bits & (1u << i)) && (memory.memoryTypes[i].propertyFlags & want) == want) return i;
  }
  return UINT32_MAX;
}

}  // namespace minfer::vulkan
