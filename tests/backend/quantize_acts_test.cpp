#include "backend/cpu/quantize_acts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/vec_dot.h"
#include "quant/reference.h"

namespace minfer::cpu {
namespace {

using quant::TensorType;

constexpr TensorType kTypes[] = {TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K};

std::vector<uint8_t> reference_bytes(TensorType type, const std::vector<float>& x) {
  std::vector<uint8_t> out(*quant::row_bytes(type, static_cast<int64_t>(x.size())));
  EXPECT_TRUE(quant::quantize_row(type, x.data(), out.data(), static_cast<int64_t>(x.size())));
  return out;
}

// The dispatcher, and the AVX2 path itself where the CPU has it, write the
// reference's bytes.
void expect_reference_bytes(TensorType type, const std::vector<float>& x, const std::string& what) {
  const std::vector<uint8_t> want = reference_bytes(type, x);
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> got(want.size(), 0xee);
  ASSERT_TRUE(quantize_activations(type, x.data(), got.data(), n)) << what;
  EXPECT_EQ(got, want) << quant::type_name(type) << " " << what;
#if defined(__x86_64__)
  if (isa_supported(Isa::kAvx2)) {
    std::vector<uint8_t> avx2(want.size(), 0xee);
    ASSERT_TRUE(detail::quantize_activations_avx2(type, x.data(), avx2.data(), n)) << what;
    EXPECT_EQ(avx2, want) << quant::type_name(type) << " AVX2 " << what;
  }
#endif
}

TEST(cpu_QuantizeActs, RandomRowsGiveTheReferenceBytes) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const float scale : {1e-30f, 1e-3f, 1.0f, 37.0f, 1e20f}) {
    for (const int64_t n : {256, 896, 3584, 4864}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = normal(rng) * scale;
      for (const TensorType type : kTypes) {
        if (n % quant::type_traits(type).block_size != 0) continue;
        expect_reference_bytes(type, x,
                               "scale " + std::to_string(scale) + " n " + std::to_string(n));
      }
    }
  }
}

// amax = 127 makes d = 1 (Q8_0) and iscale = 1 (Q8_K, its first extreme
// negative), so halves are exact ties: away from zero for Q8_0/Q8_1, to even
// for Q8_K.
TEST(cpu_QuantizeActs, TiesRoundAsTheReference) {
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = (static_cast<float>(i % 64) - 32.0f) + 0.5f;
  }
  for (size_t b = 0; b < x.size(); b += 32) x[b] = -127.0f;
  for (const TensorType type : kTypes) expect_reference_bytes(type, x, "ties");
  const std::vector<uint8_t> q8 = reference_bytes(TensorType::Q8_0, x);
  // Element 1 is -30.5 -> -31 (away from zero); its Q8_K value is -30 (even).
  EXPECT_EQ(static_cast<int8_t>(q8[2 + 1]), -31);
  const std::vector<uint8_t> qk = reference_bytes(TensorType::Q8_K, x);
  EXPECT_EQ(static_cast<int8_t>(qk[4 + 1]), -30);
}

// Q8_K scales by the first element of largest magnitude: -5 before +5 and +5
// before -5 give opposite signs.
TEST(cpu_QuantizeActs, FirstLargestElementSetsTheQ8KSign) {
  for (const float first : {-5.0f, 5.0f}) {
    std::vector<float> x(256, 0.25f);
    x[3] = first;
    x[200] = -first;
    expect_reference_bytes(TensorType::Q8_K, x, "first " + std::to_string(first));
    const std::vector<uint8_t> q = reference_bytes(TensorType::Q8_K, x);
    EXPECT_EQ(static_cast<int8_t>(q[4 + 3]), -127);
    EXPECT_EQ(static_cast<int8_t>(q[4 + 200]), 127);
  }
}

TEST(cpu_QuantizeActs, ZeroAndTinyBlocks) {
  std::vector<float> x(512, 0.0f);
  for (size_t i = 300; i < 512; ++i) x[i] = 1e-42f * static_cast<float>(i);  // subnormal
  x[40] = -0.0f;
  x[310] = -5e-42f;  // the opposite sign: +inf in Q8_K's product
  for (const TensorType type : kTypes) expect_reference_bytes(type, x, "zero and subnormal");
}

TEST(cpu_QuantizeActs, NonFiniteInputIsTheReferencesError) {
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> x(512, 1.0f);
    x[77] = bad;
    for (const TensorType type : kTypes) {
      std::vector<uint8_t> out(*quant::row_bytes(type, 512));
      const Status got = quantize_activations(type, x.data(), out.data(), 512);
      const Status want = quant::quantize_row(type, x.data(), out.data(), 512);
      ASSERT_FALSE(got);
      EXPECT_EQ(got.message(), want.message());
      EXPECT_NE(got.message().find("77"), std::string::npos) << got.message();
    }
  }
}

TEST(cpu_QuantizeActs, BadLengthAndOtherTypesGoToTheReference) {
  std::vector<float> x(100, 1.0f);
  std::vector<uint8_t> out(4096);
  const Status s = quantize_activations(TensorType::Q8_0, x.data(), out.data(), 100);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(),
            quant::quantize_row(TensorType::Q8_0, x.data(), out.data(), 100).message());
  // Q4_0 has a reference quantizer: the same bytes.
  std::vector<float> y(64);
  for (size_t i = 0; i < y.size(); ++i) y[i] = std::sin(static_cast<float>(i));
  std::vector<uint8_t> a(36), b(36);
  ASSERT_TRUE(quantize_activations(TensorType::Q4_0, y.data(), a.data(), 64));
  ASSERT_TRUE(quant::quantize_row(TensorType::Q4_0, y.data(), b.data(), 64));
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace minfer::cpu
