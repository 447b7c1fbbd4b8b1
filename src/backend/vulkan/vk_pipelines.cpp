// One compute pipeline per embedded kernel, created at open for each kernel
// shader::assess_kernel() finds the device able to run (shader/kernel_states.h).
#include <string>
#include <vector>

#include "backend/shader/kernel_states.h"
#include "backend/shader/kernel_table.h"
#include "backend/vulkan/vk_device.h"

namespace minfer::vulkan {

Status VulkanDevice::create_pipeline(uint32_t index, bool with_push_descriptors) {
  const shader::KernelInfo& k = shader::embedded_kernels()[index];
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
  const std::span<const shader::KernelInfo> table = shader::embedded_kernels();
  pipelines_.resize(table.size());
  kernels_.resize(table.size());
  for (uint32_t i = 0; i < table.size(); ++i) {
    MINFER_ASSIGN_OR_RETURN(kernels_[i],
                            shader::assess_kernel(table[i], info(), config.test_kernels));
    if (!kernels_[i].available) continue;
    const Status made = create_pipeline(i, push_descriptors());
    if (!made.is_ok()) {
      kernels_[i].available = false;
      return made.with_context("pipeline of " + table[i].label());
    }
  }
  return shader::check_every_kernel_has_a_variant(kernels_, info().name);
}

}  // namespace minfer::vulkan
