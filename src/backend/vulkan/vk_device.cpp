// VulkanDevice: open, teardown, command lists' bookkeeping.
#include "backend/vulkan/vk_device.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "backend/backend_options.h"
#include "backend/shader/kernel_table.h"
#include "base/log.h"

namespace minfer::vulkan {
namespace {

// How long teardown waits for work that a timed-out wait left running.
constexpr double kTeardownWaitS = 60.0;
// How long a wait polls its fence before blocking: about one decode step of
// a small model, so a step's wait rarely sleeps (docs/PERFORMANCE.md, "Constants and their
// measurements").
constexpr auto kFenceSpin = std::chrono::microseconds(2000);

const char* memory_kind(const Core& core) {
  if (core.info.unified_memory) return "unified";
  return core.host_access_memory ? "device-local, small buffers mapped" : "device-local";
}

std::string startup_line(const Core& core, size_t kernels_ready) {
  const shader::DeviceInfo& i = core.info;
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "Vulkan device %u: %s (%s; %s; %s; subgroup %u; %llu KiB shared; %s memory; %s; "
      "%zu kernels)",
      core.index, i.name.c_str(), i.type.c_str(), i.driver.c_str(), i.api.c_str(),
      i.limits.subgroup_size,
      static_cast<unsigned long long>(i.limits.max_shared_memory_bytes / 1024), memory_kind(core),
      core.push_descriptor != nullptr ? "push descriptors" : "descriptor pools", kernels_ready);
  return line;
}

// Everything a device still running work must keep: never destroyed.
struct Abandoned {
  std::unique_ptr<Core> core;
  std::vector<Pipeline> pipelines;
  std::vector<InFlight> in_flight;
  UniqueBuffer staging_buffer;
  UniqueMemory staging_memory;
  UniqueCommandPool transfer_pool;
  UniqueFence transfer_fence;
};

}  // namespace

Result<std::unique_ptr<shader::Device>> open_device(const Options& options,
                                                    const OpenConfig& config) {
  MINFER_ASSIGN_OR_RETURN(auto device, VulkanDevice::open(options, config));
  return std::unique_ptr<shader::Device>(std::move(device));
}

Result<std::unique_ptr<VulkanDevice>> VulkanDevice::open(const Options& options,
                                                         const OpenConfig& config) {
  auto d = std::make_unique<VulkanDevice>(Key{});
  MINFER_ASSIGN_OR_RETURN(d->core_, create_core(options, config));
  d->timeout_s_ = options.section<backend::GpuOptions>().gpu_timeout_s;
  // A CPU device computes on the host's cores: polling would take one from it.
  const bool on_cpu = d->core_->properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  d->fence_spin_ = on_cpu ? shader::Clock::duration::zero() : kFenceSpin;
  if (config.fence_spin_s >= 0) {
    d->fence_spin_ = std::chrono::duration_cast<shader::Clock::duration>(
        std::chrono::duration<double>(config.fence_spin_s));
  }
  const Status made = d->create_pipelines(config);
  if (!made.is_ok()) return made.with_context("Vulkan device " + d->core_->info.name);
  if (!config.quiet) {
    const size_t ready = static_cast<size_t>(
        std::count_if(d->kernels_.begin(), d->kernels_.end(),
                      [](const shader::KernelState& k) { return k.available; }));
    log_info(startup_line(*d->core_, ready));
  }
  return d;
}

VulkanDevice::~VulkanDevice() {
  if (!core_) return;
  const auto deadline = shader::Clock::now() + std::chrono::duration_cast<shader::Clock::duration>(
                                                   std::chrono::duration<double>(kTeardownWaitS));
  bool finished = true;
  for (InFlight& w : in_flight_) {
    const Result<bool> done = wait_fence(core_->device, w.fence.get(), deadline);
    finished = finished && done.is_ok() && *done;
  }
  if (transfer_unfinished_) {
    const Result<bool> done = wait_fence(core_->device, transfer_fence_.get(), deadline);
    finished = finished && done.is_ok() && *done;
  }
  if (finished) return;  // the members go in reverse order, core_ last
  // Destroying what the device still uses is undefined: keep all of it.
  log_warning("Vulkan: " + core_->info.name + " still runs work " +
              std::to_string(static_cast<int>(kTeardownWaitS)) +
              " s after its wait timed out; leaving the device open");
  auto kept = std::make_unique<Abandoned>();
  kept->core = std::move(core_);
  kept->pipelines = std::move(pipelines_);
  kept->in_flight = std::move(in_flight_);
  kept->staging_buffer = std::move(staging_buffer_);
  kept->staging_memory = std::move(staging_memory_);
  kept->transfer_pool = std::move(transfer_pool_);
  kept->transfer_fence = std::move(transfer_fence_);
  (void)kept.release();  // deliberately leaked
}

Result<const VulkanBuffer*> VulkanDevice::own(const shader::Buffer* buffer) const {
  const auto* b = dynamic_cast<const VulkanBuffer*>(buffer);
  if (b == nullptr || b->owner_ != this) {
    return Status::invalid_argument("a buffer of another device bound to " + info().name);
  }
  return b;
}

void VulkanDevice::keep_until_done(InFlight work) {
  in_flight_.push_back(std::move(work));
}

void VulkanDevice::release(UniqueBuffer buffer, UniqueMemory memory) {
  reap_finished();
  // The queue runs in order: the newest work in flight is the last to end.
  if (!in_flight_.empty())
    in_flight_.back().released.emplace_back(std::move(buffer), std::move(memory));
}

VulkanBuffer::~VulkanBuffer() {
  if (owner_ != nullptr) owner_->release(std::move(buffer_), std::move(memory_));
}

void VulkanDevice::reap_finished() {
  std::erase_if(in_flight_, [&](const InFlight& w) {
    return vkGetFenceStatus(core_->device, w.fence.get()) != VK_NOT_READY;
  });
}

Result<std::unique_ptr<shader::CommandList>> VulkanDevice::begin_commands() {
  reap_finished();
  return create_command_list(*this);
}

}  // namespace minfer::vulkan
