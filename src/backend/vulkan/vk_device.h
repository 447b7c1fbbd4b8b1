// Internals of the Vulkan device layer (vulkan_device.h is its public face):
// the instance and device (Core), the device with its pipelines, buffers and
// host copies (VulkanDevice), and the command list (vk_commands.cpp).
// Included only by src/backend/vulkan/*.cpp.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "backend/shader/device.h"
#include "backend/vulkan/vk_check.h"
#include "backend/vulkan/vulkan_device.h"

namespace minfer::vulkan {

// The instance, the chosen physical device, the logical device and its
// compute queue, with what was probed about them (vk_core.cpp).
struct Core {
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  uint32_t index = 0;  // of `physical` among the instance's devices
  VkPhysicalDeviceProperties properties{};
  VkPhysicalDeviceMemoryProperties memory{};
  PFN_vkCmdPushDescriptorSetKHR push_descriptor = nullptr;  // null: descriptor pools
  // A device-local, host-visible, coherent memory type for MemoryUse::kHostAccess
  // (NVIDIA's BAR heap) on a device whose memory is not unified.
  bool host_access_memory = false;
  shader::DeviceInfo info;

  Core() = default;
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;
  ~Core();
};

Result<std::unique_ptr<Core>> create_core(const Options& options, const OpenConfig& config);

// Waits for `fence` until `deadline`: true when it signalled, false when the
// deadline passed first. It first polls the fence for up to `spin` (never
// past the deadline), yielding between polls, then blocks in
// vkWaitForFences: NVIDIA's blocking wait sleeps and wakes late (vk_device.cpp
// has the H200's numbers), which a decode step's wait pays every token.
Result<bool> wait_fence(VkDevice device, VkFence fence, shader::Clock::time_point deadline,
                        shader::Clock::duration spin = shader::Clock::duration::zero());

// Device memory the host maps: unified memory, or a discrete GPU's BAR heap.
inline constexpr VkMemoryPropertyFlags kMappedDeviceMemory = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                                             VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                                             VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;

// A memory type of `type_bits` with all of `want`, or nullopt-like UINT32_MAX.
uint32_t find_memory_type(const VkPhysicalDeviceMemoryProperties& memory, uint32_t type_bits,
                          VkMemoryPropertyFlags want);

class VulkanDevice;

// A command list recording into one command buffer of `device` (vk_commands.cpp).
Result<std::unique_ptr<shader::CommandList>> create_command_list(VulkanDevice& device);

struct Pipeline {
  UniqueDescriptorSetLayout set_layout;
  UniquePipelineLayout layout;
  UniquePipeline pipeline;
};

// Work a command list submitted and stopped waiting for: its resources stay
// alive until its fence signals.
struct InFlight {
  UniqueFence fence;
  UniqueCommandPool pool;
  std::vector<UniqueDescriptorPool> descriptor_pools;
  // Buffers released while this work ran (it may still read them).
  std::vector<std::pair<UniqueBuffer, UniqueMemory>> released;
  UniqueQueryPool queries;  // the list's timestamps
};

class VulkanBuffer : public shader::Buffer {
 public:
  VulkanBuffer() = default;
  VulkanBuffer(const VulkanBuffer&) = delete;
  VulkanBuffer& operator=(const VulkanBuffer&) = delete;
  ~VulkanBuffer() override;  // frees now, or when running work that may use it ends
  uint64_t size() const override { return size_; }
  uint64_t capacity() const override { return capacity_; }
  bool mapped() const override { return mapped_ != nullptr; }
  VkBuffer handle() const { return buffer_.get(); }

 private:
  friend class VulkanDevice;
  VulkanDevice* owner_ = nullptr;
  uint64_t size_ = 0, capacity_ = 0;
  UniqueBuffer buffer_;
  UniqueMemory memory_;
  void* mapped_ = nullptr;  // non-null for host-visible memory
};

class VulkanDevice : public shader::Device {
  struct Key {};  // only open() constructs

 public:
  static Result<std::unique_ptr<VulkanDevice>> open(const Options& options,
                                                    const OpenConfig& config);
  explicit VulkanDevice(Key) {}
  VulkanDevice(const VulkanDevice&) = delete;
  VulkanDevice& operator=(const VulkanDevice&) = delete;
  ~VulkanDevice() override;

  const shader::DeviceInfo& info() const override { return core_->info; }
  const shader::KernelState& kernel(uint32_t index) const override { return kernels_[index]; }
  double timeout_s() const override { return timeout_s_; }
  using shader::Device::create_buffer;
  Result<std::unique_ptr<shader::Buffer>> create_buffer(uint64_t bytes,
                                                        shader::MemoryUse use) override;
  Status write_buffer(const shader::Buffer& buffer, uint64_t offset,
                      std::span<const std::byte> src) override;
  Status read_buffer(const shader::Buffer& buffer, uint64_t offset,
                     std::span<std::byte> dst) override;
  Result<std::unique_ptr<shader::CommandList>> begin_commands() override;

  // For the command lists.
  const Core& core() const { return *core_; }
  const Pipeline& pipeline(uint32_t index) const { return pipelines_[index]; }
  bool push_descriptors() const { return core_->push_descriptor != nullptr; }
  // How long a wait polls its fence before it blocks (wait_fence).
  shader::Clock::duration fence_spin() const { return fence_spin_; }
  // The buffer as this device's, or an error when it belongs to another one.
  Result<const VulkanBuffer*> own(const shader::Buffer* buffer) const;
  void keep_until_done(InFlight work);
  // Frees a buffer's handles, or keeps them until the work in flight ends.
  void release(UniqueBuffer buffer, UniqueMemory memory);

 private:
  Status create_pipelines(const OpenConfig& config);  // vk_pipelines.cpp
  Status create_pipeline(uint32_t index, bool with_push_descriptors);
  void reap_finished();
  Status prepare_transfer(uint64_t bytes);
  // Exactly one of upload (host -> buffer) and download (buffer -> host) is set.
  Status copy_through_staging(const VulkanBuffer& buffer, uint64_t offset, uint64_t bytes,
                              const std::byte* upload, std::byte* download);
  Status run_transfer(const VulkanBuffer& buffer, uint64_t offset, uint64_t bytes, bool to_device);
  // Device-local memory that the host maps, for MemoryUse::kHostAccess:
  // true when `b` got it, false where the hint falls back (no such memory
  // type for buffers, or its heap is full: `b` is left without memory).
  Result<bool> allocate_host_access(VulkanBuffer& b);

  std::unique_ptr<Core> core_;  // first: destroyed last
  double timeout_s_ = 10.0;
  shader::Clock::duration fence_spin_{};
  std::vector<Pipeline> pipelines_;           // one per embedded kernel (empty when unavailable)
  std::vector<shader::KernelState> kernels_;  // likewise
  std::vector<InFlight> in_flight_;
  // Host copies for memory that is not host visible.
  UniqueBuffer staging_buffer_;
  UniqueMemory staging_memory_;
  void* staging_map_ = nullptr;
  uint64_t staging_bytes_ = 0;
  UniqueCommandPool transfer_pool_;
  VkCommandBuffer transfer_cmd_ = VK_NULL_HANDLE;
  UniqueFence transfer_fence_;
  bool transfer_unfinished_ = false;  // a copy timed out: its fence may not have signalled
};

}  // namespace minfer::vulkan
