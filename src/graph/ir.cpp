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

const OpTraits& op_traits(Op op) {
  // clang-format off
  static constexpr OpTraits kTable[] = {
      //  name              in_place uses_kv writes_kv
      /* kInput        */ {"input",          false, false, false},
      /* kGetRows      */ {"get_rows",       false, false, false},
      /* kRmsNorm      */ {"rms_norm",       true,  false, false},
      /* kMatMul       */ {"mul_mat",        false, false, false},
      /* kAdd          */ {"add",            true,  false, false},
      /* kMul          */ {"mul",            true,  false, false},
      /* kScale        */ {"scale",          true,  false, false},
      /* kRope         */ {"rope",           true,  false, false},
      /* kKvStore      */ {"kv_store",       false, true,  true},
      /* kAttention    */ {"attention",      false, true,  false},
      /* kSilu         */ {"silu",           true,  false, false},
      /* kGelu         */ {"gelu",           true,  false, false},
      /* kSwiGLU       */ {"swiglu",         true,  false, false},
      /* kGeGLU        */ {"geglu",          true,  false, false},
      /* kFusedQKV     */ {"fused_qkv",      false, true,  true},
      /* kFusedQkvNorm */ {"fused_qkv_norm", false, true,  true},
      /* kFusedFFN     */ {"fused_ffn",      false, false, false},
      /* kMatMulAdd    */ {"mul_mat_add",    false, false, false},
      /* kArgMax       */ {"argmax",         false, false, false},
      /* kMoeTopK      */ {"moe_topk",       false, false, false},
      /* kMoeWeights   */ {"moe_weights",    false, false, false},
      /* kMatMulId     */ {"mul_mat_id",     false, false, false},
      /* kMoeSum       */ {"moe_sum",        false, false, false},
      /* kSwiGLUOai    */ {"swiglu_oai",     true,  false, false},
      /* kAllReduce    */ {"all_reduce",     true,  false, false},
      /* kAllGather    */ {"all_gather",     false, false, false},
  };
  // clang-format on
  static_assert(std::size(kTable) == static_cast<size_t>(Op::kCount));
  static constexpr OpTraits kUnknown = {"?", false, false, false};
  const auto i = static_cast<size_t>(op);
  return i < std::size(kTable) ? kTable[i] : kUnknown;
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
            add(m.in_norm.weight);
          } else if constexpr (std::is_same_v<M, MatMulIdMeta>) {
            add(m.weight);
            add(m.bias);
          } else if constexpr (std::is_same_v<M, RopeMeta>) {
            add(m.freq_factors);
          } else if constexpr (std::is_same_v<M, AttentionMeta>) {
            add(m.sinks);
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
