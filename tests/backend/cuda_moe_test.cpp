// The CUDA backend's mixture-of-experts ops: selection and gating against the
// CPU backend (same ids; weights within 1e-6), the expert matmul against
// dequantized weights times f32 activations summed in double, for every
// decoded type and both input layouts, its rows independent of the batch
// bit for bit, the weighted sum as the contract orders it, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>

#include "backend/backend_testutil.h"
#include "backend/cuda_testutil.h"

namespace minfer::cuda::testing {
namespace {

using cpu::testing::random_floats;
using graph::DType;
using graph::MoeGating;
using graph::Node;
using graph::Op;
using quant::TensorType;

Node route_node(Op op, int64_t n_tokens, int64_t n_expert, int64_t n_used, MoeGating gating) {
  Node n = make_node(op, n_used, n_tokens, graph::MoeRouteMeta{n_expert, n_used, gating});
  n.dtype = op == Op::kMoeTopK ? DType::kI32 : DType::kF32;
  n.inputs = op == Op::kMoeTopK ? std::vector<graph::NodeId>{0} : std::vector<graph::NodeId>{0, 1};
  return n;
}

std::vector<int32_t> as_ids(const std::vector<float>& raw) {
  std::vector<int32_t> ids(raw.size());
  std::memcpy(ids.data(), raw.data(), raw.size() * sizeof(int32_t));
  return ids;
}

TEST(cuda_Moe, SelectionAndGatingMatchCpu) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  const int64_t n_expert = 128, n_used = 8;
  for (MoeGating gating :
       {MoeGating::kSoftmax, MoeGating::kSoftmaxNormalized, MoeGating::kTopKSoftmax}) {
    for (int64_t n_tokens : {1, 7, 300}) {
      const auto logits =
          random_floats(n_tokens * n_expert, 5 + static_cast<uint32_t>(n_tokens), 2.0f);
      const Node topk = route_node(Op::kMoeTopK, n_tokens, n_expert, n_used, gating);
      auto got = run_node(*b.gpu, topk, {bytes_of(logits)});
      ASSERT_TRUE(got.is_ok()) << got.message();
      auto want = run_node(*b.cpu, topk, {bytes_of(logits)});
      ASSERT_TRUE(want.is_ok()) << want.message();
      const std::vector<int32_t> ids = as_ids(*want);
      EXPECT_EQ(as_ids(*got), ids) << "gating " << static_cast<int>(gating);
      const Node weights = route_node(Op::kMoeWeights, n_tokens, n_expert, n_used, gating);
      auto gw = run_node(*b.gpu, weights, {bytes_of(logits), bytes_of(ids)});
      ASSERT_TRUE(gw.is_ok()) << gw.message();
      auto cw = run_node(*b.cpu, weights, {bytes_of(logits), bytes_of(ids)});
      ASSERT_TRUE(cw.is_ok()) << cw.message();
      const double diff = max_abs_diff(*gw, *cw);
      std::printf("  gating %d tokens %lld weights max diff %.2e\n", static_cast<int>(gating),
                  static_cast<long long>(n_tokens), diff);
      EXPECT_LT(diff, 1e-6);
    }
  }
}

TEST(cuda_Moe, SelectionBreaksTiesToTheLowerIdAndRefusesNaN) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  std::vector<float> logits(64, 0.5f);
  logits[40] = 2.0f;
  const Node topk = route_node(Op::kMoeTopK, 1, 64, 4, MoeGating::kTopKSoftmax);
  auto got = run_node(*b.gpu, topk, {bytes_of(logits)});
  ASSERT_TRUE(got.is_ok()) << got.message();
  EXPECT_EQ(as_ids(*got), (std::vector<int32_t>{40, 0, 1, 2}));
  logits[7] = std::nanf("");
  auto bad = run_node(*b.gpu, topk, {bytes_of(logits)});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("NaN"), std::string::npos) << bad.message();
}

// n_expert experts of [rows x row_len] as one 3-D weight "experts", and
// their values as the reference decodes them.
std::vector<float> add_experts(model::Weights& w, TensorType type, int64_t n_expert, int64_t rows,
                               int64_t row_len, uint32_t seed) {
  const auto v = random_floats(n_expert * rows * row_len, seed, 0.1f);
  const size_t rb = quant::row_bytes(type, row_len).value();
  std::vector<uint8_t> data(rb * static_cast<size_t>(n_expert * rows));
  std::vector<float> decoded(v.size());
  for (int64_t r = 0; r < n_expert * rows; ++r) {
    uint8_t* dst = data.data() + static_cast<size_t>(r) * rb;
    EXPECT_TRUE(quant::quantize_row(type, v.data() + r * row_len, dst, row_len).is_ok());
    EXPECT_TRUE(quant::dequantize_row(type, dst, decoded.data() + r * row_len, row_len).is_ok());
  }
  const Status s = w.add_derived("experts", type, {row_len, rows, n_expert}, std::move(data));
  EXPECT_TRUE(s.is_ok()) << s.message();
  return decoded;
}

Node matmul_id_node(TensorType type, int64_t in, int64_t out, int64_t n_expert, int64_t n_used,
                    int64_t n_tokens, bool per_row) {
  graph::MatMulIdMeta m;
  m.weight = "experts";
  m.weight_type = type;
  m.in_dim = in;
  m.out_dim = out;
  m.n_expert = n_expert;
  m.n_used = n_used;
  m.per_row_input = per_row;
  Node n = make_node(Op::kMatMulId, out, n_tokens * n_used, m);
  n.inputs = {0, 1};
  return n;
}

std::vector<int32_t> random_ids(int64_t n_tokens, int64_t n_used, int64_t n_expert, uint32_t seed) {
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

TEST(cuda_Moe, ExpertMatmulMatchesDequantizedReference) {
  MINFER_SKIP_WITHOUT_CUDA();
  const int64_t n_expert = 16, n_used = 4, in = 512, out = 96;
  for (TensorType type : {TensorType::Q4_K, TensorType::Q8_0, TensorType::Q4_0, TensorType::F16,
                          TensorType::Q6_K, TensorType::F32, TensorType::MXFP4}) {
    Backends b;
    const std::vector<float> w = add_experts(b.weights, type, n_expert, out, in, 31);
    b.start();
    for (bool per_row : {false, true}) {
      for (int64_t n_tokens : {1, 5, 40}) {
        const int64_t x_rows = per_row ? n_tokens * n_used : n_tokens;
        const auto x = random_floats(x_rows * in, 32);
        const auto ids = random_ids(n_tokens, n_used, n_expert, 33);
        const Node n = matmul_id_node(type, in, out, n_expert, n_used, n_tokens, per_row);
        auto got = run_node(*b.gpu, n, {bytes_of(x), bytes_of(ids)});
        ASSERT_TRUE(got.is_ok()) << got.message();
        double worst = 0.0;
        for (int64_t i = 0; i < n_tokens * n_used; ++i) {
          const float* xr = x.data() + (per_row ? i : i / n_used) * in;
          const float* we = w.data() + static_cast<int64_t>(ids[i]) * out * in;
          for (int64_t o = 0; o < out; ++o) {
            double sum = 0.0, mag = 0.0;
            for (int64_t k = 0; k < in; ++k) {
              sum += static_cast<double>(we[o * in + k]) * xr[k];
              mag += std::fabs(static_cast<double>(we[o * in + k]) * xr[k]);
            }
            const double err = std::fabs((*got)[i * out + o] - sum) / (mag + 1e-6);
            worst = std::max(worst, err);
          }
        }
        std::printf("  %-5s per_row %d tokens %2lld: worst error / magnitude %.2e\n",
                    std::string(quant::type_name(type)).c_str(), per_row,
                    static_cast<long long>(n_tokens), worst);
        EXPECT_LT(worst, 1e-5) << quant::type_name(type);
      }
    }
  }
}

TEST(cuda_Moe, ExpertMatmulRowsDoNotDependOnTheBatch) {
  MINFER_SKIP_WITHOUT_CUDA();
  const int64_t n_expert = 8, n_used = 2, in = 256, out = 64, n_tokens = 33;
  Backends b;
  add_experts(b.weights, TensorType::Q4_K, n_expert, out, in, 41);
  b.start();
  const auto x = random_floats(n_tokens * in, 42);
  const auto ids = random_ids(n_tokens, n_used, n_expert, 43);
  auto all =
      run_node(*b.gpu, matmul_id_node(TensorType::Q4_K, in, out, n_expert, n_used, n_tokens, false),
               {bytes_of(x), bytes_of(ids)});
  ASSERT_TRUE(all.is_ok()) << all.message();
  for (int64_t t : {0, 17, 32}) {
    const std::vector<float> xt(x.begin() + t * in, x.begin() + (t + 1) * in);
    const std::vector<int32_t> it(ids.begin() + t * n_used, ids.begin() + (t + 1) * n_used);
    auto one =
        run_node(*b.gpu, matmul_id_node(TensorType::Q4_K, in, out, n_expert, n_used, 1, false),
                 {bytes_of(xt), bytes_of(it)});
    ASSERT_TRUE(one.is_ok()) << one.message();
    for (int64_t i = 0; i < n_used * out; ++i) {
      ASSERT_EQ((*one)[i], (*all)[t * n_used * out + i]) << "token " << t << " value " << i;
    }
  }
}

TEST(cuda_Moe, ExpertIdOutOfRangeIsAnError) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  add_experts(b.weights, TensorType::Q8_0, 4, 32, 64, 51);
  b.start();
  const auto x = random_floats(64, 52);
  const std::vector<int32_t> ids = {1, 9};
  auto got = run_node(*b.gpu, matmul_id_node(TensorType::Q8_0, 64, 32, 4, 2, 1, false),
                      {bytes_of(x), bytes_of(ids)});
  ASSERT_FALSE(got.is_ok());
  EXPECT_NE(got.message().find("expert id 9"), std::string::npos) << got.message();
}

TEST(cuda_Moe, WeightedSumRoundsInOrder) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  const int64_t n_tokens = 9, n_used = 8, dim = 2048;
  const auto y = random_floats(n_tokens * n_used * dim, 61);
  const auto w = random_floats(n_tokens * n_used, 62, 0.3f);
  Node n = make_node(Op::kMoeSum, dim, n_tokens, graph::MoeSumMeta{n_used});
  n.inputs = {0, 1};
  auto got = run_node(*b.gpu, n, {bytes_of(y), bytes_of(w)});
  ASSERT_TRUE(got.is_ok()) << got.message();
  auto cpu = run_node(*b.cpu, n, {bytes_of(y), bytes_of(w)});
  ASSERT_TRUE(cpu.is_ok()) << cpu.message();
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t d = 0; d < dim; ++d) {
      float s = y[(t * n_used) * dim + d] * w[t * n_used];
      for (int64_t j = 1; j < n_used; ++j) {
        const float p = y[(t * n_used + j) * dim + d] * w[t * n_used + j];
        s = s + p;
      }
      ASSERT_EQ((*got)[t * dim + d], s) << "token " << t << " element " << d;
    }
  }
  EXPECT_EQ(max_abs_diff(*got, *cpu), 0.0);
}

}  // namespace
}  // namespace minfer::cuda::testing
