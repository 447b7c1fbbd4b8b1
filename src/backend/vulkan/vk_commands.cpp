// The command list: dispatches and barriers recorded into one command
// buffer, submitted once with a fence, waited for with a deadline.
#include <array>
#include <string>

#include "backend/shader/kernel_table.h"
#include "backend/vulkan/vk_device.h"

namespace minfer::vulkan {
namespace {

constexpr size_t kMaxBindings = 16;
constexpr uint32_t kSetsPerPool = 256;

class VulkanCommandList : public shader::CommandList {
 public:
  explicit VulkanCommandList(VulkanDevice& device) : device_(device) {}
  VulkanCommandList(const VulkanCommandList&) = delete;
  VulkanCommandList& operator=(const VulkanCommandList&) = delete;
  ~VulkanCommandList() override;

  Status begin();
  Status dispatch(uint32_t kernel, std::span<const shader::BufferRange> bindings,
                  std::span<const std::byte> push, shader::Groups groups) override;
  Status barrier(std::span<const shader::Buffer* const> buffers) override;
  Status submit() override;
  Result<bool> wait(shader::Clock::time_point deadline) override;
  bool reusable() const override { return true; }
  Status resubmit() override;
  Status write_timestamp() override;
  Result<std::vector<uint64_t>> timestamps() override;

 private:
  static constexpr uint32_t kMaxTimestamps = 8192;
  enum class State { kRecording, kSubmitted, kDone };
  Result<VkDescriptorSet> allocate_set(VkDescriptorSetLayout layout);
  Status add_descriptor_pool();

  VulkanDevice& device_;
  UniqueCommandPool pool_;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  UniqueFence fence_;
  std::vector<UniqueDescriptorPool> descriptor_pools_;  // without push descriptors
  UniqueQueryPool queries_;                             // made on the first timestamp
  uint32_t n_timestamps_ = 0;
  uint32_t bound_kernel_ = UINT32_MAX;
  State state_ = State::kRecording;
};

VulkanCommandList::~VulkanCommandList() {
  if (state_ != State::kSubmitted) return;
  // Still running (a wait timed out): the device keeps what the work uses.
  if (vkGetFenceStatus(device_.core().device, fence_.get()) == VK_NOT_READY) {
    device_.keep_until_done({std::move(fence_),
                             std::move(pool_),
                             std::move(descriptor_pools_),
                             {},
                             std::move(queries_)});
  }
}

Status VulkanCommandList::begin() {
  const VkDevice dev = device_.core().device;
  auto pi = vk_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  pi.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pi.queueFamilyIndex = device_.core().queue_family;
  VkCommandPool pool = VK_NULL_HANDLE;
  MINFER_VK_CHECK(vkCreateCommandPool(dev, &pi, nullptr, &pool));
  pool_ = UniqueCommandPool(dev, pool);
  auto ai = vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  ai.commandPool = pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  MINFER_VK_CHECK(vkAllocateCommandBuffers(dev, &ai, &cmd_));
  auto fi = vk_struct<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
  VkFence fence = VK_NULL_HANDLE;
  MINFER_VK_CHECK(vkCreateFence(dev, &fi, nullptr, &fence));
  fence_ = UniqueFence(dev, fence);
  auto bi = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  MINFER_VK_CHECK(vkBeginCommandBuffer(cmd_, &bi));  // resubmittable (replay)
  return Status::ok();
}

Status VulkanCommandList::add_descriptor_pool() {
  const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                  kSetsPerPool * static_cast<uint32_t>(kMaxBindings)};
  auto ci = vk_struct<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
  ci.maxSets = kSetsPerPool;
  ci.poolSizeCount = 1;
  ci.pPoolSizes = &size;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  MINFER_VK_CHECK(vkCreateDescriptorPool(device_.core().device, &ci, nullptr, &pool));
  descriptor_pools_.emplace_back(device_.core().device, pool);
  return Status::ok();
}

Result<VkDescriptorSet> VulkanCommandList::allocate_set(VkDescriptorSetLayout layout) {
  if (descriptor_pools_.empty()) MINFER_RETURN_IF_ERROR(add_descriptor_pool());
  auto ai = vk_struct<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  ai.descriptorPool = descriptor_pools_.back().get();
  VkResult r = vkAllocateDescriptorSets(device_.core().device, &ai, &set);
  if (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL) {
    MINFER_RETURN_IF_ERROR(add_descriptor_pool());  // this one is full: the next
    ai.descriptorPool = descriptor_pools_.back().get();
    r = vkAllocateDescriptorSets(device_.core().device, &ai, &set);
  }
  MINFER_VK_CHECK(r);
  return set;
}

Status VulkanCommandList::dispatch(uint32_t kernel, std::span<const shader::BufferRange> bindings,
                                   std::span<const std::byte> push, shader::Groups groups) {
  if (state_ != State::kRecording) return Status::internal("dispatch into a submitted list");
  if (bindings.size() > kMaxBindings) {
    return Status::internal(std::to_string(bindings.size()) + " bindings (at most 16)");
  }
  const Pipeline& p = device_.pipeline(kernel);
  std::array<VkDescriptorBufferInfo, kMaxBindings> infos{};
  std::array<VkWriteDescriptorSet, kMaxBindings> writes{};
  for (uint32_t i = 0; i < bindings.size(); ++i) {
    MINFER_ASSIGN_OR_RETURN(const VulkanBuffer* b, device_.own(bindings[i].buffer));
    infos[i] = {b->handle(), bindings[i].offset,
                bindings[i].size == 0 ? VK_WHOLE_SIZE : bindings[i].size};
    writes[i] = vk_struct<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  const auto n = static_cast<uint32_t>(bindings.size());
  if (bound_kernel_ != kernel) {
    vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline.get());
    bound_kernel_ = kernel;
  }
  if (device_.push_descriptors()) {
    device_.core().push_descriptor(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout.get(), 0, n,
                                   writes.data());
  } else {
    MINFER_ASSIGN_OR_RETURN(const VkDescriptorSet set, allocate_set(p.set_layout.get()));
    for (uint32_t i = 0; i < n; ++i) writes[i].dstSet = set;
    vkUpdateDescriptorSets(device_.core().device, n, writes.data(), 0, nullptr);
    vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout.get(), 0, 1, &set, 0,
                            nullptr);
  }
  if (!push.empty()) {
    vkCmdPushConstants(cmd_, p.layout.get(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       static_cast<uint32_t>(push.size()), push.data());
  }
  vkCmdDispatch(cmd_, groups.x, groups.y, groups.z);
  return Status::ok();
}

Status VulkanCommandList::barrier(std::span<const shader::Buffer* const> buffers) {
  if (state_ != State::kRecording) return Status::internal("barrier in a submitted list");
  std::vector<VkBufferMemoryBarrier> barriers;
  barriers.reserve(buffers.size());
  for (const shader::Buffer* buffer : buffers) {
    MINFER_ASSIGN_OR_RETURN(const VulkanBuffer* b, device_.own(buffer));
    auto mb = vk_struct<VkBufferMemoryBarrier>(VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    mb.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    mb.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    mb.buffer = b->handle();
    mb.offset = 0;
    mb.size = VK_WHOLE_SIZE;
    barriers.push_back(mb);
  }
  vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 0, nullptr,
                       static_cast<uint32_t>(barriers.size()), barriers.data(), 0, nullptr);
  return Status::ok();
}

Status VulkanCommandList::submit() {
  if (state_ != State::kRecording) return Status::internal("a command list submitted twice");
  // Everything the kernels wrote becomes visible to host reads and to copies.
  auto mb = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
  vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                       nullptr, 0, nullptr);
  MINFER_VK_CHECK(vkEndCommandBuffer(cmd_));
  auto si = vk_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  MINFER_VK_CHECK(vkQueueSubmit(device_.core().queue, 1, &si, fence_.get()));
  state_ = State::kSubmitted;
  return Status::ok();
}

Result<bool> VulkanCommandList::wait(shader::Clock::time_point deadline) {
  if (state_ == State::kDone) return true;
  if (state_ != State::kSubmitted) return Status::internal("wait on a list never submitted");
  MINFER_ASSIGN_OR_RETURN(const bool done, wait_fence(device_.core().device, fence_.get(), deadline,
                                                      device_.fence_spin()));
  if (done) state_ = State::kDone;
  return done;
}

Status VulkanCommandList::resubmit() {
  if (state_ != State::kDone) return Status::internal("resubmit of a list still running");
  if (n_timestamps_ > 0) return Status::unimplemented("resubmit of a list with timestamps");
  const VkFence fence = fence_.get();
  MINFER_VK_CHECK(vkResetFences(device_.core().device, 1, &fence));
  auto si = vk_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  MINFER_VK_CHECK(vkQueueSubmit(device_.core().queue, 1, &si, fence));
  state_ = State::kSubmitted;
  return Status::ok();
}

Status VulkanCommandList::write_timestamp() {
  if (state_ != State::kRecording) return Status::internal("timestamp in a submitted list");
  if (device_.info().timestamp_period_ns <= 0) {
    return Status::unimplemented(device_.info().name + " has no timestamps on its compute queue");
  }
  if (n_timestamps_ == kMaxTimestamps) {
    return Status::resource_exhausted("more than " + std::to_string(kMaxTimestamps) +
                                      " timestamps in one submission");
  }
  if (!queries_) {
    auto ci = vk_struct<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
    ci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    ci.queryCount = kMaxTimestamps;
    VkQueryPool pool = VK_NULL_HANDLE;
    MINFER_VK_CHECK(vkCreateQueryPool(device_.core().device, &ci, nullptr, &pool));
    queries_ = UniqueQueryPool(device_.core().device, pool);
    vkCmdResetQueryPool(cmd_, pool, 0, kMaxTimestamps);
  }
  vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_.get(), n_timestamps_++);
  return Status::ok();
}

Result<std::vector<uint64_t>> VulkanCommandList::timestamps() {
  std::vector<uint64_t> out(n_timestamps_);
  if (n_timestamps_ == 0) return out;
  if (state_ != State::kDone) return Status::internal("timestamps of a list not yet done");
  MINFER_VK_CHECK(vkGetQueryPoolResults(device_.core().device, queries_.get(), 0, n_timestamps_,
                                        out.size() * sizeof(uint64_t), out.data(), sizeof(uint64_t),
                                        VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
  return out;
}

}  // namespace

Result<std::unique_ptr<shader::CommandList>> create_command_list(VulkanDevice& device) {
  auto list = std::make_unique<VulkanCommandList>(device);
  MINFER_RETURN_IF_ERROR(list->begin());
  return std::unique_ptr<shader::CommandList>(std::move(list));
}

}  // namespace minfer::vulkan
