#include "backend/cpu/vec_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/backend_testutil.h"
#include "backend/cpu/vec_dot_internal.h"
#include "quant/blocks.h"
#include "quant/half.h"

namespace minfer::cpu {
namespace {

using quant::TensorType;
using testing::decode;
using testing::encode;
using testing::random_floats;

constexpr TensorType kWeightTypes[] = {
    TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1,
    TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K,
    TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K};

TEST(cpu_VecDotType, MatchesGgmlTypeTraits) {
  const std::pair<TensorType, TensorType> expected[] = {
      {TensorType::F32, TensorType::F32},   {TensorType::F16, TensorType::F16},
      {TensorType::BF16, TensorType::BF16}, {TensorType::Q4_0, TensorType::Q8_0},
      {TensorType::Q4_1, TensorType::Q8_1}, {TensorType::Q5_0, TensorType::Q8_0},
      {TensorType::Q5_1, TensorType::Q8_1}, {TensorType::Q8_0, TensorType::Q8_0},
      {TensorType::Q2_K, TensorType::Q8_K}, {TensorType::Q3_K, TensorType::Q8_K},
      {TensorType::Q4_K, TensorType::Q8_K}, {TensorType::Q5_K, TensorType::Q8_K},
      {TensorType::Q6_K, TensorType::Q8_K}};
  for (const auto& [weight, act] : expected) {
    const auto got = vec_dot_type(weight);
    ASSERT_TRUE(got.is_ok()) << got.message();
    EXPECT_EQ(*got, act) << quant::type_name(weight);
  }
}

TEST(cpu_VecDotType, UnsupportedTypeIsAnErrorNamingIt) {
  const auto got = vec_dot_type(TensorType::IQ2_XXS);
  ASSERT_FALSE(got.is_ok());
  EXPECT_NE(got.message().find("IQ2_XXS"), std::string::npos) << got.message();
  EXPECT_EQ(dot_kernel(TensorType::Q8_K, Isa::kScalar), nullptr);
  const Status s = dot_args_ok(TensorType::Q4_K, 100);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("Q4_K"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("100"), std::string::npos) << s.message();
}

// The error a correct kernel may have against the exact dot product of the
// decoded rows, given sum |w_i x_i| (`mag`). Integer kernels round only when
// adding scaled block sums in f32; Q8_1's s = d * sum(q) is itself stored as
// f16, which costs up to |m * s| * 2^-11 per block on top (`offset_mag`).
double tolerance(TensorType type, double mag, double offset_mag) {
  switch (type) {
    case TensorType::F32:
    case TensorType::F16:
    case TensorType::BF16:
      return 1e-5 * mag + 1e-30;
    case TensorType::Q4_1:
    case TensorType::Q5_1:
      return 1e-5 * mag + offset_mag * std::ldexp(1.0, -10);
    default:
      return 1e-5 * mag + 1e-30;
  }
}

// sum over blocks of |m * s| for Q4_1/Q5_1 weights against Q8_1 activations.
double q8_1_offset_magnitude(TensorType type, const uint8_t* w, const uint8_t* x, int64_t n) {
  if (type != TensorType::Q4_1 && type != TensorType::Q5_1) return 0.0;
  const size_t wsize = quant::type_traits(type).type_size;
  double total = 0.0;
  for (int64_t b = 0; b < n / quant::kQK; ++b) {
    uint16_t m, s;
    std::memcpy(&m, w + b * wsize + 2, 2);
    std::memcpy(&s, x + b * sizeof(quant::BlockQ8_1) + 2, 2);
    total += std::fabs(static_cast<double>(quant::f16_to_f32(m)) * quant::f16_to_f32(s));
  }
  return total;
}

struct Case {
  TensorType type;
  int64_t n;
};

void check_kernel_against_reference(TensorType type, int64_t n, Isa isa, uint32_t seed) {
  SCOPED_TRACE(std::string(quant::type_name(type)) + " n=" + std::to_string(n) + " " +
               isa_name(isa));
  const TensorType xt = *vec_dot_type(type);
  const auto w = encode(type, random_floats(n, seed));
  const auto x = encode(xt, random_floats(n, seed + 1000, 2.0f));
  const auto wf = decode(type, w.data(), n);
  const auto xf = decode(xt, x.data(), n);
  double exact = 0.0;
  double mag = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    exact += static_cast<double>(wf[i]) * xf[i];
    mag += std::fabs(static_cast<double>(wf[i]) * xf[i]);
  }
  const DotFn fn = dot_kernel(type, isa);
  ASSERT_NE(fn, nullptr);
  const double got = fn(n, w.data(), x.data());
  const double tol = tolerance(type, mag, q8_1_offset_magnitude(type, w.data(), x.data(), n));
  EXPECT_NEAR(got, exact, tol) << "mag " << mag;
  // The dispatching entry point agrees with the kernel of the active ISA.
  if (isa == active_isa()) EXPECT_EQ(dot(type, n, w.data(), x.data()), static_cast<float>(got));
}

std::vector<int64_t> lengths_for(TensorType type) {
  const int64_t block = quant::type_traits(type).block_size;
  if (block == 1) return {1, 7, 32, 100, 4096, 4096 + 31};
  return {block, 3 * block, 4096};
}

TEST(cpu_VecDot, ScalarKernelsMatchDequantizedReference) {
  uint32_t seed = 1;
  for (TensorType type : kWeightTypes) {
    for (int64_t n : lengths_for(type))
      check_kernel_against_reference(type, n, Isa::kScalar, ++seed);
  }
}

TEST(cpu_VecDot, Avx2KernelsMatchDequantizedReference) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU without AVX2/FMA/F16C";
  uint32_t seed = 100;
  for (TensorType type : kWeightTypes) {
    for (int64_t n : lengths_for(type)) check_kernel_against_reference(type, n, Isa::kAvx2, ++seed);
  }
}

TEST(cpu_VecDot, Avx2AgreesWithScalar) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU without AVX2/FMA/F16C";
  uint32_t seed = 500;
  for (TensorType type : kWeightTypes) {
    for (int64_t n : lengths_for(type)) {
      SCOPED_TRACE(std::string(quant::type_name(type)) + " n=" + std::to_string(n));
      const auto w = encode(type, random_floats(n, ++seed));
      const auto x = encode(*vec_dot_type(type), random_floats(n, ++seed));
      const float a = dot_kernel(type, Isa::kScalar)(n, w.data(), x.data());
      const float b = dot_kernel(type, Isa::kAvx2)(n, w.data(), x.data());
      EXPECT_NEAR(a, b, 2e-5 * (std::fabs(a) + std::sqrt(static_cast<double>(n))));
    }
  }
}

// Extreme but legal operands: all quants at their extremes must not saturate
// the 16-bit pair sums of the AVX2 kernels.
TEST(cpu_VecDot, Avx2ExtremeQuantsDoNotSaturate) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU without AVX2/FMA/F16C";
  for (TensorType type : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0, TensorType::Q2_K,
                          TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    SCOPED_TRACE(std::string(quant::type_name(type)));
    const int64_t n = 512;
    std::vector<float> wv(n), xv(n);
    for (int64_t i = 0; i < n; ++i) {
      wv[i] = (i % 3 == 0) ? -1.0f : 1.0f;
      xv[i] = (i % 2 == 0) ? -1.0f : 1.0f;
    }
    const auto w = encode(type, wv);
    const auto x = encode(*vec_dot_type(type), xv);
    const float a = dot_kernel(type, Isa::kScalar)(n, w.data(), x.data());
    const float b = dot_kernel(type, Isa::kAvx2)(n, w.data(), x.data());
    EXPECT_NEAR(a, b, 1e-4 * (1.0 + std::fabs(a)));
  }
}

TEST(cpu_VecDot, ScalarEnvVarForcesScalarKernels) {
  EXPECT_EQ(detail::choose_isa(true, nullptr), Isa::kAvx2);
  EXPECT_EQ(detail::choose_isa(true, ""), Isa::kAvx2);
  EXPECT_EQ(detail::choose_isa(true, "0"), Isa::kAvx2);
  EXPECT_EQ(detail::choose_isa(true, "1"), Isa::kScalar);
  EXPECT_EQ(detail::choose_isa(false, nullptr), Isa::kScalar);
  const char* env = std::getenv("MINFER_CPU_SCALAR");
  EXPECT_EQ(active_isa(), detail::choose_isa(isa_supported(Isa::kAvx2), env));
}

TEST(cpu_VecDot, ZeroLengthIsZero) {
  for (TensorType type : kWeightTypes) {
    EXPECT_EQ(dot_kernel(type, Isa::kScalar)(0, nullptr, nullptr), 0.0f);
    if (isa_supported(Isa::kAvx2))
      EXPECT_EQ(dot_kernel(type, Isa::kAvx2)(0, nullptr, nullptr), 0.0f);
  }
}

}  // namespace
}  // namespace minfer::cpu
