// Buffers and host copies: mapped memory where it is host visible (unified
// memory, or a kHostAccess buffer in a BAR heap), else a staging buffer and a
// copy command waited for with the deadline; and the fence wait itself.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "backend/vulkan/vk_device.h"

namespace minfer::vulkan {
namespace {

constexpr uint64_t kStagingBytes = 64ull << 20;  // host copies go in chunks of this
// Host reads of a BAR mapping are uncached: past this size a staging copy is
// faster. Writes are posted: always memcpy (docs/PERFORMANCE.md, "Constants and their
// measurements").
constexpr uint64_t kMappedReadMaxBytes = 512;
constexpr VkBufferUsageFlags kBufferUsage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_DST_BIT;

uint64_t round_up(uint64_t v, uint64_t to) {
  return (v + to - 1) / to * to;
}

shader::Clock::time_point deadline_after(double seconds) {
  return shader::Clock::now() + std::chrono::duration_cast<shader::Clock::duration>(
                                    std::chrono::duration<double>(seconds));
}

Status check_range(const shader::Buffer& b, uint64_t offset, uint64_t bytes, const char* what) {
  if (offset > b.size() || bytes > b.size() - offset) {
    return Status::invalid_argument(std::string(what) + " of " + std::to_string(bytes) +
                                    " bytes at offset " + std::to_string(offset) +
                                    " past a buffer of " + std::to_string(b.size()));
  }
  return Status::ok();
}

// A VkBuffer with its own memory of a type that has `want`.
Status allocate(const Core& core, uint64_t bytes, VkBufferUsageFlags usage,
                VkMemoryPropertyFlags want, UniqueBuffer& buffer, UniqueMemory& memory) {
  auto bi = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  bi.size = bytes;
  bi.usage = usage;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer b = VK_NULL_HANDLE;
  MINFER_VK_CHECK(vkCreateBuffer(core.device, &bi, nullptr, &b));
  buffer = UniqueBuffer(core.device, b);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(core.device, b, &req);
  const uint32_t type = find_memory_type(core.memory, req.memoryTypeBits, want);
  if (type == UINT32_MAX) {
    return Status::unavailable(core.info.name + " has no memory type with flags " +
                               std::to_string(want) + " for buffers");
  }
  auto ai = vk_struct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  VkDeviceMemory m = VK_NULL_HANDLE;
  const VkResult r = vkAllocateMemory(core.device, &ai, nullptr, &m);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
    return Status::resource_exhausted("Vulkan: allocating " + std::to_string(bytes) + " bytes on " +
                                      core.info.name + " failed: " + vk_result_name(r));
  }
  MINFER_VK_CHECK(r);
  memory = UniqueMemory(core.device, m);
  MINFER_VK_CHECK(vkBindBufferMemory(core.device, b, m, 0));
  return Status::ok();
}

}  // namespace

Result<bool> wait_fence(VkDevice device, VkFence fence, shader::Clock::time_point deadline,
                        shader::Clock::duration spin) {
  if (spin > shader::Clock::duration::zero()) {
    const auto spin_end = std::min(deadline, shader::Clock::now() + spin);
    for (;;) {
      const VkResult r = vkGetFenceStatus(device, fence);
      if (r == VK_SUCCESS) return true;
      if (r != VK_NOT_READY) MINFER_VK_CHECK(r);
      if (shader::Clock::now() >= spin_end) break;
      std::this_thread::yield();
    }
  }
  for (;;) {
    const auto now = shader::Clock::now();
    const uint64_t ns =
        now >= deadline
            ? 0
            : static_cast<uint64_t>(
                  std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now).count());
    const VkResult r = vkWaitForFences(device, 1, &fence, VK_TRUE, ns);
    if (r == VK_SUCCESS) return true;
    if (r != VK_TIMEOUT) MINFER_VK_CHECK(r);
    if (shader::Clock::now() >= deadline) return false;
  }
}

Result<std::unique_ptr<shader::Buffer>> VulkanDevice::create_buffer(uint64_t bytes,
                                                                    shader::MemoryUse use) {
  reap_finished();
  auto b = std::make_unique<VulkanBuffer>();
  b->owner_ = this;
  b->size_ = bytes;
  b->capacity_ = round_up(std::max<uint64_t>(bytes, 1), 16);
  if (use == shader::MemoryUse::kHostAccess && core_->host_access_memory) {
    MINFER_ASSIGN_OR_RETURN(const bool made, allocate_host_access(*b));
    if (made) return std::unique_ptr<shader::Buffer>(std::move(b));
  }
  const bool mapped = info().unified_memory;
  MINFER_RETURN_IF_ERROR(allocate(
      *core_, b->capacity_, kBufferUsage,
      mapped ? kMappedDeviceMemory : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, b->buffer_, b->memory_));
  if (mapped) {
    MINFER_VK_CHECK(vkMapMemory(core_->device, b->memory_.get(), 0, VK_WHOLE_SIZE, 0, &b->mapped_));
  }
  return std::unique_ptr<shader::Buffer>(std::move(b));
}

Result<bool> VulkanDevice::allocate_host_access(VulkanBuffer& b) {
  const Status s =
      allocate(*core_, b.capacity_, kBufferUsage, kMappedDeviceMemory, b.buffer_, b.memory_);
  if (!s.is_ok()) {
    b.memory_.reset();
    b.buffer_.reset();
    // No such type for storage buffers, or the heap (256 MiB of BAR on GPUs
    // without resizable BAR) is full: the hint falls back.
    const StatusCode c = s.code();
    if (c == StatusCode::kUnavailable || c == StatusCode::kResourceExhausted) return false;
    return s;
  }
  MINFER_VK_CHECK(vkMapMemory(core_->device, b.memory_.get(), 0, VK_WHOLE_SIZE, 0, &b.mapped_));
  return true;
}

Status VulkanDevice::write_buffer(const shader::Buffer& buffer, uint64_t offset,
                                  std::span<const std::byte> src) {
  MINFER_ASSIGN_OR_RETURN(const VulkanBuffer* b, own(&buffer));
  MINFER_RETURN_IF_ERROR(check_range(buffer, offset, src.size(), "write"));
  if (src.empty()) return Status::ok();
  if (b->mapped_ != nullptr) {
    std::memcpy(static_cast<std::byte*>(b->mapped_) + offset, src.data(), src.size());
    return Status::ok();
  }
  return copy_through_staging(*b, offset, src.size(), src.data(), nullptr);
}

Status VulkanDevice::read_buffer(const shader::Buffer& buffer, uint64_t offset,
                                 std::span<std::byte> dst) {
  MINFER_ASSIGN_OR_RETURN(const VulkanBuffer* b, own(&buffer));
  MINFER_RETURN_IF_ERROR(check_range(buffer, offset, dst.size(), "read"));
  if (dst.empty()) return Status::ok();
  if (b->mapped_ != nullptr && (info().unified_memory || dst.size() <= kMappedReadMaxBytes)) {
    std::memcpy(dst.data(), static_cast<const std::byte*>(b->mapped_) + offset, dst.size());
    return Status::ok();
  }
  return copy_through_staging(*b, offset, dst.size(), nullptr, dst.data());
}

Status VulkanDevice::prepare_transfer(uint64_t bytes) {
  const VkDevice dev = core_->device;
  if (!transfer_pool_) {
    auto pi = vk_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pi.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
    pi.queueFamilyIndex = core_->queue_family;
    VkCommandPool pool = VK_NULL_HANDLE;
    MINFER_VK_CHECK(vkCreateCommandPool(dev, &pi, nullptr, &pool));
    transfer_pool_ = UniqueCommandPool(dev, pool);
    auto ai =
        vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    ai.commandPool = pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    MINFER_VK_CHECK(vkAllocateCommandBuffers(dev, &ai, &transfer_cmd_));
    auto fi = vk_struct<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    VkFence fence = VK_NULL_HANDLE;
    MINFER_VK_CHECK(vkCreateFence(dev, &fi, nullptr, &fence));
    transfer_fence_ = UniqueFence(dev, fence);
  }
  if (staging_bytes_ >= bytes) return Status::ok();
  staging_map_ = nullptr;
  staging_memory_.reset();
  staging_buffer_.reset();
  staging_bytes_ = 0;
  MINFER_RETURN_IF_ERROR(
      allocate(*core_, bytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
               VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
               staging_buffer_, staging_memory_));
  MINFER_VK_CHECK(vkMapMemory(dev, staging_memory_.get(), 0, VK_WHOLE_SIZE, 0, &staging_map_));
  staging_bytes_ = bytes;
  return Status::ok();
}

Status VulkanDevice::copy_through_staging(const VulkanBuffer& buffer, uint64_t offset,
                                          uint64_t bytes, const std::byte* upload,
                                          std::byte* download) {
  MINFER_RETURN_IF_ERROR(prepare_transfer(std::min(bytes, kStagingBytes)));
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(bytes - done, staging_bytes_);
    if (upload != nullptr) std::memcpy(staging_map_, upload + done, n);
    MINFER_RETURN_IF_ERROR(run_transfer(buffer, offset + done, n, upload != nullptr));
    if (download != nullptr) std::memcpy(download + done, staging_map_, n);
    done += n;
  }
  return Status::ok();
}

Status VulkanDevice::run_transfer(const VulkanBuffer& buffer, uint64_t offset, uint64_t bytes,
                                  bool to_device) {
  const VkDevice dev = core_->device;
  if (transfer_unfinished_) {
    if (vkGetFenceStatus(dev, transfer_fence_.get()) == VK_NOT_READY) {
      return Status::unavailable("Vulkan: an earlier host copy on " + info().name +
                                 " has still not finished");
    }
    transfer_unfinished_ = false;
  }
  MINFER_VK_CHECK(vkResetCommandPool(dev, transfer_pool_.get(), 0));
  auto bi = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  MINFER_VK_CHECK(vkBeginCommandBuffer(transfer_cmd_, &bi));
  const VkBufferCopy region{to_device ? 0 : offset, to_device ? offset : 0, bytes};
  const VkBuffer staging = staging_buffer_.get(), target = buffer.buffer_.get();
  vkCmdCopyBuffer(transfer_cmd_, to_device ? staging : target, to_device ? target : staging, 1,
                  &region);
  // Uploads become visible to later kernels; downloads to the host.
  auto mb = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask =
      to_device ? VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT : VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(
      transfer_cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT,
      to_device ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT : VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0,
      nullptr, 0, nullptr);
  MINFER_VK_CHECK(vkEndCommandBuffer(transfer_cmd_));
  const VkFence fence = transfer_fence_.get();
  MINFER_VK_CHECK(vkResetFences(dev, 1, &fence));
  auto si = vk_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
  si.commandBufferCount = 1;
  si.pCommandBuffers = &transfer_cmd_;
  MINFER_VK_CHECK(vkQueueSubmit(core_->queue, 1, &si, fence));
  MINFER_ASSIGN_OR_RETURN(const bool done,
                          wait_fence(dev, fence, deadline_after(timeout_s_), fence_spin_));
  if (!done) {
    transfer_unfinished_ = true;
    return Status::unavailable("Vulkan: a host copy of " + std::to_string(bytes) + " bytes on " +
                               info().name + " did not finish within " +
                               std::to_string(timeout_s_) + " s (MINFER_GPU_TIMEOUT)");
  }
  return Status::ok();
}

}  // namespace minfer::vulkan
