// SPIR-V -> MSL: one embedded kernel variant's SPIR-V (the same module the
// Vulkan backend runs) translated to Metal Shading Language with SPIRV-Cross,
// under the ABI of msl_abi.h, and the sidecar SPIRV-Cross's reflection gives
// for the result.
//
// Contract:
//   - translate_to_msl() emits MSL kMslMajor.kMslMinor for macOS with the
//     entry point msl_entry_point(kernel, variant), storage buffer binding i
//     at [[buffer(i)]] and the push-constant block at
//     [[buffer(kMslArgsSlot)]]; subgroup operations become simd-group ones
//     (subgroupAdd -> simd_sum). The sidecar's buffer indices are the ones
//     SPIRV-Cross reports having used, not the ones asked for.
//   - A module SPIRV-Cross cannot translate, or whose MSL would need an
//     auxiliary buffer the ABI has no slot for (buffer sizes, swizzles), or
//     whose aliased declarations of one binding got different slots, is an
//     internal error naming the kernel and SPIRV-Cross's message.
//   - The output is a pure function of the input words (no timestamps,
//     paths or addresses): the same SPIR-V gives the same bytes.
// Built where SPIRV-Cross is (MINFER_MSL). Threading: pure function.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "backend/metal/msl_abi.h"
#include "base/status.h"

namespace minfer::metal {

struct MslKernel {
  std::string source;
  MslSidecar sidecar;
};

Result<MslKernel> translate_to_msl(std::span<const uint32_t> spirv, std::string_view kernel,
                                   std::string_view variant);

}  // namespace minfer::metal
