// Node checks every backend's op table shares: the part of "can this backend
// run this node" that is the node's own well-formedness (its metadata kind,
// dtype, input count, and shape against its metadata), the same whichever
// backend runs it. Each backend's table adds only what its kernels and
// weights can do (types it decodes, device limits, weights it holds).
//
// Contract: pure functions of the node (and, for kv_row_type_ok, of the
// types in its metadata); true means well-formed, false routes the node to
// the next backend like any other "no" of supports_op. node_only<Check>
// adapts one of them to an op table whose checks take (node, what the
// backend holds).
#pragma once

#include <cstdint>
#include <variant>

#include "graph/ir.h"
#include "quant/tensor_type.h"

namespace minfer::backend {

// An elementwise op's node: an f32 output (shapes are the runners' to check).
inline bool f32_output(const graph::Node& n) {
  return n.dtype == graph::DType::kF32;
}

// A graph input (token ids, positions, row lists): i32, written by the host.
inline bool i32_input(const graph::Node& n) {
  return n.dtype == graph::DType::kI32;
}

// ArgMax: one i32 index per row of one f32 input whose rows are row_len long.
inline bool argmax_well_formed(const graph::Node& n) {
  const auto* m = std::get_if<graph::ArgMaxMeta>(&n.meta);
  return m != nullptr && m->row_len > 0 && n.dtype == graph::DType::kI32 && n.shape.ne[0] == 1 &&
         n.inputs.size() == 1;
}

// MoeTopK (i32 ids from the router logits) or MoeWeights (f32 weights from
// the logits and the ids): n_used of n_expert, one column per token.
inline bool moe_route_well_formed(const graph::Node& n) {
  const auto* m = std::get_if<graph::MoeRouteMeta>(&n.meta);
  const bool topk = n.op == graph::Op::kMoeTopK;
  return m != nullptr && m->n_used >= 1 && m->n_used <= m->n_expert &&
         n.dtype == (topk ? graph::DType::kI32 : graph::DType::kF32) &&
         n.shape.ne[0] == m->n_used && n.inputs.size() == (topk ? 1u : 2u);
}

// MoeSum: the weighted sum of n_used expert rows, (rows, weights) in.
inline bool moe_sum_well_formed(const graph::Node& n) {
  const auto* m = std::get_if<graph::MoeSumMeta>(&n.meta);
  return m != nullptr && m->n_used >= 1 && n.dtype == graph::DType::kF32 && n.inputs.size() == 2;
}

// A GLU with constants (gpt-oss's clamped SwiGLU): f32 of (gate, up).
inline bool glu_pair_well_formed(const graph::Node& n) {
  return std::holds_alternative<graph::GluMeta>(n.meta) && n.dtype == graph::DType::kF32 &&
         n.inputs.size() == 2;
}

// A KV cache row type of backend.h's KvPair: F32, F16, or Q8_0 where a
// head's values are whole Q8_0 blocks.
inline bool kv_row_type_ok(quant::TensorType t, int64_t head_dim) {
  return t == quant::TensorType::F32 || t == quant::TensorType::F16 ||
         (t == quant::TensorType::Q8_0 && head_dim % 32 == 0);
}

// One of the checks above as an op-table entry whose checks also take what
// the backend holds (its weights, or the backend itself), unused here.
template <bool (*Check)(const graph::Node&), typename Held>
bool node_only(const graph::Node& n, const Held&) {
  return Check(n);
}

}  // namespace minfer::backend
