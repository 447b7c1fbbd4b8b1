#include "backend/cpu/vec_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cpu/cpu_options.h"
#include "backend/cpu/vec_dot_internal.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/reference.h"

namespace minfer::cpu {
namespace {

using quant::TensorType;
using testing::decode;
using testing::encode;
using testing::random_floats;

constexpr TensorType kWeightTypes[] = {
    TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1,
    TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K,
    TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::MXFP4};

TEST(cpu_VecDotType, MatchesGgmlTypeTraits) {
  const std::pair<TensorType, TensorType> expected[] = {
      {TensorType::F32, TensorType::F32},   {TensorType::F16, TensorType::F16},
      {TensorType::BF16, TensorType::BF16}, {TensorType::Q4_0, TensorType::Q8_0},
      {TensorType::Q4_1, TensorType::Q8_1}, {TensorType::Q5_0, TensorType::Q8_0},
      {TensorType::Q5_1, TensorType::Q8_1}, {TensorType::Q8_0, TensorType::Q8_0},
      {TensorType::Q2_K, TensorType::Q8_K}, {TensorType::Q3_K, TensorType::Q8_K},
      {TensorType::Q4_K, TensorType::Q8_K}, {TensorType::Q5_K, TensorType::Q8_K},
      {TensorType::Q6_K, TensorType::Q8_K}, {TensorType::MXFP4, TensorType::Q8_0}};
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

// Model::load admits exactly quant::is_weight_type's types; the CPU backend,
// the fallback of every graph, must compute each of them.
TEST(cpu_VecDotType, EveryLoadableWeightTypeHasAKernel) {
  int weight_types = 0;
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const quant::TypeTraits* t = quant::find_type_traits(raw);
    if (t == nullptr) continue;
    SCOPED_TRACE(std::string(t->name));
    if (quant::is_weight_type(t->type)) {
      ++weight_types;
      EXPECT_TRUE(vec_dot_type(t->type).is_ok());
      EXPECT_NE(quant::weight_type_names().find(std::string(t->name)), std::string::npos);
    } else {
      EXPECT_EQ(quant::weight_type_names().find(std::string(t->name) + ","), std::string::npos);
    }
  }
  EXPECT_EQ(weight_types, 14);  // F32 F16 BF16, Q4_0 Q4_1 Q5_0 Q5_1 Q8_0, Q2_K..Q6_K, MXFP4
  EXPECT_FALSE(quant::is_weight_type(TensorType::IQ4_NL));
  EXPECT_FALSE(quant::is_weight_type(TensorType::Q8_K));
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

// Overwrites every quant byte of a row of `type` blocks with random bits,
// keeping the f16/f32 scales (so the result stays finite and comparable).
// no_int8_min: Q8_0 quants stay in [-127, 127], as quantize_row writes them.
void randomize_quants(TensorType type, std::vector<uint8_t>& row, std::mt19937& rng,
                      bool no_int8_min) {
  struct Span {
    size_t offset, bytes;
  };
  std::vector<Span> spans;
  switch (type) {
    case TensorType::Q4_0:
      spans = {{2, 16}};
      break;
    case TensorType::Q4_1:
      spans = {{4, 16}};
      break;
    case TensorType::Q5_0:
      spans = {{2, 20}};
      break;
    case TensorType::Q5_1:
      spans = {{4, 20}};
      break;
    case TensorType::Q8_0:
      spans = {{2, 32}};
      break;
    case TensorType::MXFP4:  // nibbles only: the E8M0 byte keeps the quantizer's scale
      spans = {{1, 16}};
      break;
    case TensorType::Q8_1:  // s = d * sum(q) goes stale; both kernels read the same s
      spans = {{4, 32}};
      break;
    case TensorType::Q2_K:  // scales and mins too: every nibble is legal
      spans = {{0, 80}};
      break;
    case TensorType::Q3_K:  // hmask, qs, packed six-bit scales
      spans = {{0, 108}};
      break;
    case TensorType::Q4_K:  // packed scales and qs
    case TensorType::Q5_K:  // packed scales, qh and qs
      spans = {{4, quant::type_traits(type).type_size - 4}};
      break;
    case TensorType::Q6_K:  // ql, qh and the int8 scales
      spans = {{0, 208}};
      break;
    case TensorType::Q8_K:  // qs; bsums must stay the sums of qs, recomputed below
      spans = {{4, 256}};
      break;
    default:
      return;
  }
  const size_t block = quant::type_traits(type).type_size;
  for (size_t b = 0; b + block <= row.size(); b += block) {
    for (const Span& s : spans) {
      for (size_t i = 0; i < s.bytes; ++i) {
        auto byte = static_cast<uint8_t>(rng());
        if (no_int8_min && type == TensorType::Q8_0 && byte == 0x80) byte = 0x81;
        row[b + s.offset + i] = byte;
      }
    }
    if (type == TensorType::Q8_K) {
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += static_cast<int8_t>(row[b + 4 + 16 * g + i]);
        const auto s16 = static_cast<int16_t>(sum);
        std::memcpy(&row[b + 4 + 256 + 2 * g], &s16, 2);
      }
    }
  }
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

// Every SIMD kernel set, tested against the scalar reference wherever the
// CPU can run it (on x86 the NEON ones skip, and the other way round).
class cpu_VecDotSimd : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "CPU without " << isa_name(GetParam());
  }
};

TEST_P(cpu_VecDotSimd, KernelsMatchDequantizedReference) {
  uint32_t seed = 100;
  for (TensorType type : kWeightTypes) {
    for (int64_t n : lengths_for(type)) check_kernel_against_reference(type, n, GetParam(), ++seed);
  }
}

TEST_P(cpu_VecDotSimd, AgreesWithScalar) {
  uint32_t seed = 500;
  for (TensorType type : kWeightTypes) {
    for (int64_t n : lengths_for(type)) {
      SCOPED_TRACE(std::string(quant::type_name(type)) + " n=" + std::to_string(n));
      const auto w = encode(type, random_floats(n, ++seed));
      const auto x = encode(*vec_dot_type(type), random_floats(n, ++seed));
      const float a = dot_kernel(type, Isa::kScalar)(n, w.data(), x.data());
      const float b = dot_kernel(type, GetParam())(n, w.data(), x.data());
      EXPECT_NEAR(a, b, 2e-5 * (std::fabs(a) + std::sqrt(static_cast<double>(n))));
    }
  }
}

// Extreme but legal operands: all quants at their extremes must not saturate
// the 16-bit intermediate sums of the SIMD kernels.
TEST_P(cpu_VecDotSimd, ExtremeQuantsDoNotSaturate) {
  for (TensorType type : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                          TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K,
                          TensorType::Q5_K, TensorType::Q6_K, TensorType::MXFP4}) {
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
    const float b = dot_kernel(type, GetParam())(n, w.data(), x.data());
    EXPECT_NEAR(a, b, 1e-4 * (1.0 + std::fabs(a)));
  }
}

// Raw blocks with every quant byte at random (any bit pattern is a legal
// quant of the K-quants and Q4/Q5; int8 activations at -128 included): the
// SIMD integer sums must equal the scalar ones exactly, so with unit scales
// the two results agree to float rounding of the few scaled sums.
TEST_P(cpu_VecDotSimd, RandomBitPatternsMatchScalar) {
  std::mt19937 rng(7);
  for (TensorType type : kWeightTypes) {
    if (quant::type_traits(type).block_size == 1) continue;  // float rows: no integer sums
    SCOPED_TRACE(std::string(quant::type_name(type)));
    const int64_t n = 1024;
    const TensorType xt = *vec_dot_type(type);
    auto w = encode(type, random_floats(n, 11));
    auto x = encode(xt, random_floats(n, 12));
    // AVX2 moves the weight's sign onto the Q8_0 activation (maddubs), which
    // needs |q| <= 127 on both sides there.
    const bool no_int8_min = GetParam() == Isa::kAvx2;
    randomize_quants(type, w, rng, no_int8_min);
    randomize_quants(xt, x, rng, no_int8_min);
    // A wrong integer sum moves the result by about one of these n terms.
    const auto wf = decode(type, w.data(), n);
    const auto xf = decode(xt, x.data(), n);
    double mag = q8_1_offset_magnitude(type, w.data(), x.data(), n);
    for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(wf[i]) * xf[i]);
    const float a = dot_kernel(type, Isa::kScalar)(n, w.data(), x.data());
    const float b = dot_kernel(type, GetParam())(n, w.data(), x.data());
    EXPECT_NEAR(a, b, 2e-5 * mag) << "mag " << mag;
  }
}

// BF16 rows of random bit patterns: random signs and mantissas, exponents over
// 2^-50..2^50 and now and then a zero exponent field (zeros, subnormals), so
// every product and sum stays finite. Scalar and SIMD kernels both match the
// exact dot product to the rounding of their float sums, in the SIMD main
// loop and in its tail alike.
TEST_P(cpu_VecDotSimd, Bf16RandomBitPatternsMatchReference) {
  std::mt19937 rng(9);
  for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{32}, int64_t{1000}, int64_t{4096 + 17}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<uint16_t> w(n), x(n);
    for (auto* row : {&w, &x}) {
      for (uint16_t& v : *row) {
        const uint32_t bits = rng();
        const uint32_t exponent = (bits >> 8) % 16 == 0 ? 0 : 127 - 50 + (bits >> 12) % 101;
        v = static_cast<uint16_t>((bits & 0x8000u) | (exponent << 7) | (bits & 0x7fu));
      }
    }
    double exact = 0.0;
    double mag = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double p = static_cast<double>(quant::bf16_to_f32(w[i])) * quant::bf16_to_f32(x[i]);
      exact += p;
      mag += std::fabs(p);
    }
    const double tol = 1e-5 * mag + 1e-37;
    const float a = dot_kernel(TensorType::BF16, Isa::kScalar)(n, w.data(), x.data());
    const float b = dot_kernel(TensorType::BF16, GetParam())(n, w.data(), x.data());
    EXPECT_NEAR(a, exact, tol) << "mag " << mag;
    EXPECT_NEAR(b, exact, tol) << "mag " << mag;
  }
}

// An infinite or NaN element, or a product beyond the f32 range, reaches the
// result wherever it sits (main loop or tail), as in the scalar kernel.
TEST_P(cpu_VecDotSimd, Bf16SpecialValuesPropagate) {
  constexpr uint16_t kOne = 0x3f80, kInf = 0x7f80, kNan = 0x7fc0, kMax = 0x7f7f;
  const int64_t n = 45;
  for (int64_t pos : {int64_t{0}, int64_t{17}, int64_t{33}, int64_t{44}}) {
    SCOPED_TRACE("pos=" + std::to_string(pos));
    for (uint16_t special : {kInf, kNan, kMax}) {
      std::vector<uint16_t> w(n, kOne), x(n, kOne);
      w[pos] = special;
      if (special == kMax) x[pos] = kMax;  // about 2^256: beyond f32
      const float a = dot_kernel(TensorType::BF16, Isa::kScalar)(n, w.data(), x.data());
      const float b = dot_kernel(TensorType::BF16, GetParam())(n, w.data(), x.data());
      if (special == kNan) {
        EXPECT_TRUE(std::isnan(a));
        EXPECT_TRUE(std::isnan(b));
      } else {
        EXPECT_EQ(a, INFINITY);
        EXPECT_EQ(b, INFINITY);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, cpu_VecDotSimd,
                         ::testing::Values(Isa::kAvx2, Isa::kNeon, Isa::kNeonDotprod),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           std::string name = isa_name(info.param);
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST(cpu_VecDot, DotprodFallsBackToNeonForFloatRows) {
  if (!isa_supported(Isa::kNeonDotprod)) GTEST_SKIP() << "CPU without neon-dotprod";
  EXPECT_EQ(dot_kernel(TensorType::F32, Isa::kNeonDotprod),
            dot_kernel(TensorType::F32, Isa::kNeon));
  EXPECT_NE(dot_kernel(TensorType::Q4_K, Isa::kNeonDotprod),
            dot_kernel(TensorType::Q4_K, Isa::kNeon));
}

// Every type has its own AVX2 kernel, so the tests above exercise them all.
TEST(cpu_VecDot, Avx2HasAKernelForEveryType) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU without avx2";
  for (TensorType type : kWeightTypes) {
    EXPECT_NE(dot_kernel(type, Isa::kAvx2), dot_kernel(type, Isa::kScalar))
        << quant::type_name(type);
  }
}

TEST(cpu_VecDot, UnsupportedIsaGetsScalarKernels) {
  for (Isa isa : {Isa::kAvx2, Isa::kNeon, Isa::kNeonDotprod}) {
    if (isa_supported(isa)) continue;
    EXPECT_EQ(dot_kernel(TensorType::Q4_K, isa), dot_kernel(TensorType::Q4_K, Isa::kScalar))
        << isa_name(isa);
  }
}

TEST(cpu_VecDot, ScalarEnvVarForcesScalarKernels) {
  EXPECT_EQ(detail::choose_isa(Isa::kAvx2, false), Isa::kAvx2);
  EXPECT_EQ(detail::choose_isa(Isa::kNeon, false), Isa::kNeon);
  EXPECT_EQ(detail::choose_isa(Isa::kAvx2, true), Isa::kScalar);
  EXPECT_EQ(detail::choose_isa(Isa::kNeonDotprod, true), Isa::kScalar);
  EXPECT_EQ(detail::choose_isa(Isa::kScalar, false), Isa::kScalar);
  EXPECT_EQ(active_isa(), detail::choose_isa(detail::best_supported_isa(),
                                             process_section<CpuOptions>().cpu_scalar));
  EXPECT_TRUE(isa_supported(detail::best_supported_isa()));
#if defined(__aarch64__)
  EXPECT_NE(detail::best_supported_isa(), Isa::kScalar);  // NEON is baseline AArch64
#endif
}

TEST(cpu_VecDot, ZeroLengthIsZero) {
  for (TensorType type : kWeightTypes) {
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kNeon, Isa::kNeonDotprod}) {
      EXPECT_EQ(dot_kernel(type, isa)(0, nullptr, nullptr), 0.0f) << isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace minfer::cpu
