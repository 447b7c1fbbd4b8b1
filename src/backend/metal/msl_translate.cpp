#include "backend/metal/msl_translate.h"

#include <algorithm>
#include <spirv_cross/spirv_msl.hpp>
#include <utility>
#include <vector>

namespace minfer::metal {
namespace {

spirv_cross::CompilerMSL::Options msl_options() {
  spirv_cross::CompilerMSL::Options o;
  o.platform = spirv_cross::CompilerMSL::Options::macOS;
  o.set_msl_version(kMslMajor, kMslMinor);
  return o;
}

void bind(spirv_cross::CompilerMSL& c, uint32_t set, uint32_t binding, uint32_t index) {
  spirv_cross::MSLResourceBinding b;
  b.stage = spv::ExecutionModelGLCompute;
  b.desc_set = set;
  b.binding = binding;
  b.count = 1;
  b.msl_buffer = index;
  c.add_msl_resource_binding(b);
}

// The ABI asked of SPIRV-Cross: storage buffer binding i of set 0 at
// [[buffer(i)]], the push constants at [[buffer(kMslArgsSlot)]].
void bind_abi(spirv_cross::CompilerMSL& c) {
  for (const spirv_cross::Resource& r : c.get_shader_resources().storage_buffers) {
    const uint32_t binding = c.get_decoration(r.id, spv::DecorationBinding);
    bind(c, c.get_decoration(r.id, spv::DecorationDescriptorSet), binding, binding);
  }
  bind(c, spirv_cross::ResourceBindingPushConstantDescriptorSet,
       spirv_cross::ResourceBindingPushConstantBinding, kMslArgsSlot);
}

// The storage buffers as SPIRV-Cross assigned them, one per binding: aliased
// declarations of one binding share one argument, which SPIRV-Cross reports
// for one of them (the others have no index of their own).
Result<std::vector<MslBuffer>> reflect_buffers(const spirv_cross::CompilerMSL& c,
                                               const spirv_cross::ShaderResources& r) {
  constexpr uint32_t kUnassigned = ~0u;
  std::vector<MslBuffer> out;
  for (const spirv_cross::Resource& res : r.storage_buffers) {
    MslBuffer b;
    b.binding = c.get_decoration(res.id, spv::DecorationBinding);
    b.index = c.get_automatic_msl_resource_binding(res.id);
    b.name = c.get_name(res.id).empty() ? res.name : c.get_name(res.id);
    b.writable = !c.get_buffer_block_flags(res.id).get(spv::DecorationNonWritable);
    const auto same = std::find_if(out.begin(), out.end(),
                                   [&](const MslBuffer& o) { return o.binding == b.binding; });
    if (same == out.end()) {
      out.push_back(std::move(b));
      continue;
    }
    if (same->index == kUnassigned) {
      same->index = b.index;
      same->name = b.name;
    } else if (b.index != kUnassigned && b.index != same->index) {
      return Status::internal("binding " + std::to_string(b.binding) + " got [[buffer(" +
                              std::to_string(same->index) + ")]] and [[buffer(" +
                              std::to_string(b.index) + ")]]");
    }
    same->writable = same->writable || b.writable;
  }
  // A binding none of whose declarations has an argument is not in the MSL.
  std::erase_if(out, [](const MslBuffer& b) { return b.index == kUnassigned; });
  std::sort(out.begin(), out.end(),
            [](const MslBuffer& a, const MslBuffer& b) { return a.binding < b.binding; });
  return out;
}

Result<MslKernel> translate(std::span<const uint32_t> spirv, std::string_view kernel,
                            std::string_view variant) {
  spirv_cross::CompilerMSL c(spirv.data(), spirv.size());
  c.set_msl_options(msl_options());
  bind_abi(c);
  MslKernel out;
  MslSidecar& s = out.sidecar;
  s.kernel = kernel;
  s.variant = variant;
  s.entry = msl_entry_point(kernel, variant);
  c.rename_entry_point("main", s.entry, spv::ExecutionModelGLCompute);
  out.source = c.compile();
  if (c.needs_buffer_size_buffer() || c.needs_swizzle_buffer()) {
    return Status::internal("its MSL needs an auxiliary buffer the ABI has no slot for");
  }
  for (uint32_t i = 0; i < 3; ++i) {
    s.threadgroup[i] = c.get_execution_mode_argument(spv::ExecutionModeLocalSize, i);
  }
  const spirv_cross::ShaderResources r = c.get_shader_resources();
  MINFER_ASSIGN_OR_RETURN(s.buffers, reflect_buffers(c, r));
  if (r.push_constant_buffers.size() > 1) return Status::internal("two push-constant blocks");
  if (!r.push_constant_buffers.empty()) {
    const spirv_cross::Resource& p = r.push_constant_buffers.front();
    s.args_index = c.get_automatic_msl_resource_binding(p.id);
    s.args_bytes = static_cast<uint32_t>(c.get_declared_struct_size(c.get_type(p.base_type_id)));
  }
  return out;
}

}  // namespace

Result<MslKernel> translate_to_msl(std::span<const uint32_t> spirv, std::string_view kernel,
                                   std::string_view variant) {
  const std::string label = std::string(kernel) + "." + std::string(variant);
  try {
    auto out = translate(spirv, kernel, variant);
    if (!out.is_ok()) return out.status().with_context("MSL of " + label);
    return out;
  } catch (const spirv_cross::CompilerError& e) {
    return Status::internal("MSL of " + label + ": SPIRV-Cross: " + e.what());
  }
}

}  // namespace minfer::metal
