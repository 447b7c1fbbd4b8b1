// The mixture-of-experts ops on the shared GPU layer, run as graph nodes on
// the Vulkan backend (lavapipe in CI): selection equal to the CPU backend's
// ids and gating weights within 1e-6 of its; the expert matmul against the
// dequantized weights times f32 activations summed in double, for every
// weight type the matmul variants decode and both input layouts, each row
// bit for bit the same alone and in a batch; the weighted sum exactly as the
// contract orders it; NaN router logits and expert ids out of range as
// errors naming them. The node helpers (make_node, run_node, bytes_of) are
// the backend-agnostic ones of cuda_testutil.h, the MoE nodes and references
// those of moe_testutil.h.
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cuda_testutil.h"
#include "backend/moe_testutil.h"
#include "backend/vulkan/vulkan_backend.h"
#include "backend/vulkan_matmul_testutil.h"
#include "vulkan_options.h"

namespace minfer::vulkan::testing {
namespace {

using backend::testing::add_experts;
using backend::testing::as_ids;
using backend::testing::matmul_id_node;
using backend::testing::matmul_id_reference;
using backend::testing::MatmulIdOptions;
using backend::testing::moe_route_node;
using backend::testing::moe_sum_reference;
using backend::testing::random_expert_ids;
using backend::testing::worst_relative_error;
using cpu::testing::random_floats;
using cuda::testing::bytes_of;
using cuda::testing::make_node;
using cuda::testing::run_node;
using graph::MoeGating;
using graph::Node;
using graph::Op;
using quant::TensorType;

// The Vulkan backend and the CPU backend over one weight table (fill
// `weights` before start()).
struct Backends {
  model::Weights weights;
  std::unique_ptr<backend::Backend> gpu;
  std::unique_ptr<cpu::CpuBackend> cpu;
  void start() {
    auto g = create_backend(weights, ::minfer::testing::vulkan_options());
    ASSERT_TRUE(g.is_ok()) << g.message();
    gpu = std::move(g).value();
    cpu = std::make_unique<cpu::CpuBackend>(weights, 2);
  }
};

// Every expert matmul here asks for batch-invariant rows: the tests compare
// rows bit for bit across batches and against the plain batch-invariant matmul.
constexpr MatmulIdOptions kInvariant{.batch_invariant = true};
constexpr MatmulIdOptions kInvariantWithBias{.bias = true, .batch_invariant = true};

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    m = d > m || d != d ? d : m;
  }
  return m;
}

TEST(VulkanMoe, SelectionAndGatingMatchTheCpu) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  Backends b;
  b.start();
  struct Case {
    int64_t n_expert, n_used;
  };
  for (const Case& c : {Case{8, 2}, Case{60, 4}, Case{128, 8}, Case{512, 32}, Case{37, 32}}) {
    for (MoeGating gating :
         {MoeGating::kSoftmax, MoeGating::kSoftmaxNormalized, MoeGating::kTopKSoftmax}) {
      for (int64_t n_tokens : {1, 7, 70}) {
        const auto seed = static_cast<uint32_t>(c.n_expert * 100 + n_tokens);
        const auto logits = random_floats(n_tokens * c.n_expert, seed, 2.0f);
        const Node topk = moe_route_node(Op::kMoeTopK, n_tokens, c.n_expert, c.n_used, gating);
        ASSERT_TRUE(b.gpu->supports_op(topk));
        auto got = run_node(*b.gpu, topk, {bytes_of(logits)});
        ASSERT_TRUE(got.is_ok()) << got.message();
        auto want = run_node(*b.cpu, topk, {bytes_of(logits)});
        ASSERT_TRUE(want.is_ok()) << want.message();
        const std::vector<int32_t> ids = as_ids(*want);
        EXPECT_EQ(as_ids(*got), ids) << c.n_used << " of " << c.n_expert << ", gating "
                                     << static_cast<int>(gating) << ", " << n_tokens << " tokens";
        const Node weights =
            moe_route_node(Op::kMoeWeights, n_tokens, c.n_expert, c.n_used, gating);
        ASSERT_TRUE(b.gpu->supports_op(weights));
        auto gw = run_node(*b.gpu, weights, {bytes_of(logits), bytes_of(ids)});
        ASSERT_TRUE(gw.is_ok()) << gw.message();
        auto cw = run_node(*b.cpu, weights, {bytes_of(logits), bytes_of(ids)});
        ASSERT_TRUE(cw.is_ok()) << cw.message();
        EXPECT_LT(max_diff(*gw, *cw), 1e-6)
            << c.n_used << " of " << c.n_expert << ", gating " << static_cast<int>(gating);
      }
    }
  }
}

TEST(VulkanMoe, SelectionBreaksTiesToTheLowerId) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  Backends b;
  b.start();
  std::vector<float> logits(200, 0.5f);
  logits[150] = 2.0f;
  logits[99] = logits[3] = 1.0f;
  for (MoeGating gating : {MoeGating::kSoftmax, MoeGating::kTopKSoftmax}) {
    const Node topk = moe_route_node(Op::kMoeTopK, 1, 200, 6, gating);
    auto got = run_node(*b.gpu, topk, {bytes_of(logits)});
    ASSERT_TRUE(got.is_ok()) << got.message();
    EXPECT_EQ(as_ids(*got), (std::vector<int32_t>{150, 3, 99, 0, 1, 2}));
  }
  // -inf logits are still experts (top-k softmax selects on the logits).
  std::vector<float> low(16, -INFINITY);
  low[9] = 0.0f;
  auto got = run_node(*b.gpu, moe_route_node(Op::kMoeTopK, 1, 16, 3, MoeGating::kTopKSoftmax),
                      {bytes_of(low)});
  ASSERT_TRUE(got.is_ok()) << got.message();
  EXPECT_EQ(as_ids(*got), (std::vector<int32_t>{9, 0, 1}));
}

TEST(VulkanMoe, NaNRouterLogitIsAnErrorNamingTheToken) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  Backends b;
  b.start();
  auto logits = random_floats(3 * 64, 71);
  logits[2 * 64 + 7] = std::nanf("");
  auto bad = run_node(*b.gpu, moe_route_node(Op::kMoeTopK, 3, 64, 4, MoeGating::kSoftmax),
                      {bytes_of(logits)});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("NaN router logit in token 2"), std::string::npos) << bad.message();
  // The error words are cleared: the next run is clean.
  logits[2 * 64 + 7] = 0.0f;
  auto good = run_node(*b.gpu, moe_route_node(Op::kMoeTopK, 3, 64, 4, MoeGating::kSoftmax),
                       {bytes_of(logits)});
  EXPECT_TRUE(good.is_ok()) << good.message();
}

TEST(VulkanMoe, RoutingPastTheKernelsIsLeftToTheCpu) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  Backends b;
  b.start();
  EXPECT_FALSE(b.gpu->supports_op(moe_route_node(Op::kMoeTopK, 1, 1024, 8, MoeGating::kSoftmax)));
  EXPECT_FALSE(
      b.gpu->supports_op(moe_route_node(Op::kMoeWeights, 1, 128, 33, MoeGating::kSoftmax)));
}

TEST(VulkanMoe, ExpertMatmulMatchesTheDequantizedReferenceForEveryType) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  // Small enough for lavapipe; out_dim 40 leaves a partial workgroup of rows.
  const int64_t n_expert = 16, n_used = 4, in = 512, out = 40;
  for (TensorType type : kWeightTypes) {
    Backends b;
    const std::vector<float> w = add_experts(b.weights, type, n_expert, out, in, 31, 1.0f);
    b.start();
    for (bool per_row : {false, true}) {
      for (int64_t n_tokens : {1, 3, 17}) {
        const int64_t x_rows = per_row ? n_tokens * n_used : n_tokens;
        const auto x = random_floats(x_rows * in, 32);
        const auto ids = random_expert_ids(n_tokens, n_used, n_expert, 33);
        const Node n =
            matmul_id_node(type, in, out, n_expert, n_used, n_tokens, per_row, kInvariant);
        ASSERT_TRUE(b.gpu->supports_op(n)) << quant::type_name(type);
        auto got = run_node(*b.gpu, n, {bytes_of(x), bytes_of(ids)});
        ASSERT_TRUE(got.is_ok()) << got.message();
        const double worst = worst_relative_error(
            *got, matmul_id_reference(w, {}, x, ids, in, out, n_used, per_row));
        EXPECT_LT(worst, 1e-5) << quant::type_name(type) << " per_row " << per_row << " tokens "
                               << n_tokens;
      }
    }
  }
}

TEST(VulkanMoe, ExpertMatmulAddsTheExpertsBiasRow) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  const int64_t n_expert = 8, n_used = 2, in = 256, out = 40, n_tokens = 6;
  Backends b;
  const std::vector<float> w =
      add_experts(b.weights, TensorType::Q8_0, n_expert, out, in, 35, 1.0f);
  const auto bias = random_floats(out * n_expert, 36);
  cuda::testing::add_weight(b.weights, "experts.bias", TensorType::F32, n_expert, out, bias);
  b.start();
  const auto x = random_floats(n_tokens * in, 37);
  const auto ids = random_expert_ids(n_tokens, n_used, n_expert, 38);
  const Node n = matmul_id_node(TensorType::Q8_0, in, out, n_expert, n_used, n_tokens, false,
                                kInvariantWithBias);
  ASSERT_TRUE(b.gpu->supports_op(n));
  auto got = run_node(*b.gpu, n, {bytes_of(x), bytes_of(ids)});
  ASSERT_TRUE(got.is_ok()) << got.message();
  EXPECT_LT(
      worst_relative_error(*got, matmul_id_reference(w, bias, x, ids, in, out, n_used, false)),
      1e-5);
}

TEST(VulkanMoe, ExpertMatmulRowsDoNotDependOnTheBatch) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  const int64_t n_expert = 8, n_used = 2, in = 2048, out = 64, n_tokens = 33;
  for (TensorType type : {TensorType::Q4_K, TensorType::F16, TensorType::Q5_1}) {
    Backends b;
    add_experts(b.weights, type, n_expert, out, in, 41, 1.0f);
    b.start();
    const auto x = random_floats(n_tokens * in, 42);
    const auto ids = random_expert_ids(n_tokens, n_used, n_expert, 43);
    auto all = run_node(
        *b.gpu, matmul_id_node(type, in, out, n_expert, n_used, n_tokens, false, kInvariant),
        {bytes_of(x), bytes_of(ids)});
    ASSERT_TRUE(all.is_ok()) << all.message();
    for (int64_t t : {0, 17, 32}) {
      const std::vector<float> xt(x.begin() + t * in, x.begin() + (t + 1) * in);
      const std::vector<int32_t> it(ids.begin() + t * n_used, ids.begin() + (t + 1) * n_used);
      auto one =
          run_node(*b.gpu, matmul_id_node(type, in, out, n_expert, n_used, 1, false, kInvariant),
                   {bytes_of(xt), bytes_of(it)});
      ASSERT_TRUE(one.is_ok()) << one.message();
      for (int64_t i = 0; i < n_used * out; ++i) {
        ASSERT_EQ((*one)[i], (*all)[t * n_used * out + i])
            << quant::type_name(type) << " token " << t << " value " << i;
      }
    }
  }
}

// Each row of the expert matmul has the bits of the plain row matmul of its
// expert's matrix (a 2-D weight of the same bytes) over its x row, on every
// path by which a row's lanes meet (lanes below, at and above the subgroup
// size), also when the rows outnumber the z groups and the kernel loops.
TEST(VulkanMoe, ExpertRowsEqualThePlainMatmulOfTheirExpert) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  const int64_t n_expert = 4, n_used = 2, in = 1024, out = 24, n_tokens = 5;
  for (TensorType type : {TensorType::Q4_0, TensorType::Q6_K, TensorType::F16}) {
    Backends b;
    const Weights e = encode_weights(type, n_expert * out, in, 45);
    ASSERT_TRUE(b.weights.add_derived("experts", type, {in, out, n_expert}, e.bytes).is_ok());
    const size_t expert_bytes = e.bytes.size() / n_expert;
    for (int64_t x = 0; x < n_expert; ++x) {
      const std::vector<uint8_t> one(e.bytes.begin() + x * expert_bytes,
                                     e.bytes.begin() + (x + 1) * expert_bytes);
      ASSERT_TRUE(
          b.weights.add_derived("expert." + std::to_string(x), type, {in, out}, one).is_ok());
    }
    b.start();
    const auto x = random_floats(n_tokens * in, 46);
    const auto ids = random_expert_ids(n_tokens, n_used, n_expert, 47);
    for (const shader::MatmulForTesting& how :
         {shader::MatmulForTesting{}, shader::MatmulForTesting{.lanes = 4, .id_groups = 3},
          shader::MatmulForTesting{.lanes = 8, .lane_rows = 3},
          shader::MatmulForTesting{.lanes = 64, .lane_rows = 2, .id_groups = 1}}) {
      const Forced forced(how);
      auto all = run_node(
          *b.gpu, matmul_id_node(type, in, out, n_expert, n_used, n_tokens, false, kInvariant),
          {bytes_of(x), bytes_of(ids)});
      ASSERT_TRUE(all.is_ok()) << all.message();
      for (int64_t i = 0; i < n_tokens * n_used; ++i) {
        graph::MatMulMeta m;
        m.weight = "expert." + std::to_string(ids[i]);
        m.in_dim = in;
        m.out_dim = out;
        m.batch_invariant = true;
        Node n = make_node(Op::kMatMul, out, 1, m);
        n.inputs = {0};
        const std::vector<float> xt(x.begin() + (i / n_used) * in,
                                    x.begin() + (i / n_used + 1) * in);
        auto plain = run_node(*b.gpu, n, {bytes_of(xt)});
        ASSERT_TRUE(plain.is_ok()) << plain.message();
        for (int64_t o = 0; o < out; ++o) {
          ASSERT_EQ((*all)[i * out + o], (*plain)[o])
              << quant::type_name(type) << " lanes " << how.lanes << " row " << i << " out " << o;
        }
      }
    }
  }
}

TEST(VulkanMoe, ExpertIdOutOfRangeIsAnErrorNamingIt) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  Backends b;
  add_experts(b.weights, TensorType::Q8_0, 4, 32, 64, 51, 1.0f);
  b.start();
  const auto x = random_floats(64, 52);
  for (int32_t bad_id : {9, -1}) {
    const std::vector<int32_t> ids = {1, bad_id};
    auto got =
        run_node(*b.gpu, matmul_id_node(TensorType::Q8_0, 64, 32, 4, 2, 1, false, kInvariant),
                 {bytes_of(x), bytes_of(ids)});
    ASSERT_FALSE(got.is_ok());
    EXPECT_NE(got.message().find("expert id " + std::to_string(bad_id) + " outside [0, 4)"),
              std::string::npos)
        << got.message();
    const auto logits = random_floats(4, 53);
    auto w = run_node(*b.gpu, moe_route_node(Op::kMoeWeights, 1, 4, 2, MoeGating::kSoftmax),
                      {bytes_of(logits), bytes_of(ids)});
    ASSERT_FALSE(w.is_ok());
    EXPECT_NE(w.message().find("expert id " + std::to_string(bad_id)), std::string::npos)
        << w.message();
  }
}

TEST(VulkanMoe, WeightedSumRoundsInOrder) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  Backends b;
  b.start();
  const int64_t n_tokens = 9, n_used = 8, dim = 2048 + 3;
  const auto y = random_floats(n_tokens * n_used * dim, 61);
  const auto w = random_floats(n_tokens * n_used, 62, 0.3f);
  Node n = make_node(Op::kMoeSum, dim, n_tokens, graph::MoeSumMeta{n_used});
  n.inputs = {0, 1};
  ASSERT_TRUE(b.gpu->supports_op(n));
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
  EXPECT_EQ(max_diff(*got, *cpu), 0.0);
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
