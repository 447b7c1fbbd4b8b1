#include "backend/shader/kernel_states.h"

#include <map>
#include <string>

#include "backend/shader/limits.h"
#include "backend/shader/spirv_reflect.h"

namespace minfer::shader {
namespace {

std::string size_text(const std::array<uint32_t, 3>& s) {
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
}

// What the SPIR-V must agree on with the kernel's manifest (a disagreement
// is a broken build: an error, not an unavailable variant).
Status check_against_manifest(const KernelInfo& k, const SpirvInfo& r) {
  if (r.local_size != k.workgroup) {
    return Status::internal(k.label() + ": SPIR-V LocalSize " + size_text(r.local_size) +
                            " differs from its manifest's " + size_text(k.workgroup));
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

bool device_has(const DeviceFeatures& f, uint32_t capability) {
  namespace c = spirv_capability;
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

Result<KernelState> assess_kernel(const KernelInfo& k, const DeviceInfo& info, bool test_kernels) {
  KernelState st;
  if (k.test_only && !test_kernels) {
    st.unavailable_reason = "a test-only kernel (the device was not opened for tests)";
    return st;
  }
  auto reflected = reflect_spirv(k.spirv);
  if (!reflected.is_ok()) return reflected.status().with_context(k.label());
  MINFER_RETURN_IF_ERROR(check_against_manifest(k, *reflected));
  st.shared_bytes = reflected->workgroup_bytes;
  std::string missing;
  for (uint32_t cap : reflected->capabilities) {
    if (!device_has(info.features, cap)) {
      missing += (missing.empty() ? "" : ", ") + spirv_capability_name(cap);
    }
  }
  if (!missing.empty()) {
    st.unavailable_reason = "needs " + missing;
    return st;
  }
  const Status fits = check_kernel_fits(info.limits, k, st.shared_bytes);
  if (!fits.is_ok()) {
    st.unavailable_reason = fits.message();
    return st;
  }
  st.available = true;
  return st;
}

Status check_every_kernel_has_a_variant(std::span<const KernelState> states,
                                        std::string_view device_name) {
  const std::span<const KernelInfo> table = embedded_kernels();
  std::map<std::string_view, std::string> refused;  // kernel -> why each variant is not there
  std::map<std::string_view, bool> runs;
  for (uint32_t i = 0; i < table.size() && i < states.size(); ++i) {
    if (table[i].test_only) continue;
    runs[table[i].name] = runs[table[i].name] || states[i].available;
    std::string& why = refused[table[i].name];
    why += (why.empty() ? "" : "; ") + std::string(table[i].variant) + ": " +
           states[i].unavailable_reason;
  }
  for (const auto& [name, ok] : runs) {
    if (!ok) {
      return Status::internal("kernel " + std::string(name) + " has no variant that runs on " +
                              std::string(device_name) + " (" + refused[name] + ")");
    }
  }
  return Status::ok();
}

}  // namespace minfer::shader
