#include "backend/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "backend/backend_testutil.h"
#include "backend/cpu/matmul_gemm.h"
#include "backend/cpu/matmul_gemm_vnni.h"
#include "backend/cpu/matmul_gemv_vnni.h"

namespace minfer::cpu {
namespace {

using quant::TensorType;
using testing::encode;
using testing::random_floats;

struct Problem {
  TensorType type;
  int64_t rows;
  int64_t in_dim;
  int64_t n_tokens;
};

// The weight matrix as rows of `type`, packed.
std::vector<uint8_t> make_weights(const Problem& p, uint32_t seed) {
  return encode(p.type, random_floats(p.rows * p.in_dim, seed));
}

// y[t][r] = dot(W row r, x row t converted to vec_dot_type), one call at a time.
std::vector<float> naive(const Problem& p, const std::vector<uint8_t>& w,
                         const std::vector<float>& x, Isa isa) {
  const TensorType xt = *vec_dot_type(p.type);
  const size_t w_bytes = *quant::row_bytes(p.type, p.in_dim);
  std::vector<float> y(static_cast<size_t>(p.rows * p.n_tokens));
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    const std::vector<float> xrow(x.begin() + t * p.in_dim, x.begin() + (t + 1) * p.in_dim);
    const auto xq = encode(xt, xrow);
    for (int64_t r = 0; r < p.rows; ++r) {
      y[t * p.rows + r] = dot_kernel(p.type, isa)(p.in_dim, w.data() + r * w_bytes, xq.data());
    }
  }
  return y;
}

// Bit-equal, except where a batch takes the GEMM path: that adds the same
// scaled block sums in another order, so it equals up to f32 rounding.
void expect_matches(const std::vector<float>& y, const std::vector<float>& expected,
                    bool reordered) {
  if (!reordered) {
    EXPECT_EQ(y, expected);
    return;
  }
  ASSERT_EQ(y.size(), expected.size());
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_NEAR(y[i], expected[i], 1e-5f * (1.0f + std::abs(expected[i]))) << "output " << i;
  }
}

TEST(cpu_Matmul, EqualsPerRowDotsForEveryTypeThreadCountAndIsa) {
  const TensorType types[] = {
      TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1,
      TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K,
      TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::MXFP4};
  uint32_t seed = 7;
  for (TensorType type : types) {
    for (int64_t n_tokens : {1, 6}) {
      const Problem p{type, 37, 512, n_tokens};
      SCOPED_TRACE(std::string(quant::type_name(type)) + " tokens=" + std::to_string(n_tokens));
      const auto w = make_weights(p, ++seed);
      const auto x = random_floats(p.in_dim * p.n_tokens, ++seed);
      for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kNeon, Isa::kNeonDotprod}) {
        if (!isa_supported(isa)) continue;
        const auto expected = naive(p, w, x, isa);
        for (int threads : {1, 2}) {
          ThreadPool pool(threads);
          std::vector<uint8_t> scratch;
          std::vector<float> y(expected.size(), -1.0f);
          const MatmulWeight mw{type, p.rows, p.in_dim, w.data(), 0};
          ASSERT_TRUE(matmul(mw, x.data(), p.n_tokens, y.data(), pool, scratch, isa).is_ok());
          SCOPED_TRACE(isa_name(isa) + " threads=" + std::to_string(threads));
          // One token of Q4_K/Q6_K takes the VNNI GEMV where the CPU has it.
          const bool vnni_gemv = n_tokens == 1 && vnni_gemv_type(type) && vnni_gemm_available();
          expect_matches(
              y, expected,
              isa == Isa::kAvx2 &&
                  ((n_tokens > 1 && gemm_kernel(type, n_tokens) != nullptr) || vnni_gemv));
        }
      }
    }
  }
}

TEST(cpu_Matmul, LongPromptSplitsOverTokensToo) {
  const Problem p{TensorType::Q4_K, 40, 256, 150};  // several token blocks per row block
  const auto w = make_weights(p, 5);
  const auto x = random_floats(p.in_dim * p.n_tokens, 6);
  const auto expected = naive(p, w, x, active_isa());
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  std::vector<float> y(expected.size());
  ASSERT_TRUE(
      matmul({p.type, p.rows, p.in_dim, w.data(), 0}, x.data(), p.n_tokens, y.data(), pool, scratch)
          .is_ok());
  expect_matches(y, expected, active_isa() == Isa::kAvx2);
}

TEST(cpu_Matmul, ApproximatesFloatMatmul) {
  const Problem p{TensorType::Q8_0, 64, 256, 3};
  const auto wf = random_floats(p.rows * p.in_dim, 11);
  const auto w = encode(p.type, wf);
  const auto x = random_floats(p.in_dim * p.n_tokens, 12);
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  std::vector<float> y(static_cast<size_t>(p.rows * p.n_tokens));
  ASSERT_TRUE(
      matmul({p.type, p.rows, p.in_dim, w.data(), 0}, x.data(), p.n_tokens, y.data(), pool, scratch)
          .is_ok());
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    for (int64_t r = 0; r < p.rows; ++r) {
      double ref = 0.0;
      for (int64_t i = 0; i < p.in_dim; ++i)
        ref += double(wf[r * p.in_dim + i]) * x[t * p.in_dim + i];
      EXPECT_NEAR(y[t * p.rows + r], ref, 0.02 * std::sqrt(double(p.in_dim)));
    }
  }
}

// MXFP4 weights (no GEMM kernel: every batch size takes the per-row dot
// kernels, a prompt of 20 tokens included) against the decoded weights in f64.
TEST(cpu_Matmul, Mxfp4ApproximatesTheDecodedWeights) {
  for (int64_t n_tokens : {1, 3, 20}) {
    const Problem p{TensorType::MXFP4, 48, 256, n_tokens};
    SCOPED_TRACE("tokens=" + std::to_string(n_tokens));
    const auto w = make_weights(p, 21);
    const auto wf = testing::decode(p.type, w.data(), p.rows * p.in_dim);
    const auto x = random_floats(p.in_dim * p.n_tokens, 22);
    ThreadPool pool(2);
    std::vector<uint8_t> scratch;
    std::vector<float> y(static_cast<size_t>(p.rows * p.n_tokens));
    ASSERT_TRUE(matmul({p.type, p.rows, p.in_dim, w.data(), 0}, x.data(), p.n_tokens, y.data(),
                       pool, scratch)
                    .is_ok());
    EXPECT_EQ(y, naive(p, w, x, active_isa()));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
      for (int64_t r = 0; r < p.rows; ++r) {
        double ref = 0.0;
        for (int64_t i = 0; i < p.in_dim; ++i)
          ref += double(wf[r * p.in_dim + i]) * x[t * p.in_dim + i];
        // Only the Q8_0 rounding of the activations separates the two.
        EXPECT_NEAR(y[t * p.rows + r], ref, 0.02 * std::sqrt(double(p.in_dim)));
      }
    }
  }
}

TEST(cpu_Matmul, HonoursRowStride) {
  const Problem p{TensorType::Q4_0, 5, 64, 2};
  const auto w = make_weights(p, 3);
  const size_t row = *quant::row_bytes(p.type, p.in_dim);
  const size_t stride = row + 10;
  std::vector<uint8_t> padded(stride * p.rows, 0xab);
  for (int64_t r = 0; r < p.rows; ++r) std::memcpy(&padded[r * stride], &w[r * row], row);
  const auto x = random_floats(p.in_dim * p.n_tokens, 4);
  ThreadPool pool(1);
  std::vector<uint8_t> scratch;
  std::vector<float> a(10), b(10);
  ASSERT_TRUE(matmul({p.type, p.rows, p.in_dim, w.data(), 0}, x.data(), 2, a.data(), pool, scratch)
                  .is_ok());
  ASSERT_TRUE(matmul({p.type, p.rows, p.in_dim, padded.data(), stride}, x.data(), 2, b.data(), pool,
                     scratch)
                  .is_ok());
  EXPECT_EQ(a, b);
}

TEST(cpu_Matmul, ErrorsNameTypeAndDims) {
  ThreadPool pool(1);
  std::vector<uint8_t> scratch;
  std::vector<uint8_t> w(4096);
  std::vector<float> x(1024, 1.0f), y(1024);
  {
    const Status s =
        matmul({TensorType::Q4_K, 4, 100, w.data(), 0}, x.data(), 1, y.data(), pool, scratch);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("Q4_K"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("100"), std::string::npos) << s.message();
  }
  {
    const Status s =
        matmul({TensorType::IQ4_NL, 4, 64, w.data(), 0}, x.data(), 1, y.data(), pool, scratch);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("IQ4_NL"), std::string::npos) << s.message();
  }
  {
    const Status s =
        matmul({TensorType::Q8_0, 4, 64, w.data(), 10}, x.data(), 1, y.data(), pool, scratch);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("stride"), std::string::npos) << s.message();
  }
  {
    x[70] = std::numeric_limits<float>::quiet_NaN();
    const Status s =
        matmul({TensorType::Q8_0, 4, 64, w.data(), 0}, x.data(), 3, y.data(), pool, scratch);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("activation row 1"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(
      matmul({TensorType::Q8_0, 4, 64, nullptr, 0}, x.data(), 1, y.data(), pool, scratch).is_ok());
  EXPECT_TRUE(
      matmul({TensorType::Q8_0, 0, 64, nullptr, 0}, x.data(), 1, y.data(), pool, scratch).is_ok());
}

}  // namespace
}  // namespace minfer::cpu
