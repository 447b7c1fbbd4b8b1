// One compute pipeline per embedded kernel, created at open: each module's
// SPIR-V is read (gpu/spirv_reflect.h) and checked against its manifest
// entry and against the device's features and limits first.
#include <map>
#include <string>
#include <vector>

#include "backend/gpu/kernel_table.h"
#include "backend/gpu/limits.h"
#include "backend/gpu/spirv_reflect.h"
#include "backend/vulkan/vk_device.h"

namespace minfer::vulkan {
namespace {

// Whether the device has what SPIR-V `capability` needs.
bool device_has(const gpu::DeviceFeatures& f, uint32_t capability) {
  namespace c = gpu::spirv_capability;
  switch (capability) {
    case c::kShader:
      return true;
    case c::kGroupNonUniform:
    case c::kGroupNonUniformArithmetic:
      return f.subgroup_arithmetic;
    case c::kStorageBuffer16BitAccess:
      return f.storage_buffer_16bit;
    case c::kStorageBuffer8BitAccess:
      return f.storage_buffer_8bit;
    case c::kFloat16:
      return f.shader_float16;
    case c::kInt8:
      return f.shader_int8;
    case c::kDotProduct:
    case c::kDotProductInput4x8BitPacked:
      return f.integer_dot_product;
    default:
      return false;  // not probed: not assumed
  }
}

// What the SPIR-V must agree on with the kernel's manifest (a disagreement
// is a broken build: an error, not an unavailable variant).
Status check_against_manifest(const gpu::KernelInfo& k, const gpu::SpirvInfo& r) {
  if (r.local_size != k.workgroup) {
    return Status::internal(k.label() + ": SPIR-V LocalSize " + std::to_string(r.local_size[0]) +
                            "x" + std::to_string(r.local_size[1]) + "x" +
                            std::to_string(r.local_size[2]) + " differs from its manifest's " +
                            std::to_string(k.workgroup[0]) + "x" + std::to_string(k.workgroup[1]) +
                            "x" + std::to_string(k.workgroup[2]));
  }
  for (uint32_t b : r.bindings) {
    if (b >= k.bindings.size()) {
      return Status::internal(k.label() + ": the kernel uses binding " + std::to_string(b) +
                              ", its manifest declares " + std::to_string(k.bindings.size()));
    }
  }
  if (r.push_constant_bytes != k.push_size) {
    return Status::internal(k.label() + ": its push-constant block has " +
                            std::to_string(r.push_constant_bytes) + " bytes, sizeof(" +
                            std::string(k.args.empty() ? "none" : k.args) + ") is " +
                            std::to_string(k.push_size));
  }
  return Status::ok();
}

}  // namespace

Status VulkanDevice::create_pipeline(uint32_t index, bool with_push_descriptors) {
  const gpu::KernelInfo& k = gpu::embedded_kernels()[index];
  const VkDevice dev = core_->device;
  std::vector<VkDescriptorSetLayoutBinding> bindings(k.bindings.size());
  for (uint32_t i = 0; i < bindings.size(); ++i) {
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  }
  auto dl = vk_struct<VkDescriptorSetLayoutCreateInfo>(
      VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  if (with_push_descriptors) dl.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  dl.bindingCount = static_cast<uint32_t>(bindings.size());
  dl.pBindings = bindings.data();
  Pipeline& p = pipelines_[index];
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  MINFER_VK_CHECK(vkCreateDescriptorSetLayout(dev, &dl, nullptr, &set_layout));
  p.set_layout = UniqueDescriptorSetLayout(dev, set_layout);

  const VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, k.push_size};
  auto pl = vk_struct<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &set_layout;
  pl.pushConstantRangeCount = k.push_size > 0 ? 1 : 0;
  pl.pPushConstantRanges = &range;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  MINFER_VK_CHECK(vkCreatePipelineLayout(dev, &pl, nullptr, &layout));
  p.layout = UniquePipelineLayout(dev, layout);

  auto mi = vk_struct<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  mi.codeSize = k.spirv.size_bytes();
  mi.pCode = k.spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  MINFER_VK_CHECK(vkCreateShaderModule(dev, &mi, nullptr, &module));
  const UniqueShaderModule module_owner(dev, module);  // not needed past creation

  auto ci = vk_struct<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  ci.stage = vk_struct<VkPipelineShaderStageCreateInfo>(
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.layout = layout;
  VkPipeline pipeline = VK_NULL_HANDLE;
  MINFER_VK_CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, nullptr, &pipeline));
  p.pipeline = UniquePipeline(dev, pipeline);
  return Status::ok();
}

Status VulkanDevice::create_pipelines(const OpenConfig& config) {
  const std::span<const gpu::KernelInfo> table = gpu::embedded_kernels();
  pipelines_.resize(table.size());
  kernels_.resize(table.size());
  for (uint32_t i = 0; i < table.size(); ++i) {
    const gpu::KernelInfo& k = table[i];
    gpu::KernelState& st = kernels_[i];
    if (k.test_only && !config.test_kernels) {
      st.unavailable_reason = "a test-only kernel (the device was not opened for tests)";
      continue;
    }
    auto reflected = gpu::reflect_spirv(k.spirv);
    if (!reflected.is_ok()) return reflected.status().with_context(k.label());
    MINFER_RETURN_IF_ERROR(check_against_manifest(k, *reflected));
    st.shared_bytes = reflected->workgroup_bytes;
    std::string missing;
    for (uint32_t cap : reflected->capabilities) {
      if (!device_has(info().features, cap)) {
        missing += (missing.empty() ? "" : ", ") + gpu::spirv_capability_name(cap);
      }
    }
    if (!missing.empty()) {
      st.unavailable_reason = "needs " + missing;
      continue;
    }
    const Status fits = gpu::check_kernel_fits(info().limits, k, st.shared_bytes);
    if (!fits.is_ok()) {
      st.unavailable_reason = fits.message();
      continue;
    }
    const Status made = create_pipeline(i, push_descriptors());
    if (!made.is_ok()) return made.with_context("pipeline of " + k.label());
    st.available = true;
  }
  return check_every_kernel_has_a_variant();
}

Status VulkanDevice::check_every_kernel_has_a_variant() const {
  const std::span<const gpu::KernelInfo> table = gpu::embedded_kernels();
  std::map<std::string_view, std::string> refused;  // kernel -> why each variant is not there
  std::map<std::string_view, bool> runs;
  for (uint32_t i = 0; i < table.size(); ++i) {
    if (table[i].test_only) continue;
    runs[table[i].name] = runs[table[i].name] || kernels_[i].available;
    std::string& why = refused[table[i].name];
    why += (why.empty() ? "" : "; ") + std::string(table[i].variant) + ": " +
           kernels_[i].unavailable_reason;
  }
  for (const auto& [name, ok] : runs) {
    if (!ok) {
      return Status::internal("kernel " + std::string(name) + " has no variant that runs on " +
                              info().name + " (" + refused[name] + ")");
    }
  }
  return Status::ok();
}

}  // namespace minfer::vulkan
