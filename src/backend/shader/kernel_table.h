// The GPU kernels embedded in this binary: one entry per (kernel, variant),
// compiled from kernels/<kernel>.comp with the defines of its manifest
// (kernels/<kernel>.manifest) to SPIR-V at build time, validated by
// spirv-val, and written into a generated source by kernels.cmake.
//
// Contract:
//   - embedded_kernels() lists every entry in a fixed order (manifests by
//     file name, variants in manifest order); an entry's index in it is the
//     kernel's id for shader::Device and shader::Recorder.
//   - workgroup, bindings (their number, names and access) and push_size
//     (sizeof the manifest's `args` struct of kernel_args.h, 0 for none) are
//     the manifest's; a device layer checks them against the SPIR-V itself at
//     init (spirv_reflect.h) and refuses a kernel whose code disagrees.
//   - test_only kernels (manifest `flags test`) exist for the tests; a device
//     creates their pipelines only when opened for tests.
// Defined only in builds with a GPU backend (MINFER_SHADER_KERNELS: Vulkan or
// Metal). Threading: immutable.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace minfer::shader {

// kAtomic: a binding only updated by atomics whose order does not matter
// (the error words): no barrier is ever placed for it, and the host reads it
// only after the submission's wait.
enum class Access : uint8_t { kRead, kWrite, kReadWrite, kAtomic };

struct KernelBinding {
  std::string_view name;  // the manifest's name for it: "x", "w", "out"
  Access access = Access::kRead;
  bool writes() const { return access == Access::kWrite || access == Access::kReadWrite; }
};

struct KernelInfo {
  std::string_view name;     // the manifest's file name: "matmul"
  std::string_view variant;  // "q4_0"
  std::string_view source;   // "matmul.comp"
  std::span<const uint32_t> spirv;
  std::array<uint32_t, 3> workgroup{};  // local size x, y, z
  std::span<const KernelBinding> bindings;
  std::string_view args;  // push-constant struct of kernel_args.h ("" for none)
  uint32_t push_size = 0;
  bool test_only = false;

  std::string label() const { return std::string(name) + "." + std::string(variant); }
  uint32_t invocations() const { return workgroup[0] * workgroup[1] * workgroup[2]; }
};

std::span<const KernelInfo> embedded_kernels();

// The index of (name, variant) in embedded_kernels(), or nullopt.
std::optional<uint32_t> find_kernel(std::string_view name, std::string_view variant);

}  // namespace minfer::shader
