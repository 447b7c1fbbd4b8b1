// The CUDA backend's MatMul and GetRows for every weight type it supports,
// against the scalar reference: weights dequantized with
// quant::dequantize_row, then dot products in double with the f32 activations
// (the f32 path does not quantize activations; MINFER_GEMV_F32=1 here). Shapes cover the decode
// GEMV (1 and 3 tokens) and the tiled multi-token kernel (70 tokens: partial tiles), input dims 896
// (32-element block types) and 3584/256 (all types), with and without bias. Tolerance: max abs diff
// < 1e-3 with outputs of unit scale (activations scaled by 1/sqrt(in_dim)). GetRows must equal the
// dequantized rows times the scale to f32 rounding.
// Batches of >= kMmaMinTokens tokens take the bf16 tensor-core path
// (matmul_mma.cu), checked at real shapes (in 896/3584/4864/18944, up to 2048
// tokens, partial tiles) against the same double reference with a relative
// tolerance: max |diff| / rms(reference) < 2e-2 (bf16 rounds operands to 8
// significant bits; measured values are printed). Large cases check a sample
// of the outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cuda_testutil.h"
#include "backend/reference_ops.h"

namespace minfer::cuda::testing {
namespace {

const TensorType kTypes[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q4_0,
                             TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0,
                             TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                             TensorType::Q6_K, TensorType::MXFP4};

// These tests check the f32-activation path (one-token GEMVs otherwise take
// the int8 path, tested in cuda_gemv_q8_test.cpp): MINFER_GEMV_F32=1 while
// each backend is created (it reads the switch at construction).
class GemvF32On {
 public:
  GemvF32On() { setenv("MINFER_GEMV_F32", "1", 1); }
  ~GemvF32On() { unsetenv("MINFER_GEMV_F32"); }
};

bool is_k_quant(TensorType t) {
  return quant::type_traits(t).block_size == 256;
}

// A GPU backend over weight "w" ([out][in] of `type`, random from seed) and
// bias "b" (f32 [out], from seed + 1), with w as the GPU sees it (decoded by
// the reference) and the bias's values.
struct WeightAndBias {
  model::Weights weights;
  std::unique_ptr<backend::Backend> gpu;
  std::vector<float> w, bias;
};

void make_weight_and_bias(TensorType type, int64_t in, int64_t out, uint32_t seed,
                          WeightAndBias& m) {
  add_weight(m.weights, "w", type, out, in, random_floats(in * out, seed));
  m.bias = random_floats(out, seed + 1);
  add_weight(m.weights, "b", TensorType::F32, 1, out, m.bias);
  auto gpu = create_backend(m.weights, env_options());
  ASSERT_TRUE(gpu.is_ok()) << gpu.message();
  m.gpu = std::move(gpu).value();
  m.w = dequantized(m.weights, "w");
}

TEST(cuda_Matmul, EveryTypeMatchesDequantizedDoubleDot) {
  MINFER_SKIP_WITHOUT_CUDA();
  GemvF32On f32_path;
  struct Shape {
    int64_t in, out;
  };
  for (TensorType type : kTypes) {
    for (const Shape& sh : {Shape{896, 160}, Shape{3584, 72}, Shape{256, 33}}) {
      if (is_k_quant(type) && sh.in % 256 != 0) continue;
      WeightAndBias m;
      ASSERT_NO_FATAL_FAILURE(make_weight_and_bias(type, sh.in, sh.out, 21, m));
      for (int64_t n_tokens : {1, 3, 70}) {
        for (bool with_bias : {false, true}) {
          const auto x = random_floats(sh.in * n_tokens, 23, 1.0f / std::sqrt(float(sh.in)));
          Node n;
          n.op = Op::kMatMul;
          n.shape.ne = {sh.out, n_tokens};
          n.name = "test.matmul";
          n.meta = graph::MatMulMeta{"w", with_bias ? "b" : "", type, sh.in, sh.out};
          ASSERT_TRUE(m.gpu->supports_op(n)) << quant::type_name(type);
          auto got = run_node(*m.gpu, n, {bytes_of(x)});
          ASSERT_TRUE(got.is_ok()) << got.message();
          const double diff =
              max_abs_diff(*got, cpu::testing::matmul_ref(m.w.data(), x.data(),
                                                          with_bias ? m.bias.data() : nullptr,
                                                          sh.in, sh.out, n_tokens));
          if (with_bias) {
            std::printf("  %-5s in %5lld out %4lld tokens %3lld: max diff %.2e\n",
                        std::string(quant::type_name(type)).c_str(), static_cast<long long>(sh.in),
                        static_cast<long long>(sh.out), static_cast<long long>(n_tokens), diff);
          }
          EXPECT_LT(diff, 1e-3) << quant::type_name(type) << " in " << sh.in << " tokens "
                                << n_tokens;
        }
      }
    }
  }
}

// Every GEMV work split (choose_gemv_split: four rows per warp for very many
// rows, four warps per row for long rows, both, neither), plain and with the
// residual add of MatMulAdd, against the dequantized weights in double.
TEST(cuda_Matmul, GemvSplitsAndResidualMatchDequantizedDoubleDot) {
  MINFER_SKIP_WITHOUT_CUDA();
  GemvF32On f32_path;
  struct Shape {
    int64_t in, out;
  };
  for (TensorType type : {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K}) {
    for (const Shape& sh :
         {Shape{1024, 16500}, Shape{3584, 4200}, Shape{3584, 300}, Shape{256, 5}}) {
      WeightAndBias m;
      ASSERT_NO_FATAL_FAILURE(make_weight_and_bias(type, sh.in, sh.out, 31, m));
      for (int64_t n_tokens : {1, 4}) {
        for (bool residual : {false, true}) {
          const auto x = random_floats(sh.in * n_tokens, 33, 1.0f / std::sqrt(float(sh.in)));
          const auto r = random_floats(sh.out * n_tokens, 34);
          Node n;
          n.op = residual ? Op::kMatMulAdd : Op::kMatMul;
          n.shape.ne = {sh.out, n_tokens};
          n.name = "test.gemv";
          n.inputs = residual ? std::vector<graph::NodeId>{0, 1} : std::vector<graph::NodeId>{0};
          n.meta = graph::MatMulMeta{"w", "b", type, sh.in, sh.out};
          ASSERT_TRUE(m.gpu->supports_op(n)) << quant::type_name(type);
          auto got = residual ? run_node(*m.gpu, n, {bytes_of(x), bytes_of(r)})
                              : run_node(*m.gpu, n, {bytes_of(x)});
          ASSERT_TRUE(got.is_ok()) << got.message();
          std::vector<double> want = cpu::testing::matmul_ref(m.w.data(), x.data(), m.bias.data(),
                                                              sh.in, sh.out, n_tokens);
          for (size_t i = 0; residual && i < want.size(); ++i) want[i] += r[i];
          const double diff = max_abs_diff(*got, want);
          std::printf("  gemv %-5s in %4lld out %5lld tokens %lld residual %d: max diff %.2e\n",
                      std::string(quant::type_name(type)).c_str(), static_cast<long long>(sh.in),
                      static_cast<long long>(sh.out), static_cast<long long>(n_tokens),
                      int(residual), diff);
          EXPECT_LT(diff, 1e-3) << quant::type_name(type) << " in " << sh.in << " out " << sh.out;
        }
      }
    }
  }
}

// The tensor-core path: every type at a partial-tile shape (all outputs), then
// real model shapes (sampled outputs).
TEST(cuda_Matmul, TensorCorePathMatchesDequantizedDoubleDot) {
  MINFER_SKIP_WITHOUT_CUDA();
  struct Case {
    TensorType type;
    int64_t in, out, n_tokens;
    bool sampled;
  };
  std::vector<Case> cases;
  for (TensorType type : kTypes) cases.push_back({type, 3584, 200, 130, false});
  cases.push_back({TensorType::Q4_0, 896, 4864, 2048, true});   // 0.5B gate/up
  cases.push_back({TensorType::Q4_0, 4864, 896, 512, true});    // 0.5B down
  cases.push_back({TensorType::Q8_0, 896, 128, 2048, true});    // 0.5B k/v
  cases.push_back({TensorType::Q4_K, 3584, 3584, 2048, true});  // 7B q/o
  cases.push_back({TensorType::Q6_K, 18944, 256, 512, true});   // 7B down (fewer rows)
  cases.push_back({TensorType::BF16, 896, 896, 200, false});    // bf16 read directly
  for (const Case& c : cases) {
    WeightAndBias m;
    ASSERT_NO_FATAL_FAILURE(make_weight_and_bias(c.type, c.in, c.out, 41, m));
    const auto x = random_floats(c.in * c.n_tokens, 43, 1.0f / std::sqrt(float(c.in)));
    Node n;
    n.op = Op::kMatMul;
    n.shape.ne = {c.out, c.n_tokens};
    n.name = "test.matmul_mma";
    n.meta = graph::MatMulMeta{"w", "b", c.type, c.in, c.out};
    auto got = run_node(*m.gpu, n, {bytes_of(x)});
    ASSERT_TRUE(got.is_ok()) << got.message();
    std::vector<std::pair<int64_t, int64_t>> at;  // (token, row)
    if (c.sampled) {
      uint64_t h = 0x9e3779b97f4a7c15ull;
      for (int i = 0; i < 3000; ++i) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        at.emplace_back(static_cast<int64_t>((h >> 33) % c.n_tokens),
                        static_cast<int64_t>((h >> 13) % c.out));
      }
      for (int64_t t : {int64_t{0}, c.n_tokens - 1}) {
        for (int64_t r : {int64_t{0}, c.out - 1}) at.emplace_back(t, r);
      }
    } else {
      for (int64_t t = 0; t < c.n_tokens; ++t) {
        for (int64_t r = 0; r < c.out; ++r) at.emplace_back(t, r);
      }
    }
    double diff = 0, sq = 0;
    bool finite = true;
    for (const auto& [t, r] : at) {
      double want = m.bias[r];
      for (int64_t k = 0; k < c.in; ++k) {
        want += double(m.w[r * c.in + k]) * double(x[t * c.in + k]);
      }
      const float g = (*got)[t * c.out + r];
      finite = finite && std::isfinite(g);
      diff = std::max(diff, std::abs(want - g));
      sq += want * want;
    }
    const double rel = diff / std::sqrt(sq / double(at.size()));
    std::printf("  mma %-5s in %5lld out %4lld tokens %4lld: max diff %.2e rel %.2e\n",
                std::string(quant::type_name(c.type)).c_str(), static_cast<long long>(c.in),
                static_cast<long long>(c.out), static_cast<long long>(c.n_tokens), diff, rel);
    EXPECT_TRUE(finite) << quant::type_name(c.type);
    EXPECT_LT(rel, 2e-2) << quant::type_name(c.type) << " in " << c.in << " tokens " << c.n_tokens;
  }
}

TEST(cuda_GetRows, EveryTypeEqualsDequantizedRows) {
  MINFER_SKIP_WITHOUT_CUDA();
  const int64_t vocab = 300, d = 512;
  for (TensorType type : kTypes) {
    model::Weights weights;
    add_weight(weights, "token_embd.weight", type, vocab, d, random_floats(vocab * d, 31));
    auto gpu = create_backend(weights, env_options());
    ASSERT_TRUE(gpu.is_ok()) << gpu.message();
    const std::vector<float> w = dequantized(weights, "token_embd.weight");
    const std::vector<int32_t> ids = {0, 299, 17, 17, 150};
    Node n;
    n.op = Op::kGetRows;
    n.shape.ne = {d, static_cast<int64_t>(ids.size())};
    n.name = "test.embed";
    n.meta = graph::GetRowsMeta{"token_embd.weight", {}, 1.5f};
    auto got = run_node(**gpu, n, {bytes_of(ids)});
    ASSERT_TRUE(got.is_ok()) << got.message();
    double diff = 0;
    for (size_t r = 0; r < ids.size(); ++r) {
      for (int64_t i = 0; i < d; ++i) {
        const double want = double(w[ids[r] * d + i] * 1.5f);
        diff = std::max(diff, std::abs(want - (*got)[r * d + i]) / std::max(1.0, std::abs(want)));
      }
    }
    EXPECT_LT(diff, 1e-6) << quant::type_name(type);
  }
}

TEST(cuda_GetRows, ActivationTailRowsAndBadTokenId) {
  MINFER_SKIP_WITHOUT_CUDA();
  model::Weights weights;
  add_weight(weights, "token_embd.weight", TensorType::Q8_0, 64, 256, random_floats(64 * 256, 1));
  auto gpu = create_backend(weights, env_options());
  ASSERT_TRUE(gpu.is_ok()) << gpu.message();
  const auto x = random_floats(256 * 6, 2);
  Node tail;
  tail.op = Op::kGetRows;
  tail.shape.ne = {256, 2};
  tail.name = "test.output_rows";
  tail.meta = graph::GetRowsMeta{"", {4, 5}, 1.0f};
  for (bool in_place : {false, true}) {
    auto got = run_node(**gpu, tail, {bytes_of(x)}, nullptr, in_place);
    ASSERT_TRUE(got.is_ok()) << got.message();
    EXPECT_TRUE(std::equal(got->begin(), got->end(), x.begin() + 4 * 256));
  }
  Node embed;
  embed.op = Op::kGetRows;
  embed.shape.ne = {256, 1};
  embed.name = "test.embed";
  embed.meta = graph::GetRowsMeta{"token_embd.weight", {}, 1.0f};
  auto bad = run_node(**gpu, embed, {bytes_of(std::vector<int32_t>{64})});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("token id 64"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("get_rows 'test.embed'"), std::string::npos) << bad.message();
}

TEST(cuda_Weights, TypeWithoutKernelFailsTheGate) {
  MINFER_SKIP_WITHOUT_CUDA();
  model::Weights weights;
  add_weight(weights, "ok", TensorType::Q4_0, 4, 64, random_floats(256, 1));
  ASSERT_TRUE(
      weights.add_derived("odd", TensorType::I32, {4}, std::vector<uint8_t>(16, 0)).is_ok());
  auto gpu = create_backend(weights, env_options());
  ASSERT_FALSE(gpu.is_ok());
  EXPECT_NE(gpu.message().find("'odd'"), std::string::npos) << gpu.message();
}

}  // namespace
}  // namespace minfer::cuda::testing
