// What the mixture-of-experts tests of every backend share (moe_test.cpp on
// the CPU kernels, cuda_moe_test.cpp and vulkan_moe_test.cpp on graph nodes):
// random routing, random expert weights quantized by the reference, the
// plain references the expert matmul and the weighted sum are checked
// against (the matmul from the dequantized weights summed in double, the sum
// rounded in the contract's order), and the MoE graph nodes the GPU tests
// run. One reference for all, so that the backends are held to the same
// contract (graph/ir.h's MatMulIdMeta, MoeSumMeta); selection and gating are
// reference_ops.h's (topk_ref, weights_ref).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cuda_testutil.h"
#include "graph/ir.h"
#include "model/weights.h"
#include "quant/tensor_type.h"

namespace minfer::backend::testing {

// Each token's n_used distinct experts, drawn at random from n_expert.
inline std::vector<int32_t> random_expert_ids(int64_t n_tokens, int64_t n_used, int64_t n_expert,
                                              uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<int32_t> all(static_cast<size_t>(n_expert));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + n_used);
  }
  return ids;
}

// n_expert experts of [rows x row_len] from random values of `scale`, each
// row quantized by the reference, and the values those rows decode to (what
// a kernel must compute with).
struct EncodedExperts {
  std::vector<uint8_t> bytes;  // [n_expert][rows] rows of `type`
  std::vector<float> decoded;  // [n_expert][rows][row_len]
  size_t expert_bytes = 0;     // one expert's share of `bytes`
};

inline EncodedExperts encode_experts(quant::TensorType type, int64_t n_expert, int64_t rows,
                                     int64_t row_len, uint32_t seed, float scale) {
  EncodedExperts e;
  const std::vector<float> v = cpu::testing::random_floats(n_expert * rows * row_len, seed, scale);
  for (int64_t r = 0; r < n_expert * rows; ++r) {
    const std::vector<float> row(v.begin() + r * row_len, v.begin() + (r + 1) * row_len);
    const std::vector<uint8_t> enc = cpu::testing::encode(type, row);
    e.bytes.insert(e.bytes.end(), enc.begin(), enc.end());
    const std::vector<float> dec = cpu::testing::decode(type, enc.data(), row_len);
    e.decoded.insert(e.decoded.end(), dec.begin(), dec.end());
  }
  e.expert_bytes = e.bytes.size() / static_cast<size_t>(n_expert);
  return e;
}

// encode_experts() as the 3-D weight "experts" of `w`; returns the decoded
// values.
inline std::vector<float> add_experts(model::Weights& w, quant::TensorType type, int64_t n_expert,
                                      int64_t rows, int64_t row_len, uint32_t seed, float scale) {
  EncodedExperts e = encode_experts(type, n_expert, rows, row_len, seed, scale);
  const Status s = w.add_derived("experts", type, {row_len, rows, n_expert}, std::move(e.bytes));
  EXPECT_TRUE(s.is_ok()) << s.message();
  return std::move(e.decoded);
}

// The expert matmul in double: row r of y is W[ids[r]] times x row r / n_used
// (x row r with `per_row`), plus the expert's bias row when `bias` is given
// ([n_expert][out]); `magnitude` is the sum of the products' magnitudes, the
// scale a rounding error is measured against.
struct ExpertMatmulReference {
  std::vector<double> y;          // [ids.size()][out]
  std::vector<double> magnitude;  // the same shape
};

inline ExpertMatmulReference matmul_id_reference(const std::vector<float>& decoded,
                                                 const std::vector<float>& bias,
                                                 const std::vector<float>& x,
                                                 const std::vector<int32_t>& ids, int64_t in,
                                                 int64_t out, int64_t n_used, bool per_row) {
  ExpertMatmulReference ref;
  for (size_t r = 0; r < ids.size(); ++r) {
    const int64_t row = static_cast<int64_t>(r);
    const float* xr = x.data() + (per_row ? row : row / n_used) * in;
    const float* we = decoded.data() + static_cast<int64_t>(ids[r]) * out * in;
    for (int64_t o = 0; o < out; ++o) {
      double sum = bias.empty() ? 0.0 : bias[ids[r] * out + o], mag = std::fabs(sum);
      for (int64_t k = 0; k < in; ++k) {
        sum += static_cast<double>(we[o * in + k]) * xr[k];
        mag += std::fabs(static_cast<double>(we[o * in + k]) * xr[k]);
      }
      ref.y.push_back(sum);
      ref.magnitude.push_back(mag);
    }
  }
  return ref;
}

// The largest |got - y| / (magnitude + 1e-6) over the outputs.
inline double worst_relative_error(const std::vector<float>& got,
                                   const ExpertMatmulReference& want) {
  EXPECT_EQ(got.size(), want.y.size());
  double worst = 0.0;
  for (size_t i = 0; i < got.size() && i < want.y.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - want.y[i]) / (want.magnitude[i] + 1e-6));
  }
  return worst;
}

// The weighted sum as MoeSumMeta orders it: row t = (y[t*k] * w[0,t] +
// y[t*k+1] * w[1,t]) + ..., each product rounded to f32 and added in order of
// j (volatile: no fused multiply-add).
inline std::vector<float> moe_sum_reference(const std::vector<float>& y,
                                            const std::vector<float>& w, int64_t n_tokens,
                                            int64_t n_used, int64_t dim) {
  std::vector<float> out(static_cast<size_t>(n_tokens * dim));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t d = 0; d < dim; ++d) {
      volatile float acc = y[(t * n_used) * dim + d] * w[t * n_used];
      for (int64_t j = 1; j < n_used; ++j) {
        volatile float p = y[(t * n_used + j) * dim + d] * w[t * n_used + j];
        acc = acc + p;
      }
      out[t * dim + d] = acc;
    }
  }
  return out;
}

// A kMoeTopK node (i32 ids from the logits, input 0) or a kMoeWeights node
// (f32 weights from the logits and the ids, inputs 0 and 1).
inline graph::Node moe_route_node(graph::Op op, int64_t n_tokens, int64_t n_expert, int64_t n_used,
                                  graph::MoeGating gating) {
  graph::Node n =
      cuda::testing::make_node(op, n_used, n_tokens, graph::MoeRouteMeta{n_expert, n_used, gating});
  n.dtype = op == graph::Op::kMoeTopK ? graph::DType::kI32 : graph::DType::kF32;
  n.inputs =
      op == graph::Op::kMoeTopK ? std::vector<graph::NodeId>{0} : std::vector<graph::NodeId>{0, 1};
  return n;
}

// A kMoeTopK node's output (run_node returns every output as floats) as ids.
inline std::vector<int32_t> as_ids(const std::vector<float>& raw) {
  std::vector<int32_t> ids(raw.size());
  std::memcpy(ids.data(), raw.data(), raw.size() * sizeof(int32_t));
  return ids;
}

struct MatmulIdOptions {
  bool bias = false;             // add the rows of "experts.bias" [n_expert][out]
  bool batch_invariant = false;  // MatMulIdMeta::batch_invariant
};

// A kMatMulId node over the weight "experts" (add_experts()): inputs x
// (node 0) and the ids (node 1), output [n_tokens * n_used][out].
inline graph::Node matmul_id_node(quant::TensorType type, int64_t in, int64_t out, int64_t n_expert,
                                  int64_t n_used, int64_t n_tokens, bool per_row,
                                  MatmulIdOptions options = {}) {
  graph::MatMulIdMeta m;
  m.weight = "experts";
  m.bias = options.bias ? "experts.bias" : "";
  m.weight_type = type;
  m.in_dim = in;
  m.out_dim = out;
  m.n_expert = n_expert;
  m.n_used = n_used;
  m.per_row_input = per_row;
  m.batch_invariant = options.batch_invariant;
  graph::Node n = cuda::testing::make_node(graph::Op::kMatMulId, out, n_tokens * n_used, m);
  n.inputs = {0, 1};
  return n;
}

}  // namespace minfer::backend::testing
