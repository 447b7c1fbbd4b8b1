#include "backend/vulkan/vk_check.h"

#include <cstring>
#include <string>

namespace minfer::vulkan {

const char* vk_result_name(VkResult result) {
  switch (result) {
#define MINFER_VK_RESULT_CASE(name) \
  case name:                        \
    return #name;
    MINFER_VK_RESULT_CASE(VK_SUCCESS)
    MINFER_VK_RESULT_CASE(VK_NOT_READY)
    MINFER_VK_RESULT_CASE(VK_TIMEOUT)
    MINFER_VK_RESULT_CASE(VK_EVENT_SET)
    MINFER_VK_RESULT_CASE(VK_EVENT_RESET)
    MINFER_VK_RESULT_CASE(VK_INCOMPLETE)
    MINFER_VK_RESULT_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    MINFER_VK_RESULT_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    MINFER_VK_RESULT_CASE(VK_ERROR_INITIALIZATION_FAILED)
    MINFER_VK_RESULT_CASE(VK_ERROR_DEVICE_LOST)
    MINFER_VK_RESULT_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    MINFER_VK_RESULT_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    MINFER_VK_RESULT_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    MINFER_VK_RESULT_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    MINFER_VK_RESULT_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    MINFER_VK_RESULT_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    MINFER_VK_RESULT_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    MINFER_VK_RESULT_CASE(VK_ERROR_FRAGMENTED_POOL)
    MINFER_VK_RESULT_CASE(VK_ERROR_UNKNOWN)
    MINFER_VK_RESULT_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    MINFER_VK_RESULT_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    MINFER_VK_RESULT_CASE(VK_ERROR_FRAGMENTATION)
    MINFER_VK_RESULT_CASE(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    MINFER_VK_RESULT_CASE(VK_PIPELINE_COMPILE_REQUIRED)
#undef MINFER_VK_RESULT_CASE
    default:
      return "VkResult (unnamed)";
  }
}

Status vk_error(VkResult result, const char* call, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  StatusCode code = StatusCode::kInternal;
  if (result == VK_ERROR_OUT_OF_HOST_MEMORY || result == VK_ERROR_OUT_OF_DEVICE_MEMORY ||
      result == VK_ERROR_OUT_OF_POOL_MEMORY || result == VK_ERROR_FRAGMENTED_POOL) {
    code = StatusCode::kResourceExhausted;  // may pass with less
  } else if (result == VK_ERROR_DEVICE_LOST || result == VK_ERROR_INCOMPATIBLE_DRIVER ||
             result == VK_ERROR_INITIALIZATION_FAILED) {
    code = StatusCode::kUnavailable;
  }
  std::string name = vk_result_name(result);
  if (name == "VkResult (unnamed)") name = "VkResult " + std::to_string(static_cast<int>(result));
  return Status::error(code, "Vulkan error " + name + " in " + call + " at " +
                                 (base != nullptr ? base + 1 : file) + ":" + std::to_string(line));
}

}  // namespace minfer::vulkan
