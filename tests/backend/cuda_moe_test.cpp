// The CUDA backend's mixture-of-experts ops: selection and gating against the
// CPU backend (same ids; weights within 1e-6), the expert matmul against
// dequantized weights times f32 activations summed in double, for every
// decoded type and both input layouts, its rows independent of the batch
// bit for bit, the weighted sum as the contract orders it, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "backend/backend_testutil.h"
#include "backend/cuda_testutil.h"
#include "backend/moe_testutil.h"

namespace minfer::cuda::testing {
namespace {

using backend::testing::add_experts;
using backend::testing::as_ids;
using backend::testing::matmul_id_node;
using backend::testing::matmul_id_reference;
using backend::testing::moe_route_node;
using backend::testing::moe_sum_reference;
using backend::testing::random_expert_ids;
using backend::testing::worst_relative_error;
using cpu::testing::random_floats;
using graph::MoeGating;
using graph::Node;
using graph::Op;
using quant::TensorType;

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
      const Node topk = moe_route_node(Op::kMoeTopK, n_tokens, n_expert, n_used, gating);
      auto got = run_node(*b.gpu, topk, {bytes_of(logits)});
      ASSERT_TRUE(got.is_ok()) << got.message();
      auto want = run_node(*b.cpu, topk, {bytes_of(logits)});
      ASSERT_TRUE(want.is_ok()) << want.message();
      const std::vector<int32_t> ids = as_ids(*want);
      EXPECT_EQ(as_ids(*got), ids) << "gating " << static_cast<int>(gating);
      const Node weights = moe_route_node(Op::kMoeWeights, n_tokens, n_expert, n_used, gating);
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
  const Node topk = moe_route_node(Op::kMoeTopK, 1, 64, 4, MoeGating::kTopKSoftmax);
  auto got = run_node(*b.gpu, topk, {bytes_of(logits)});
  ASSERT_TRUE(got.is_ok()) << got.message();
  EXPECT_EQ(as_ids(*got), (std::vector<int32_t>{40, 0, 1, 2}));
  logits[7] = std::nanf("");
  auto bad = run_node(*b.gpu, topk, {bytes_of(logits)});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("NaN"), std::string::npos) << bad.message();
}

TEST(cuda_Moe, ExpertMatmulMatchesDequantizedReference) {
  MINFER_SKIP_WITHOUT_CUDA();
  const int64_t n_expert = 16, n_used = 4, in = 512, out = 96;
  for (TensorType type : {TensorType::Q4_K, TensorType::Q8_0, TensorType::Q4_0, TensorType::F16,
                          TensorType::Q6_K, TensorType::F32, TensorType::MXFP4}) {
    Backends b;
    const std::vector<float> w = add_experts(b.weights, type, n_expert, out, in, 31, 0.1f);
    b.start();
    for (bool per_row : {false, true}) {
      for (int64_t n_tokens : {1, 5, 40}) {
        const int64_t x_rows = per_row ? n_tokens * n_used : n_tokens;
        const auto x = random_floats(x_rows * in, 32);
        const auto ids = random_expert_ids(n_tokens, n_used, n_expert, 33);
        const Node n = matmul_id_node(type, in, out, n_expert, n_used, n_tokens, per_row);
        auto got = run_node(*b.gpu, n, {bytes_of(x), bytes_of(ids)});
        ASSERT_TRUE(got.is_ok()) << got.message();
        const double worst = worst_relative_error(
            *got, matmul_id_reference(w, {}, x, ids, in, out, n_used, per_row));
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
  add_experts(b.weights, TensorType::Q4_K, n_expert, out, in, 41, 0.1f);
  b.start();
  const auto x = random_floats(n_tokens * in, 42);
  const auto ids = random_expert_ids(n_tokens, n_used, n_expert, 43);
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
  add_experts(b.weights, TensorType::Q8_0, 4, 32, 64, 51, 0.1f);
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
  const std::vector<float> want = moe_sum_reference(y, w, n_tokens, n_used, dim);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t d = 0; d < dim; ++d) {
      ASSERT_EQ((*got)[t * dim + d], want[t * dim + d]) << "token " << t << " element " << d;
    }
  }
  EXPECT_EQ(max_abs_diff(*got, *cpu), 0.0);
}

}  // namespace
}  // namespace minfer::cuda::testing
