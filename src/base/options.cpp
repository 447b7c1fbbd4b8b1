#include "base/options.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace minfer {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

Status bad(std::string_view name, std::string_view value, std::string_view want) {
  return Status::invalid_argument(std::string(name) + "=" + std::string(value) + ": expected " +
                                  std::string(want));
}

}  // namespace

namespace option_rule {

Status set_text(std::string& out, std::string_view value) {
  out = std::string(value);
  return Status::ok();
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

Status set_int(int& out, int min, int max, std::string_view name, std::string_view value) {
  int v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v < min || v > max) {
    return bad(name, value,
               "an integer from " + std::to_string(min) + " to " + std::to_string(max));
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

}  // namespace option_rule

std::span<const OptionField<Options>> Options::fields() {
  // clang-format off
  static const OptionField<Options> kRows[] = {
      {{"MINFER_BATCH_INVARIANT", "0: let the engine's kernels depend on the batch (1)"}, &Options::batch_invariant},
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
  return kRows;
}

Result<Options> Options::parse(const Lookup& lookup, OptionSections sections) {
  MINFER_ASSIGN_OR_RETURN(Options o, parse_section<Options>(lookup));
  for (const OptionSection* section : sections) {
    MINFER_ASSIGN_OR_RETURN(std::any s, section->parse(lookup));
    o.sections_.push_back(std::move(s));
  }
  return o;
}

Result<Options> Options::from_env(OptionSections sections) {
  return parse(env_lookup, sections);
}

std::vector<OptionVariable> option_variables(OptionSections sections) {
  std::vector<OptionVariable> out;
  for (const OptionField<Options>& row : Options::fields()) out.push_back(row.var);
  for (const OptionSection* section : sections) {
    for (const OptionVariable& v : section->variables()) out.push_back(v);
  }
  return out;
}

std::optional<std::string> env_lookup(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

const Options& process_options() {
  static const Options o = [] {
    auto r = Options::from_env();
    return r ? *r : Options{};
  }();
  return o;
}

}  // namespace minfer
