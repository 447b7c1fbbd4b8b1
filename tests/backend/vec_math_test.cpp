#include "backend/cpu/vec_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend_testutil.h"

namespace minfer::cpu {
namespace {

using testing::random_floats;

// Distance in units in the last place between two finite positive floats.
int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(cpu_VecMath, ExpfLaneIsWithinTwoUlpsOfExp) {
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    const float got = detail::ggml_vec_expf_lane(x);
    const float ref = static_cast<float>(std::exp(static_cast<double>(x)));
    ASSERT_LE(ulp_distance(got, ref), 2) << x;
  }
  EXPECT_EQ(detail::ggml_vec_expf_lane(0.0f), 1.0f);
  EXPECT_EQ(detail::ggml_vec_expf_lane(-200.0f), 0.0f);
  EXPECT_EQ(detail::ggml_vec_expf_lane(200.0f), INFINITY);
}

TEST(cpu_VecMath, Avx2AndScalarAreBitIdentical) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU without AVX2/FMA/F16C";
  for (int64_t n : {1, 7, 8, 13, 64, 1003}) {
    SCOPED_TRACE(n);
    auto x = random_floats(n, 3, 30.0f);
    if (n > 8) {  // the wide-range branches of the vector expf
      x[0] = 100.0f;
      x[1] = -100.0f;
      x[2] = 150.0f;
      x[3] = -150.0f;
    }
    const auto up = random_floats(n, 4);
    std::vector<float> a(n), b(n);
    detail::silu_f32(x.data(), n, a.data(), Isa::kScalar);
    detail::silu_f32(x.data(), n, b.data(), Isa::kAvx2);
    EXPECT_TRUE(same_bits(a, b)) << "silu";
    detail::swiglu_f32(x.data(), up.data(), n, a.data(), Isa::kScalar);
    detail::swiglu_f32(x.data(), up.data(), n, b.data(), Isa::kAvx2);
    EXPECT_TRUE(same_bits(a, b)) << "swiglu";
    const auto s = random_floats(n, 5, 3.0f);
    const double sa = detail::softmax_exp_f32(s.data(), n, 4.0f, a.data(), Isa::kScalar);
    const double sb = detail::softmax_exp_f32(s.data(), n, 4.0f, b.data(), Isa::kAvx2);
    EXPECT_TRUE(same_bits(a, b)) << "softmax";
    EXPECT_EQ(sa, sb);
  }
}

TEST(cpu_VecMath, LeftoversUseLibmExp) {
  const int64_t n = 11;  // one chunk of 8, three leftovers
  const auto x = random_floats(n, 6, 2.0f);
  std::vector<float> y(n);
  const double sum = detail::softmax_exp_f32(x.data(), n, 0.5f, y.data(), active_isa());
  double expect_sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float ref = i < 8 ? detail::ggml_vec_expf_lane(x[i] - 0.5f) : std::exp(x[i] - 0.5f);
    EXPECT_EQ(y[i], ref) << i;
    expect_sum += ref;
  }
  EXPECT_NEAR(sum, expect_sum, 1e-6 * expect_sum);
  detail::silu_f32(x.data(), n, y.data(), active_isa());
  for (int64_t i = 8; i < n; ++i) EXPECT_EQ(y[i], x[i] / (1.0f + std::exp(-x[i])));
}

}  // namespace
}  // namespace minfer::cpu
