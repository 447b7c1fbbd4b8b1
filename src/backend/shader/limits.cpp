#include "backend/shader/limits.h"

#include <string>

namespace minfer::shader {
namespace {

std::string num(uint64_t v) {
  return std::to_string(v);
}

Status past_limit(const KernelInfo& k, const std::string& what, uint64_t value,
                  const std::string& limit, uint64_t limit_value) {
  return Status::out_of_range(k.label() + ": " + what + " " + num(value) +
                              " exceeds the device's " + limit + " = " + num(limit_value));
}

Status check_binding(const DeviceLimits& limits, const KernelInfo& k, size_t i,
                     const BufferRange& b) {
  const std::string name = "binding " + num(i) + " (" +
                           std::string(i < k.bindings.size() ? k.bindings[i].name : "?") + ")";
  if (b.buffer == nullptr)
    return Status::invalid_argument(k.label() + ": " + name + " has no buffer");
  const uint64_t capacity = b.buffer->capacity();
  const uint64_t align = limits.min_storage_buffer_offset_alignment;
  if (align > 1 && b.offset % align != 0) {
    return Status::invalid_argument(
        k.label() + ": " + name + " offset " + num(b.offset) +
        " is not a multiple of minStorageBufferOffsetAlignment = " + num(align));
  }
  if (b.offset >= capacity) {
    return Status::invalid_argument(k.label() + ": " + name + " offset " + num(b.offset) +
                                    " is past the buffer's " + num(capacity) + " bytes");
  }
  const uint64_t range = b.size == 0 ? capacity - b.offset : b.size;
  if (range > capacity - b.offset) {
    return Status::invalid_argument(k.label() + ": " + name + " range " + num(b.offset) + " + " +
                                    num(range) + " is past the buffer's " + num(capacity) +
                                    " bytes");
  }
  if (range > limits.max_storage_buffer_range) {
    return past_limit(k, name + " range of", range, "maxStorageBufferRange",
                      limits.max_storage_buffer_range);
  }
  return Status::ok();
}

}  // namespace

Status check_kernel_fits(const DeviceLimits& limits, const KernelInfo& k, uint64_t shared_bytes) {
  static const char* const kAxis[] = {"x", "y", "z"};
  for (int a = 0; a < 3; ++a) {
    if (k.workgroup[a] > limits.max_workgroup_size[a]) {
      return past_limit(k, std::string("workgroup size in ") + kAxis[a], k.workgroup[a],
                        std::string("maxComputeWorkGroupSize[") + num(a) + "]",
                        limits.max_workgroup_size[a]);
    }
  }
  if (k.invocations() > limits.max_workgroup_invocations) {
    return past_limit(k, "workgroup of", k.invocations(), "maxComputeWorkGroupInvocations",
                      limits.max_workgroup_invocations);
  }
  if (shared_bytes > limits.max_shared_memory_bytes) {
    return past_limit(k, "shared memory of", shared_bytes, "maxComputeSharedMemorySize",
                      limits.max_shared_memory_bytes);
  }
  if (k.push_size > limits.max_push_constant_bytes) {
    return past_limit(k, "push constants of", k.push_size, "maxPushConstantsSize",
                      limits.max_push_constant_bytes);
  }
  return Status::ok();
}

Status check_dispatch(const DeviceLimits& limits, const KernelInfo& k, const KernelState& state,
                      std::span<const BufferRange> bindings, size_t push_bytes, Groups groups) {
  if (!state.available) {
    return Status::unimplemented(k.label() +
                                 " has no pipeline on this device: " + state.unavailable_reason);
  }
  if (bindings.size() != k.bindings.size()) {
    return Status::invalid_argument(k.label() + ": " + num(bindings.size()) +
                                    " bindings given, its manifest declares " +
                                    num(k.bindings.size()));
  }
  if (push_bytes != k.push_size) {
    return Status::invalid_argument(k.label() + ": " + num(push_bytes) +
                                    " bytes of push constants given, " + std::string(k.args) +
                                    " has " + num(k.push_size));
  }
  MINFER_RETURN_IF_ERROR(check_kernel_fits(limits, k, state.shared_bytes));
  const uint32_t counts[3] = {groups.x, groups.y, groups.z};
  static const char* const kAxis[] = {"x", "y", "z"};
  for (int a = 0; a < 3; ++a) {
    if (counts[a] == 0) {
      return Status::invalid_argument(k.label() + ": zero workgroups in " + kAxis[a]);
    }
    if (counts[a] > limits.max_workgroup_count[a]) {
      return past_limit(k, std::string("workgroup count in ") + kAxis[a], counts[a],
                        std::string("maxComputeWorkGroupCount[") + num(a) + "]",
                        limits.max_workgroup_count[a]);
    }
  }
  for (size_t i = 0; i < bindings.size(); ++i) {
    MINFER_RETURN_IF_ERROR(check_binding(limits, k, i, bindings[i]));
  }
  return Status::ok();
}

Result<Groups> fold_groups(uint64_t n, const DeviceLimits& limits) {
  const uint64_t x_max = limits.max_workgroup_count[0], y_max = limits.max_workgroup_count[1];
  if (n == 0) return Status::invalid_argument("a grid of zero workgroups");
  if (x_max == 0 || n > x_max * y_max) {
    return Status::out_of_range("a grid of " + num(n) + " workgroups exceeds the device's " +
                                "maxComputeWorkGroupCount[0] * [1] = " + num(x_max) + " * " +
                                num(y_max));
  }
  Groups g;
  g.x = static_cast<uint32_t>(n < x_max ? n : x_max);
  g.y = static_cast<uint32_t>((n + g.x - 1) / g.x);
  return g;
}

}  // namespace minfer::shader
