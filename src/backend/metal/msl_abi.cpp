#include "backend/metal/msl_abi.h"

#include "base/json.h"

namespace minfer::metal {
namespace {

using nlohmann::json;

std::string size_text(const std::array<uint32_t, 3>& s) {
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
}

Status disagree(const shader::KernelInfo& k, const std::string& what) {
  return Status::internal("MSL of " + k.label() + ": " + what);
}

Status check_buffers(const shader::KernelInfo& k, const MslSidecar& s) {
  for (size_t i = 0; i < s.buffers.size(); ++i) {
    const MslBuffer& b = s.buffers[i];
    if (i > 0 && b.binding <= s.buffers[i - 1].binding) {
      return disagree(k, "its buffers are not one per binding in binding order");
    }
    if (b.binding >= k.bindings.size()) {
      return disagree(k, "buffer '" + b.name + "' has binding " + std::to_string(b.binding) +
                             ", the manifest declares " + std::to_string(k.bindings.size()));
    }
    if (b.index != b.binding || b.index >= kMslArgsSlot) {
      return disagree(k, "binding " + std::to_string(b.binding) + " ('" +
                             std::string(k.bindings[b.binding].name) + "') is [[buffer(" +
                             std::to_string(b.index) + ")]], the ABI says [[buffer(" +
                             std::to_string(b.binding) + ")]]");
    }
    const shader::KernelBinding& m = k.bindings[b.binding];
    const bool may_write = m.writes() || m.access == shader::Access::kAtomic;
    if (b.writable != may_write) {
      return disagree(k, "binding " + std::to_string(b.binding) + " ('" + std::string(m.name) +
                             "') is " + (b.writable ? "writable" : "read-only") +
                             " in the kernel, " + (may_write ? "written" : "read-only") +
                             " in its manifest");
    }
  }
  return Status::ok();
}

Status check_args(const shader::KernelInfo& k, const MslSidecar& s) {
  if (k.push_size == 0) {
    if (s.args_index) return disagree(k, "has an arguments struct, its manifest none");
    return Status::ok();
  }
  if (!s.args_index) {
    return disagree(k, "has no arguments struct, its manifest has " + std::string(k.args));
  }
  if (*s.args_index != kMslArgsSlot) {
    return disagree(k, "its arguments are [[buffer(" + std::to_string(*s.args_index) +
                           ")]], the ABI says [[buffer(" + std::to_string(kMslArgsSlot) + ")]]");
  }
  if (s.args_bytes != k.push_size) {
    return disagree(k, "its arguments struct has " + std::to_string(s.args_bytes) +
                           " bytes, sizeof(" + std::string(k.args) + ") is " +
                           std::to_string(k.push_size));
  }
  return Status::ok();
}

Result<uint32_t> u32(const json& j, std::string_view key) {
  MINFER_ASSIGN_OR_RETURN(int64_t v, json_get_int(j, key, 0, UINT32_MAX));
  return static_cast<uint32_t>(v);
}

Result<MslBuffer> buffer_from_json(const json& j) {
  if (!j.is_object()) return Status::invalid_argument("a buffer is not an object");
  MslBuffer b;
  MINFER_ASSIGN_OR_RETURN(b.binding, u32(j, "binding"));
  MINFER_ASSIGN_OR_RETURN(b.index, u32(j, "index"));
  MINFER_ASSIGN_OR_RETURN(b.name, json_get_string(j, "name"));
  MINFER_ASSIGN_OR_RETURN(b.writable, json_get_bool(j, "writable"));
  return b;
}

Result<std::array<uint32_t, 3>> threadgroup_from_json(const json& j) {
  const json* t = json_find(j, "threadgroup");
  if (t == nullptr) return Status::invalid_argument("no \"threadgroup\"");
  if (!t->is_array() || t->size() != 3) {
    return Status::invalid_argument("\"threadgroup\" is not three sizes");
  }
  std::array<uint32_t, 3> size{};
  for (size_t i = 0; i < size.size(); ++i) {
    MINFER_ASSIGN_OR_RETURN(int64_t v, json_to_int((*t)[i], "\"threadgroup\"", 0, UINT32_MAX));
    size[i] = static_cast<uint32_t>(v);
  }
  return size;
}

Result<MslSidecar> sidecar_from_object(const json& j) {
  MslSidecar s;
  MINFER_ASSIGN_OR_RETURN(s.kernel, json_get_string(j, "kernel"));
  MINFER_ASSIGN_OR_RETURN(s.variant, json_get_string(j, "variant"));
  MINFER_ASSIGN_OR_RETURN(s.entry, json_get_string(j, "entry"));
  MINFER_ASSIGN_OR_RETURN(s.threadgroup, threadgroup_from_json(j));
  const json* buffers = json_find(j, "buffers");
  if (buffers == nullptr || !buffers->is_array()) {
    return Status::invalid_argument("\"buffers\" is not an array");
  }
  for (const json& b : *buffers) {
    MINFER_ASSIGN_OR_RETURN(MslBuffer buffer, buffer_from_json(b));
    s.buffers.push_back(std::move(buffer));
  }
  const json* args = json_find(j, "args_index");
  if (args == nullptr) return Status::invalid_argument("no \"args_index\"");
  if (!args->is_null()) {
    MINFER_ASSIGN_OR_RETURN(s.args_index, u32(j, "args_index"));
  }
  MINFER_ASSIGN_OR_RETURN(s.args_bytes, u32(j, "args_bytes"));
  return s;
}

}  // namespace

std::string msl_entry_point(std::string_view kernel, std::string_view variant) {
  return std::string(kernel) + "_" + std::string(variant);
}

Status check_sidecar(const shader::KernelInfo& k, const MslSidecar& s) {
  if (s.kernel != k.name || s.variant != k.variant) {
    return disagree(k, "its sidecar is for " + s.kernel + "." + s.variant);
  }
  if (s.entry != msl_entry_point(k.name, k.variant)) {
    return disagree(k, "its entry point is '" + s.entry + "', the ABI says '" +
                           msl_entry_point(k.name, k.variant) + "'");
  }
  if (s.threadgroup != k.workgroup) {
    return disagree(k, "its threadgroup is " + size_text(s.threadgroup) + ", the manifest's " +
                           size_text(k.workgroup));
  }
  MINFER_RETURN_IF_ERROR(check_buffers(k, s));
  return check_args(k, s);
}

std::string sidecar_to_json(const MslSidecar& s) {
  json buffers = json::array();
  for (const MslBuffer& b : s.buffers) {
    buffers.push_back(
        {{"binding", b.binding}, {"index", b.index}, {"name", b.name}, {"writable", b.writable}});
  }
  json j = {{"kernel", s.kernel},
            {"variant", s.variant},
            {"entry", s.entry},
            {"threadgroup", s.threadgroup},
            {"buffers", buffers},
            {"args_index", s.args_index ? json(*s.args_index) : json(nullptr)},
            {"args_bytes", s.args_bytes}};
  return j.dump(2) + "\n";
}

Result<MslSidecar> sidecar_from_json(std::string_view text) {
  Result<json> j = parse_json(text);
  if (!j.is_ok()) return j.status().with_context("MSL sidecar");
  if (!j->is_object()) return Status::invalid_argument("MSL sidecar: not a JSON object");
  Result<MslSidecar> s = sidecar_from_object(*j);
  if (!s.is_ok()) return s.status().with_context("MSL sidecar");
  return s;
}

}  // namespace minfer::metal
