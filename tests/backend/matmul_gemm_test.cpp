// The tiled GEMM path (n_tokens > 1) against the per-row AVX2 dot kernels:
// every GEMM type, odd row counts and row lengths, 1..70 tokens, 1-2 threads.
#include "backend/cpu/matmul_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backend/backend_testutil.h"
#include "backend/cpu/matmul.h"

namespace minfer::cpu {
namespace {

using quant::TensorType;
using testing::encode;
using testing::random_floats;

// y[t][r] = AVX2 dot of weight row r with token row t in vec_dot_type.
std::vector<float> per_row(TensorType type, int64_t rows, int64_t in_dim, int64_t n_tokens,
                           const std::vector<uint8_t>& w, const std::vector<float>& x) {
  const TensorType xt = *vec_dot_type(type);
  const size_t w_bytes = *quant::row_bytes(type, in_dim);
  const DotFn dot = dot_kernel(type, Isa::kAvx2);
  std::vector<float> y(static_cast<size_t>(rows * n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const auto xq =
        encode(xt, std::vector<float>(x.begin() + t * in_dim, x.begin() + (t + 1) * in_dim));
    for (int64_t r = 0; r < rows; ++r)
      y[t * rows + r] = dot(in_dim, w.data() + r * w_bytes, xq.data());
  }
  return y;
}

// Largest |gemm - per_row| over a problem, relative to the outputs' RMS (the
// scale of the block sums whose order of addition differs).
double worst_error(TensorType type, int64_t rows, int64_t in_dim, int64_t n_tokens, int threads,
                   uint32_t seed) {
  const auto w = encode(type, random_floats(rows * in_dim, seed));
  const auto x = random_floats(in_dim * n_tokens, seed + 1);
  const auto expected = per_row(type, rows, in_dim, n_tokens, w, x);
  ThreadPool pool(threads);
  std::vector<uint8_t> scratch;
  std::vector<float> y(expected.size(), NAN);
  const Status s = matmul({type, rows, in_dim, w.data(), 0}, x.data(), n_tokens, y.data(), pool,
                          scratch, Isa::kAvx2);
  EXPECT_TRUE(s.is_ok()) << s.message();
  double sq = 0;
  for (float e : expected) sq += double(e) * e;
  const double rms = std::sqrt(sq / double(expected.size()));
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) return INFINITY;
    worst = std::max(worst, std::abs(double(y[i]) - expected[i]) / rms);
  }
  return worst;
}

constexpr TensorType kGemmTypes[] = {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0,
                                     TensorType::Q4_K, TensorType::Q6_K};

TEST(cpu_MatmulGemm, KernelsExistForTheListedTypesOnly) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  for (TensorType t : kGemmTypes) EXPECT_NE(gemm_kernel(t, 2), nullptr) << quant::type_name(t);
  EXPECT_EQ(gemm_kernel(TensorType::F32, 2), nullptr);
  EXPECT_EQ(gemm_kernel(TensorType::Q4_1, 2), nullptr);
  // A single token: the 32-element formats only (K-quants keep the per-row path).
  EXPECT_NE(gemm_kernel(TensorType::Q4_0, 1), nullptr);
  EXPECT_EQ(gemm_kernel(TensorType::Q4_K, 1), nullptr);
  EXPECT_EQ(gemm_kernel(TensorType::Q6_K, 1), nullptr);
}

TEST(cpu_MatmulGemm, SingleTokenEqualsPerRowKernelsExactly) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  uint32_t seed = 40;
  for (TensorType type : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0}) {
    for (int64_t rows : {1, 3, 37, 150}) {
      const int64_t in_dim = 29 * 32;
      const auto w = encode(type, random_floats(rows * in_dim, ++seed));
      const auto x = random_floats(in_dim, ++seed);
      const auto expected = per_row(type, rows, in_dim, 1, w, x);
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        std::vector<uint8_t> scratch;
        std::vector<float> y(expected.size(), NAN);
        ASSERT_TRUE(matmul({type, rows, in_dim, w.data(), 0}, x.data(), 1, y.data(), pool, scratch,
                           Isa::kAvx2)
                        .is_ok());
        EXPECT_EQ(y, expected) << quant::type_name(type) << " rows=" << rows;
      }
    }
  }
}

TEST(cpu_MatmulGemm, EqualsPerRowPathForEveryTokenCount) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  uint32_t seed = 100;
  for (TensorType type : kGemmTypes) {
    const bool k_quant = quant::type_traits(type).block_size == 256;
    // Odd row counts exercise the edge tiles; odd block counts the loops.
    const int64_t in_dim = k_quant ? 3 * 256 : 7 * 32;
    for (int64_t n_tokens = 1; n_tokens <= 70; ++n_tokens) {
      for (int threads : {1, 2}) {
        const int64_t rows = n_tokens % 2 == 0 ? 37 : 19;
        const double err = worst_error(type, rows, in_dim, n_tokens, threads, seed += 2);
        EXPECT_LT(err, 2e-6) << quant::type_name(type) << " tokens=" << n_tokens
                             << " threads=" << threads;
      }
    }
  }
}

TEST(cpu_MatmulGemm, LongRowsAndManyTokens) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  for (TensorType type : kGemmTypes) {
    // 4864 = Qwen2.5-0.5B's ffn width (19 super-blocks, 152 blocks); 130 tokens
    // span three token blocks of a task.
    const double err = worst_error(type, 45, 4864, 130, 2, 7);
    EXPECT_LT(err, 2e-6) << quant::type_name(type);
  }
}

}  // namespace
}  // namespace minfer::cpu
