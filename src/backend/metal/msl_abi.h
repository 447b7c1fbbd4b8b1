// The calling convention between the host and the Metal kernels, which are
// generated from the same SPIR-V as the Vulkan ones (msl_translate.h), and
// the sidecar that records it for each kernel variant.
//
// The ABI (fixed; the same for every kernel):
//   - storage buffer binding i of the manifest is [[buffer(i)]] (set with
//     setBuffer:offset:atIndex:i);
//   - the push-constant struct of kernel_args.h, when the kernel has one, is
//     [[buffer(kMslArgsSlot)]], set with setBytes:length:atIndex:;
//   - the entry point of kernels/<kernel>.comp variant <variant> is
//     msl_entry_point(kernel, variant) ("matmul_q4_k"), unique in a library;
//   - the threadgroup size is the manifest's workgroup (MSL has no LocalSize:
//     the host passes it to dispatchThreadgroups).
//
// Contract:
//   - An MslSidecar is what SPIRV-Cross reports about the MSL it generated
//     (its own resource assignment, not the host's table), so comparing it
//     with the host's KernelInfo is a real check: check_sidecar() is ok when
//     the kernel and variant, the entry point, the threadgroup size, every
//     buffer's index (= its binding, below kMslArgsSlot, and a binding the
//     manifest declares), whether it may be written (the manifest's w, rw
//     and atomic bindings exactly) and the arguments' slot and size agree
//     with the ABI and the table; else internal naming the kernel and the first
//     disagreement. A binding the MSL does not use (optimized out) may be
//     missing from the sidecar.
//   - sidecar_to_json() / sidecar_from_json() write and read the sidecar's
//     JSON (one object; its fields are the struct's); reading rejects
//     missing or mistyped fields with invalid_argument naming the field.
// Threading: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/shader/kernel_table.h"
#include "base/status.h"

namespace minfer::metal {

// The last of Metal's 31 buffer-argument slots: above every binding.
inline constexpr uint32_t kMslArgsSlot = 30;
// MSL 2.3 (macOS 11, every Apple-silicon Mac): simd_sum and the simdgroup
// builtins the subgroup kernels need.
inline constexpr uint32_t kMslMajor = 2;
inline constexpr uint32_t kMslMinor = 3;

std::string msl_entry_point(std::string_view kernel, std::string_view variant);

struct MslBuffer {
  uint32_t binding = 0;  // the SPIR-V binding (set 0)
  uint32_t index = 0;    // [[buffer(index)]] in the MSL
  std::string name;      // the SPIR-V block's instance name, for messages
  bool writable = true;  // false when the SPIR-V declares it NonWritable
};

struct MslSidecar {
  std::string kernel, variant, entry;
  std::array<uint32_t, 3> threadgroup{};
  std::vector<MslBuffer> buffers;  // by binding, one entry per binding
  std::optional<uint32_t> args_index;
  uint32_t args_bytes = 0;
};

Status check_sidecar(const shader::KernelInfo& kernel, const MslSidecar& sidecar);

std::string sidecar_to_json(const MslSidecar& sidecar);
Result<MslSidecar> sidecar_from_json(std::string_view json);

}  // namespace minfer::metal
