// What a SPIR-V compute module says about itself, read from its words: the
// facts a device layer checks against the kernel table and the device before
// it creates a pipeline (a kernel that disagrees is a startup error naming it).
//
// Contract:
//   - reflect_spirv() accepts a SPIR-V module (magic, version, instructions
//     with in-range word counts) and returns its compute entry point's
//     LocalSize, the bytes of its Workgroup (shared) variables, the bindings
//     of its storage buffers (descriptor set 0 only: another set is an error),
//     the size of its push-constant block (0 without one) and its
//     capabilities. Malformed words are an invalid_argument error; nothing
//     reads past the span.
//   - Sizes follow the layout decorations where there are some (Offset,
//     ArrayStride) and natural packing otherwise; the Workgroup total is what
//     the variables need, before any padding a driver adds.
// Threading: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace minfer::shader {

struct SpirvInfo {
  std::array<uint32_t, 3> local_size{};  // zeros when the module sets none
  uint64_t workgroup_bytes = 0;
  std::vector<uint32_t> bindings;  // sorted binding numbers of set 0
  uint64_t push_constant_bytes = 0;
  std::vector<uint32_t> capabilities;  // SPIR-V Capability enumerants
};

Result<SpirvInfo> reflect_spirv(std::span<const uint32_t> words);

// "StorageBuffer8BitAccess", ... for messages ("capability 4467" if unnamed).
std::string spirv_capability_name(uint32_t capability);

// SPIR-V Capability enumerants a device layer maps to its features.
namespace spirv_capability {
inline constexpr uint32_t kShader = 1;
inline constexpr uint32_t kFloat16 = 9;
inline constexpr uint32_t kFloat64 = 10;
inline constexpr uint32_t kInt64 = 11;
inline constexpr uint32_t kInt16 = 22;
inline constexpr uint32_t kInt8 = 39;
inline constexpr uint32_t kGroupNonUniform = 61;
inline constexpr uint32_t kGroupNonUniformVote = 62;
inline constexpr uint32_t kGroupNonUniformArithmetic = 63;
inline constexpr uint32_t kGroupNonUniformBallot = 64;
inline constexpr uint32_t kGroupNonUniformShuffle = 65;
inline constexpr uint32_t kGroupNonUniformShuffleRelative = 66;
inline constexpr uint32_t kGroupNonUniformClustered = 67;
inline constexpr uint32_t kGroupNonUniformQuad = 68;
inline constexpr uint32_t kStorageBuffer16BitAccess = 4433;
inline constexpr uint32_t kUniformAndStorageBuffer16BitAccess = 4434;
inline constexpr uint32_t kStoragePushConstant16 = 4435;
inline constexpr uint32_t kStorageBuffer8BitAccess = 4448;
inline constexpr uint32_t kUniformAndStorageBuffer8BitAccess = 4449;
inline constexpr uint32_t kStoragePushConstant8 = 4450;
inline constexpr uint32_t kDotProductInput4x8BitPacked = 6018;
inline constexpr uint32_t kDotProduct = 6019;
}  // namespace spirv_capability

}  // namespace minfer::shader
