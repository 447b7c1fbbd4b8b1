#include "backend/shader/spirv_reflect.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

namespace minfer::shader {
namespace {

// The opcodes, decorations and storage classes this reader looks at.
enum : uint32_t {
  kOpExecutionMode = 16,
  kOpCapability = 17,
  kOpTypeBool = 20,
  kOpTypeInt = 21,
  kOpTypeFloat = 22,
  kOpTypeVector = 23,
  kOpTypeArray = 28,
  kOpTypeRuntimeArray = 29,
  kOpTypeStruct = 30,
  kOpTypePointer = 32,
  kOpConstant = 43,
  kOpVariable = 59,
  kOpDecorate = 71,
  kOpMemberDecorate = 72,
};
constexpr uint32_t kModeLocalSize = 17;
constexpr uint32_t kDecorationArrayStride = 6;
constexpr uint32_t kDecorationBinding = 33;
constexpr uint32_t kDecorationDescriptorSet = 34;
constexpr uint32_t kDecorationOffset = 35;
constexpr uint32_t kStorageUniform = 2;
constexpr uint32_t kStorageWorkgroup = 4;
constexpr uint32_t kStoragePushConstant = 9;
constexpr uint32_t kStorageBuffer = 12;

struct Type {
  uint32_t op = 0;
  std::vector<uint32_t> operands;  // the words after the result id
};

struct Module {
  std::unordered_map<uint32_t, Type> types;
  std::unordered_map<uint32_t, uint32_t> constants;  // id -> low word of the value
  std::unordered_map<uint32_t, uint32_t> array_stride;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> member_offset;  // (struct, member)
  std::unordered_map<uint32_t, uint32_t> binding, descriptor_set;
  struct Variable {
    uint32_t id, pointer_type, storage;
  };
  std::vector<Variable> variables;
};

// Bytes of a type; nullopt for a runtime array or a type this reader does not know.
std::optional<uint64_t> type_size(const Module& m, uint32_t id, int depth = 0) {
  const auto it = m.types.find(id);
  if (it == m.types.end() || depth > 16) return std::nullopt;
  const Type& t = it->second;
  switch (t.op) {
    case kOpTypeBool:
      return 4;
    case kOpTypeInt:
    case kOpTypeFloat:
      return t.operands.empty() ? std::nullopt : std::optional<uint64_t>(t.operands[0] / 8);
    case kOpTypeVector: {
      if (t.operands.size() < 2) return std::nullopt;
      const auto elem = type_size(m, t.operands[0], depth + 1);
      return elem ? std::optional<uint64_t>(*elem * t.operands[1]) : std::nullopt;
    }
    case kOpTypeArray: {
      if (t.operands.size() < 2) return std::nullopt;
      const auto len = m.constants.find(t.operands[1]);
      const auto elem = type_size(m, t.operands[0], depth + 1);
      if (len == m.constants.end() || !elem) return std::nullopt;
      const auto stride = m.array_stride.find(id);
      return (stride != m.array_stride.end() ? stride->second : *elem) * len->second;
    }
    case kOpTypeStruct: {
      uint64_t end = 0, natural = 0;
      for (uint32_t i = 0; i < t.operands.size(); ++i) {
        const auto member = type_size(m, t.operands[i], depth + 1);
        if (!member) return std::nullopt;
        const auto off = m.member_offset.find({id, i});
        const uint64_t start = off != m.member_offset.end() ? off->second : natural;
        natural = start + *member;
        end = std::max(end, natural);
      }
      return end;
    }
    default:
      return std::nullopt;
  }
}

Status malformed(const std::string& why) {
  return Status::invalid_argument("malformed SPIR-V: " + why);
}

// Pass 1: the instructions this reader needs, into `m` and `out`.
Status read_instructions(std::span<const uint32_t> words, Module& m, SpirvInfo& out) {
  for (size_t at = 5; at < words.size();) {
    const uint32_t count = words[at] >> 16, op = words[at] & 0xffffu;
    if (count == 0 || at + count > words.size()) {
      return malformed("instruction at word " + std::to_string(at) + " runs past the end");
    }
    const std::span<const uint32_t> ins = words.subspan(at + 1, count - 1);
    at += count;
    if (op == kOpCapability && !ins.empty()) {
      out.capabilities.push_back(ins[0]);
    } else if (op == kOpExecutionMode && ins.size() >= 5 && ins[1] == kModeLocalSize) {
      out.local_size = {ins[2], ins[3], ins[4]};
    } else if (op == kOpDecorate && ins.size() >= 3) {
      if (ins[1] == kDecorationArrayStride) m.array_stride[ins[0]] = ins[2];
      if (ins[1] == kDecorationBinding) m.binding[ins[0]] = ins[2];
      if (ins[1] == kDecorationDescriptorSet) m.descriptor_set[ins[0]] = ins[2];
    } else if (op == kOpMemberDecorate && ins.size() >= 4 && ins[2] == kDecorationOffset) {
      m.member_offset[{ins[0], ins[1]}] = ins[3];
    } else if ((op >= kOpTypeBool && op <= kOpTypeStruct) || op == kOpTypePointer) {
      if (ins.empty()) return malformed("type without a result id");
      m.types[ins[0]] = Type{op, std::vector<uint32_t>(ins.begin() + 1, ins.end())};
    } else if (op == kOpConstant && ins.size() >= 3) {
      m.constants[ins[1]] = ins[2];
    } else if (op == kOpVariable && ins.size() >= 3) {
      m.variables.push_back({ins[1], ins[0], ins[2]});
    }
  }
  return Status::ok();
}

// The type a pointer type points to, or nullopt.
std::optional<uint32_t> pointee(const Module& m, uint32_t pointer_type) {
  const auto it = m.types.find(pointer_type);
  if (it == m.types.end() || it->second.op != kOpTypePointer || it->second.operands.size() < 2) {
    return std::nullopt;
  }
  return it->second.operands[1];
}

}  // namespace

Result<SpirvInfo> reflect_spirv(std::span<const uint32_t> words) {
  if (words.size() < 5 || words[0] != 0x07230203u) {
    return malformed("no SPIR-V header (magic 0x07230203)");
  }
  Module m;
  SpirvInfo out;
  MINFER_RETURN_IF_ERROR(read_instructions(words, m, out));
  for (const Module::Variable& v : m.variables) {
    const std::optional<uint32_t> type = pointee(m, v.pointer_type);
    if (!type) return malformed("variable %" + std::to_string(v.id) + " is not of a pointer type");
    if (v.storage == kStorageWorkgroup) {
      const auto bytes = type_size(m, *type);
      if (!bytes) return malformed("shared variable %" + std::to_string(v.id) + " of unknown size");
      out.workgroup_bytes += *bytes;
    } else if (v.storage == kStoragePushConstant) {
      const auto bytes = type_size(m, *type);
      if (!bytes) return malformed("push constants of unknown size");
      out.push_constant_bytes = std::max(out.push_constant_bytes, *bytes);
    } else if (v.storage == kStorageBuffer || v.storage == kStorageUniform) {
      const auto set = m.descriptor_set.find(v.id);
      const auto binding = m.binding.find(v.id);
      if (binding == m.binding.end()) return malformed("buffer without a binding");
      if (set != m.descriptor_set.end() && set->second != 0) {
        return Status::invalid_argument("binding " + std::to_string(binding->second) +
                                        " is in descriptor set " + std::to_string(set->second) +
                                        " (kernels use set 0 only)");
      }
      out.bindings.push_back(binding->second);
    }
  }
  std::sort(out.bindings.begin(), out.bindings.end());
  return out;
}

std::string spirv_capability_name(uint32_t capability) {
  namespace c = spirv_capability;
  switch (capability) {
    case c::kShader:
      return "Shader";
    case c::kFloat16:
      return "Float16";
    case c::kFloat64:
      return "Float64";
    case c::kInt64:
      return "Int64";
    case c::kInt16:
      return "Int16";
    case c::kInt8:
      return "Int8";
    case c::kGroupNonUniform:
      return "GroupNonUniform";
    case c::kGroupNonUniformVote:
      return "GroupNonUniformVote";
    case c::kGroupNonUniformArithmetic:
      return "GroupNonUniformArithmetic";
    case c::kGroupNonUniformBallot:
      return "GroupNonUniformBallot";
    case c::kGroupNonUniformShuffle:
      return "GroupNonUniformShuffle";
    case c::kGroupNonUniformShuffleRelative:
      return "GroupNonUniformShuffleRelative";
    case c::kGroupNonUniformClustered:
      return "GroupNonUniformClustered";
    case c::kGroupNonUniformQuad:
      return "GroupNonUniformQuad";
    case c::kStorageBuffer16BitAccess:
      return "StorageBuffer16BitAccess";
    case c::kUniformAndStorageBuffer16BitAccess:
      return "UniformAndStorageBuffer16BitAccess";
    case c::kStoragePushConstant16:
      return "StoragePushConstant16";
    case c::kStorageBuffer8BitAccess:
      return "StorageBuffer8BitAccess";
    case c::kUniformAndStorageBuffer8BitAccess:
      return "UniformAndStorageBuffer8BitAccess";
    case c::kStoragePushConstant8:
      return "StoragePushConstant8";
    case c::kDotProductInput4x8BitPacked:
      return "DotProductInput4x8BitPacked";
    case c::kDotProduct:
      return "DotProduct";
    default:
      return "capability " + std::to_string(capability);
  }
}

}  // namespace minfer::shader
