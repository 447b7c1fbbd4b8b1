#include "backend/metal/msl_abi.h"

#include <nlohmann/json.hpp>

namespace minfer::metal {
namespace {

using nlohmann::json;

std::string size_text(const std::array<uint32_t, 3>& s) {
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
}

Status disagree(const gpu::KernelInfo& k, const std::string& what) {
  return Status::internal("MSL of " + k.label() + ": " + what);
}

Status check_buffers(const gpu::KernelInfo& k, const MslSidecar& s) {
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
    const gpu::KernelBinding& m = k.bindings[b.binding];
    const bool may_write = m.writes() || m.access == gpu::Access::kAtomic;
    if (b.writable != may_write) {
      return disagree(k, "binding " + std::to_string(b.binding) + " ('" + std::string(m.name) +
                             "') is " + (b.writable ? "writable" : "read-only") +
                             " in the kernel, " + (may_write ? "written" : "read-only") +
                             " in its manifest");
    }
  }
  return Status::ok();
}

Status check_args(const gpu::KernelInfo& k, const MslSidecar& s) {
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

// The field `key` of `j`, read as T; invalid_argument naming it otherwise.
template <typename T>
Result<T> field(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return Status::invalid_argument(std::string("MSL sidecar: no '") + key + "'");
  try {
    return it->template get<T>();
  } catch (const json::exception&) {
    return Status::invalid_argument(std::string("MSL sidecar: '") + key + "' has the wrong type");
  }
}

Result<MslBuffer> buffer_from_json(const json& j) {
  if (!j.is_object()) return Status::invalid_argument("MSL sidecar: a buffer is not an object");
  MslBuffer b;
  MINFER_ASSIGN_OR_RETURN(b.binding, field<uint32_t>(j, "binding"));
  MINFER_ASSIGN_OR_RETURN(b.index, field<uint32_t>(j, "index"));
  MINFER_ASSIGN_OR_RETURN(b.name, field<std::string>(j, "name"));
  MINFER_ASSIGN_OR_RETURN(b.writable, field<bool>(j, "writable"));
  return b;
}

}  // namespace

std::string msl_entry_point(std::string_view kernel, std::string_view variant) {
  return std::string(kernel) + "_" + std::string(variant);
}

Status check_sidecar(const gpu::KernelInfo& k, const MslSidecar& s) {
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
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::invalid_argument("MSL sidecar: not a JSON object");
  MslSidecar s;
  MINFER_ASSIGN_OR_RETURN(s.kernel, field<std::string>(j, "kernel"));
  MINFER_ASSIGN_OR_RETURN(s.variant, field<std::string>(j, "variant"));
  MINFER_ASSIGN_OR_RETURN(s.entry, field<std::string>(j, "entry"));
  MINFER_ASSIGN_OR_RETURN(s.threadgroup, (field<std::array<uint32_t, 3>>(j, "threadgroup")));
  MINFER_ASSIGN_OR_RETURN(const json buffers, field<json>(j, "buffers"));
  if (!buffers.is_array()) return Status::invalid_argument("MSL sidecar: 'buffers' is no array");
  for (const json& b : buffers) {
    MINFER_ASSIGN_OR_RETURN(MslBuffer buffer, buffer_from_json(b));
    s.buffers.push_back(std::move(buffer));
  }
  const auto args = j.find("args_index");
  if (args == j.end()) return Status::invalid_argument("MSL sidecar: no 'args_index'");
  if (!args->is_null()) {
    MINFER_ASSIGN_OR_RETURN(s.args_index, field<uint32_t>(j, "args_index"));
  }
  MINFER_ASSIGN_OR_RETURN(s.args_bytes, field<uint32_t>(j, "args_bytes"));
  return s;
}

}  // namespace minfer::metal
