// The CUDA backend's mixture-of-experts ops: selection and gating against the
// CPU backend (same ids; weights within 1e-6); the expert matmul's f32 path
// (MINFER_GEMV_F32) against dequantized weights times f32 activations summed
// in double, for every decoded type and both input layouts; its int8
// tensor-core path (the default for Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4)
// against the same weights times the activations as the kernels quantize
// them (q8_emulation.h), with batches that put one to many rows on each
// expert; rows independent of the batch bit for bit on both paths; the
// weighted sum as the contract orders it, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cuda_testutil.h"
#include "backend/moe_testutil.h"
#include "backend/q8_emulation.h"

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
  ScopedEnv f32_path("MINFER_GEMV_F32", "1");
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

// Row i of the int8 product against the emulation: |got - emulated| <=
// 1e-5 * sum |w x^| + 1e-6 (f32 sums of exact integer dots, as
// cuda_gemv_q8_test.cpp holds the dense products).
double worst_against_emulation(const std::vector<float>& got, const std::vector<float>& w,
                               const Quantized& q, const std::vector<int32_t>& ids, int64_t in,
                               int64_t out, int64_t n_used, bool per_row) {
  double worst = 0.0;
  for (size_t r = 0; r < ids.size(); ++r) {
    const int64_t row = static_cast<int64_t>(r);
    const double* xr = q.value.data() + (per_row ? row : row / n_used) * in;
    const float* we = w.data() + static_cast<int64_t>(ids[r]) * out * in;
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0.0, scale = 0.0;
      for (int64_t k = 0; k < in; ++k) {
        sum += double(we[o * in + k]) * xr[k];
        scale += std::fabs(double(we[o * in + k]) * xr[k]);
      }
      worst = std::max(worst, std::fabs(got[r * out + o] - sum) / (1e-5 * scale + 1e-6));
    }
  }
  return worst;
}

TEST(cuda_Moe, ExpertMatmulOnInt8TensorCoresMatchesEmulation) {
  MINFER_SKIP_WITHOUT_CUDA();
  ScopedEnv int8_path("MINFER_GEMV_F32", nullptr);
  const int64_t n_expert = 16, n_used = 4, in = 512, out = 96;
  for (TensorType type : {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q5_K,
                          TensorType::Q6_K, TensorType::MXFP4}) {
    Backends b;
    const std::vector<float> w = add_experts(b.weights, type, n_expert, out, in, 71, 0.1f);
    b.start();
    for (bool per_row : {false, true}) {
      // 1 to 75 rows an expert: groups of 8 and of 16 rows, partial groups.
      for (int64_t n_tokens : {1, 5, 40, 300}) {
        const int64_t x_rows = per_row ? n_tokens * n_used : n_tokens;
        const auto x = random_floats(x_rows * in, 72);
        const auto ids = random_expert_ids(n_tokens, n_used, n_expert, 73);
        const Node n = matmul_id_node(type, in, out, n_expert, n_used, n_tokens, per_row);
        auto got = run_node(*b.gpu, n, {bytes_of(x), bytes_of(ids)});
        ASSERT_TRUE(got.is_ok()) << got.message();
        const double worst = worst_against_emulation(
            *got, w, quantize_like_gpu(x, tensor_core_span(type)), ids, in, out, n_used, per_row);
        std::printf("  int8 %-5s per_row %d tokens %3lld: worst error / tolerance %.2f\n",
                    std::string(quant::type_name(type)).c_str(), per_row,
                    static_cast<long long>(n_tokens), worst);
        EXPECT_LE(worst, 1.0) << quant::type_name(type) << " per_row " << per_row << " tokens "
                              << n_tokens;
      }
    }
  }
}

// A token's rows in a batch of 33 (and of 300, where experts take groups of
// 16) equal its rows alone, on the f32 path and on the int8 one.
TEST(cuda_Moe, ExpertMatmulRowsDoNotDependOnTheBatch) {
  MINFER_SKIP_WITHOUT_CUDA();
  const int64_t n_expert = 8, n_used = 2, in = 256, out = 64;
  for (const char* f32 : {"1", static_cast<const char*>(nullptr)}) {
    ScopedEnv path("MINFER_GEMV_F32", f32);
    for (TensorType type : {TensorType::Q4_K, TensorType::MXFP4}) {
      Backends b;
      add_experts(b.weights, type, n_expert, out, in, 41, 0.1f);
      b.start();
      for (int64_t n_tokens : {33, 300}) {
        const auto x = random_floats(n_tokens * in, 42);
        const auto ids = random_expert_ids(n_tokens, n_used, n_expert, 43);
        auto all =
            run_node(*b.gpu, matmul_id_node(type, in, out, n_expert, n_used, n_tokens, false),
                     {bytes_of(x), bytes_of(ids)});
        ASSERT_TRUE(all.is_ok()) << all.message();
        for (int64_t t : {int64_t{0}, int64_t{17}, n_tokens - 1}) {
          const std::vector<float> xt(x.begin() + t * in, x.begin() + (t + 1) * in);
          const std::vector<int32_t> it(ids.begin() + t * n_used, ids.begin() + (t + 1) * n_used);
          auto one = run_node(*b.gpu, matmul_id_node(type, in, out, n_expert, n_used, 1, false),
                              {bytes_of(xt), bytes_of(it)});
          ASSERT_TRUE(one.is_ok()) << one.message();
          for (int64_t i = 0; i < n_used * out; ++i) {
            ASSERT_EQ((*one)[i], (*all)[t * n_used * out + i])
                << quant::type_name(type) << (f32 != nullptr ? " f32" : " int8") << " batch "
                << n_tokens << " token " << t << " value " << i;
          }
        }
      }
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
