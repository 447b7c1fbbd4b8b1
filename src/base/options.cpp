#include "base/options.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <variant>

namespace minfer {
namespace {

// A number field with its accepted range.
struct IntField {
  int Options::*field;
  int min, max;
};
struct SecondsField {
  double Options::*field;
};
using Field = std::variant<bool Options::*, std::string Options::*, IntField, SecondsField>;

struct Row {
  OptionVariable var;
  Field field;
};

// clang-format off
const Row kRows[] = {
    {{"MINFER_DISABLE_CUDA", "1: run on the CPU only"}, &Options::disable_cuda},
    {{"MINFER_CUDA_DEVICE", "N: which CUDA device (0)"}, IntField{&Options::cuda_device, 0, 1023}},
    {{"MINFER_GPU_TIMEOUT", "S: deadline of every GPU wait in seconds (10)"}, SecondsField{&Options::gpu_timeout_s}},
    {{"MINFER_NO_CUDA_GRAPH", "1: no CUDA graph replay"}, &Options::no_cuda_graph},
    {{"MINFER_GEMV_F32", "1: GPU decode GEMVs on f32 activations instead of int8"}, &Options::gemv_f32},
    {{"MINFER_NO_PDL", "1: no programmatic dependent launch"}, &Options::no_pdl},
    {{"MINFER_NO_SPLIT_KV", "1: GPU decode attention without the split-KV kernel"}, &Options::no_split_kv},
    {{"MINFER_DISABLE_VULKAN", "1: no Vulkan device"}, &Options::disable_vulkan},
    {{"MINFER_VULKAN_DEVICE", "N: which Vulkan device (default: discrete > integrated > cpu)"}, IntField{&Options::vulkan_device, 0, 1023}},
    {{"MINFER_VULKAN_VALIDATION", "1: enable the Khronos validation layer if installed"}, &Options::vulkan_validation},
    {{"MINFER_DISABLE_METAL", "1: no Metal device"}, &Options::disable_metal},
    {{"MINFER_DISABLE_MPS", "1: no Metal device (the older name)"}, &Options::disable_metal},
    {{"MINFER_WEIGHT_COPY", "1: copy the weights into GPU buffers instead of reading the file in place (Metal)"}, &Options::weight_copy},
    {{"MINFER_METALLIB_FILE", "PATH: the Metal kernel library to load instead of the one beside the binary"}, &Options::metallib_file},
    {{"MINFER_NO_GPU_REPLAY", "1: Vulkan records every split anew (no command-buffer replay)"}, &Options::no_gpu_replay},
    {{"MINFER_BATCH_INVARIANT", "0: let the engine's kernels depend on the batch (1)"}, &Options::batch_invariant},
    {{"MINFER_CPU_SCALAR", "1: scalar CPU kernels"}, &Options::cpu_scalar},
    {{"MINFER_CPU_NO_AVX512", "1: AVX2 prefill GEMM instead of the AVX-512 VNNI one"}, &Options::cpu_no_avx512},
    {{"MINFER_CPU_NO_REPACK", "1: CPU matmuls read the file's rows instead of a repacked copy"}, &Options::cpu_no_repack},
    {{"MINFER_NO_FUSE_GLU", "1: no SwiGLU/GeGLU fusion"}, &Options::no_fuse_glu},
    {{"MINFER_NO_FUSE_QKV", "1: no fused q/k/v decode projection"}, &Options::no_fuse_qkv},
    {{"MINFER_NO_FUSE_QKV_NORM", "1: no fused per-head q/k norm"}, &Options::no_fuse_qkv_norm},
    {{"MINFER_NO_FUSE_FFN", "1: no fused gate/up decode projection"}, &Options::no_fuse_ffn},
    {{"MINFER_NO_FUSE_ADD", "1: no matmul + residual fusion"}, &Options::no_fuse_add},
    {{"MINFER_NO_FUSE_NORM", "1: no input RMSNorm folded into fused nodes"}, &Options::no_fuse_norm},
    {{"MINFER_GRAPH_TRACE", "1: log each new plan (splits, op census)"}, &Options::graph_trace},
    {{"MINFER_OP_PROFILE", "1: per-op time tables"}, &Options::op_profile},
    {{"MINFER_TRACE", "DIR: write every node's output there as raw bytes"}, &Options::trace_dir},
    {{"MINFER_CACHE_TYPE", "f32|f16|q8_0: KV cache type for K and V (f16)"}, &Options::cache_type},
    {{"MINFER_QWEN2_TOKENIZER", "DIR: Qwen2 tokenizer files for minfer synth"}, &Options::qwen2_tokenizer_dir},
};
// clang-format on

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

Status bad(std::string_view name, std::string_view value, std::string_view want) {
  return Status::invalid_argument(std::string(name) + "=" + std::string(value) + ": expected " +
                                  std::string(want));
}

Status set_flag(bool& out, std::string_view name, std::string_view value) {
  const std::string v = lower(value);
  if (v == "1" || v == "true" || v == "yes" || v == "on") {
    out = true;
  } else if (v == "0" || v == "false" || v == "no" || v == "off") {
    out = false;
  } else {
    return bad(name, value, "1/true/yes/on or 0/false/no/off");
  }
  return Status::ok();
}

Status set_int(int& out, const IntField& f, std::string_view name, std::string_view value) {
  int v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v < f.min || v > f.max) {
    return bad(name, value,
               "an integer from " + std::to_string(f.min) + " to " + std::to_string(f.max));
  }
  out = v;
  return Status::ok();
}

Status set_seconds(double& out, std::string_view name, std::string_view value) {
  double v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(v) || v <= 0 ||
      v > 86400) {
    return bad(name, value, "a number of seconds above 0, at most 86400");
  }
  out = v;
  return Status::ok();
}

Status apply(const Row& row, Options& o, std::string_view value) {
  const std::string_view name = row.var.name;
  if (auto* flag = std::get_if<bool Options::*>(&row.field)) return set_flag(o.**flag, name, value);
  if (auto* text = std::get_if<std::string Options::*>(&row.field)) {
    o.** text = std::string(value);
    return Status::ok();
  }
  if (auto* num = std::get_if<IntField>(&row.field))
    return set_int(o.*(num->field), *num, name, value);
  return set_seconds(o.*(std::get<SecondsField>(row.field).field), name, value);
}

}  // namespace

Result<Options> Options::parse(const Lookup& lookup) {
  Options o;
  for (const Row& row : kRows) {
    const std::optional<std::string> value = lookup(row.var.name);
    if (!value || value->empty()) continue;
    MINFER_RETURN_IF_ERROR(apply(row, o, *value));
  }
  return o;
}

Result<Options> Options::from_env() {
  return parse([](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  });
}

std::span<const OptionVariable> option_variables() {
  static const auto vars = [] {
    std::array<OptionVariable, std::size(kRows)> out{};
    for (size_t i = 0; i < std::size(kRows); ++i) out[i] = kRows[i].var;
    return out;
  }();
  return vars;
}

const Options& process_options() {
  static const Options o = [] {
    auto r = Options::from_env();
    return r ? *r : Options{};
  }();
  return o;
}

}  // namespace minfer
