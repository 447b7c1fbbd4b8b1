// Checked Vulkan calls and RAII owners of Vulkan handles, for the sources
// of the Vulkan device layer (it includes <vulkan/vulkan.h>: keep it out of
// headers that the rest of the engine includes).
//
// Contract:
//   - MINFER_VK_CHECK(expr) evaluates a call returning VkResult and, unless it
//     is VK_SUCCESS, returns a Status naming the call, the VkResult's name and
//     file:line: resource_exhausted for out-of-memory results, unavailable for
//     a lost device or a missing driver, internal otherwise.
//   - vk_struct<T>(sType) is a zeroed Vulkan structure with its sType set.
//   - Owned<T, Destroy> owns one handle created from a VkDevice and destroys
//     it with Destroy when it goes (move-only; a null handle is not destroyed).
// Threading: no shared state.
#pragma once

#include <vulkan/vulkan.h>

#include <utility>

#include "base/status.h"

namespace minfer::vulkan {

const char* vk_result_name(VkResult result);
Status vk_error(VkResult result, const char* call, const char* file, int line);

#define MINFER_VK_CHECK(expr)                                                          \
  do {                                                                                 \
    const VkResult minfer_vk_result_ = (expr);                                         \
    if (minfer_vk_result_ != VK_SUCCESS) {                                             \
      return ::minfer::vulkan::vk_error(minfer_vk_result_, #expr, __FILE__, __LINE__); \
    }                                                                                  \
  } while (0)

// A Vulkan structure of type T with its sType set and everything else zero.
template <typename T>
T vk_struct(VkStructureType type) {
  T t{};
  t.sType = type;
  return t;
}

template <typename T, typename Destroy>
class Owned {
 public:
  Owned() = default;
  Owned(VkDevice device, T handle) : device_(device), handle_(handle) {}
  Owned(Owned&& o) noexcept
      : device_(o.device_), handle_(std::exchange(o.handle_, static_cast<T>(VK_NULL_HANDLE))) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = o.device_;
      handle_ = std::exchange(o.handle_, static_cast<T>(VK_NULL_HANDLE));
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { reset(); }

  void reset() {
    if (handle_ != VK_NULL_HANDLE) Destroy{}(device_, handle_);
    handle_ = VK_NULL_HANDLE;
  }
  T get() const { return handle_; }
  explicit operator bool() const { return handle_ != VK_NULL_HANDLE; }

 private:
  VkDevice device_ = VK_NULL_HANDLE;
  T handle_ = VK_NULL_HANDLE;
};

#define MINFER_VK_OWNER(Alias, Type, destroy_fn)                             \
  struct Alias##Destroy {                                                    \
    void operator()(VkDevice d, Type h) const { destroy_fn(d, h, nullptr); } \
  };                                                                         \
  using Alias = Owned<Type, Alias##Destroy>

MINFER_VK_OWNER(UniqueBuffer, VkBuffer, vkDestroyBuffer);
MINFER_VK_OWNER(UniqueMemory, VkDeviceMemory, vkFreeMemory);
MINFER_VK_OWNER(UniqueFence, VkFence, vkDestroyFence);
MINFER_VK_OWNER(UniqueCommandPool, VkCommandPool, vkDestroyCommandPool);
MINFER_VK_OWNER(UniqueDescriptorPool, VkDescriptorPool, vkDestroyDescriptorPool);
MINFER_VK_OWNER(UniqueDescriptorSetLayout, VkDescriptorSetLayout, vkDestroyDescriptorSetLayout);
MINFER_VK_OWNER(UniquePipelineLayout, VkPipelineLayout, vkDestroyPipelineLayout);
MINFER_VK_OWNER(UniquePipeline, VkPipeline, vkDestroyPipeline);
MINFER_VK_OWNER(UniqueShaderModule, VkShaderModule, vkDestroyShaderModule);
MINFER_VK_OWNER(UniqueQueryPool, VkQueryPool, vkDestroyQueryPool);

}  // namespace minfer::vulkan
