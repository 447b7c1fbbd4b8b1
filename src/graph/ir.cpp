#include "graph/ir.h"

#include <algorithm>

namespace minfer::graph {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kI32:
      return 4;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kI32:
      return "i32";
  }
  return "?";
}

const char* op_name(Op op) {
  static constexpr const char* kNames[] = {
      "input",  "get_rows", "rms_norm",  "mul_mat",        "add",       "mul",
      "scale",  "rope",     "kv_store",  "attention",      "silu",      "gelu",
      "swiglu", "geglu",    "fused_qkv", "fused_qkv_norm", "fused_ffn", "mul_mat_add",
  };
  static_assert(std::size(kNames) == static_cast<size_t>(Op::kCount));
  const auto i = static_cast<size_t>(op);
  return i < std::size(kNames) ? kNames[i] : "?";
}

std::vector<std::string> weights_read(const Graph& g) {
  std::vector<std::string> names;
  auto add = [&](const std::string& n) {
    if (!n.empty()) names.push_back(n);
  };
  for (const auto& node : g.nodes) {
    std::visit(
        [&](const auto& m) {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, GetRowsMeta> || std::is_same_v<M, RmsNormMeta>) {
            add(m.weight);
          } else if constexpr (std::is_same_v<M, MatMulMeta>) {
            add(m.weight);
            add(m.bias);
          } else if constexpr (std::is_same_v<M, RopeMeta>) {
            add(m.freq_factors);
          } else if constexpr (std::is_same_v<M, FusedQkvMeta>) {
            for (const auto* n :
                 {&m.q_weight, &m.k_weight, &m.v_weight, &m.q_bias, &m.k_bias, &m.v_bias, &m.q_norm,
                  &m.k_norm, &m.rope.freq_factors, &m.in_norm.weight}) {
              add(*n);
            }
          } else if constexpr (std::is_same_v<M, FusedFfnMeta>) {
            add(m.gate_weight);
            add(m.up_weight);
            add(m.in_norm.weight);
          }
        },
        node.meta);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace minfer::graph
