#include "backend/cpu/norm_rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend_testutil.h"

namespace minfer::cpu {
namespace {

using testing::random_floats;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Distance in units in the last place between two finite floats of one sign.
int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

#define SKIP_WITHOUT_AVX2() \
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU without AVX2/FMA"

// Row dims of the models (Qwen2.5 0.5B, Gemma 3 270M, ...), per-head groups
// and odd tails around the 16-wide sum and 8-wide scale steps.
constexpr int64_t kDims[] = {1, 7, 8, 15, 16, 17, 31, 64, 72, 128, 256, 640, 896, 1003, 2560, 3584};

TEST(cpu_NormRope, RmsSumOfSquaresAgreesWithinDoubleRounding) {
  SKIP_WITHOUT_AVX2();
  for (int64_t n : kDims) {
    SCOPED_TRACE(n);
    const auto x = random_floats(n, 11 + static_cast<uint32_t>(n), 2.0f);
    const double a = detail::rms_sum_squares_f64(x.data(), n, Isa::kScalar);
    const double b = detail::rms_sum_squares_f64(x.data(), n, Isa::kAvx2);
    // Both sum the same non-negative terms; each order is within n * 2^-53.
    EXPECT_NEAR(a, b, static_cast<double>(n) * 0x1p-52 * a) << a << " " << b;
    if (n < 16) EXPECT_EQ(a, b);  // no vector step: the same sequential sum
  }
}

TEST(cpu_NormRope, RmsScaleIsBitIdentical) {
  SKIP_WITHOUT_AVX2();
  for (int64_t n : kDims) {
    SCOPED_TRACE(n);
    const auto x = random_floats(n, 21, 3.0f);
    const auto w = random_floats(n, 22);
    const float s = 0.37f;
    for (const float* wp : {w.data(), static_cast<const float*>(nullptr)}) {
      std::vector<float> a(n), b(n);
      detail::rms_scale_f32(x.data(), wp, n, s, a.data(), Isa::kScalar);
      detail::rms_scale_f32(x.data(), wp, n, s, b.data(), Isa::kAvx2);
      EXPECT_TRUE(same_bits(a, b)) << (wp ? "weight" : "no weight");
      std::vector<float> in_place = x;
      detail::rms_scale_f32(in_place.data(), wp, n, s, in_place.data(), Isa::kAvx2);
      EXPECT_TRUE(same_bits(a, in_place)) << "in place";
    }
  }
}

// Whole rows, including per-head groups (rows of head_dim): with the same scale
// the outputs are bit-identical, and the scales are at most 1 ulp apart (the
// only difference is the double sum order, which rarely moves the f32 mean).
TEST(cpu_NormRope, RmsNormRowsAvx2MatchScalar) {
  SKIP_WITHOUT_AVX2();
  int64_t rows_differing = 0;
  for (int64_t n : kDims) {
    for (uint32_t seed = 0; seed < 8; ++seed) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " seed " << seed);
      const auto x = random_floats(n, 100 + seed, seed % 2 ? 50.0f : 0.5f);
      const auto w = random_floats(n, 200 + seed);
      const float eps = 1e-6f;
      const float sa =
          detail::rms_inv_scale(detail::rms_sum_squares_f64(x.data(), n, Isa::kScalar), n, eps);
      const float sb =
          detail::rms_inv_scale(detail::rms_sum_squares_f64(x.data(), n, Isa::kAvx2), n, eps);
      ASSERT_LE(ulp_distance(sa, sb), 1);
      std::vector<float> a(n), b(n), b_with_sa(n);
      detail::rms_norm_row_f32(x.data(), w.data(), n, eps, a.data(), Isa::kScalar);
      detail::rms_norm_row_f32(x.data(), w.data(), n, eps, b.data(), Isa::kAvx2);
      detail::rms_scale_f32(x.data(), w.data(), n, sa, b_with_sa.data(), Isa::kAvx2);
      EXPECT_TRUE(same_bits(a, b_with_sa));
      if (sa == sb) {
        EXPECT_TRUE(same_bits(a, b));
      } else {
        ++rows_differing;
        for (int64_t i = 0; i < n; ++i) ASSERT_LE(ulp_distance(a[i], b[i]), 2) << i;
      }
    }
  }
  EXPECT_LE(rows_differing, 2);  // order changes reach the f32 mean rarely
}

TEST(cpu_NormRope, RmsNormHeadsUsesTheVectorRows) {
  // Public entry point (active ISA) against the scalar row kernel per head.
  const int64_t tokens = 3, heads = 4, hd = 256;
  const auto x = random_floats(tokens * heads * hd, 31, 4.0f);
  const auto w = random_floats(hd, 32);
  std::vector<float> got(x.size());
  rms_norm_heads(x.data(), w.data(), tokens, heads, hd, 1e-6f, got.data());
  for (int64_t c = 0; c < tokens * heads; ++c) {
    std::vector<float> ref(hd);
    detail::rms_norm_row_f32(&x[c * hd], w.data(), hd, 1e-6f, ref.data(), Isa::kScalar);
    for (int64_t i = 0; i < hd; ++i) ASSERT_LE(ulp_distance(ref[i], got[c * hd + i]), 2);
  }
}

struct RopeCase {
  int64_t head_dim, n_rot;
  bool freq_factors;
};

TEST(cpu_NormRope, RopeRotationAvx2IsBitIdentical) {
  SKIP_WITHOUT_AVX2();
  const RopeCase cases[] = {{64, 64, false},  {128, 128, false}, {256, 256, false},
                            {128, 64, false}, {128, 32, true},   {128, 128, true},
                            {64, 20, false},  {72, 70, true},    {256, 128, true},
                            {8, 2, false},    {80, 80, false}};
  for (const RopeCase& rc : cases) {
    const int64_t half = rc.n_rot / 2;
    std::vector<float> ff(half);
    for (int64_t i = 0; i < half; ++i) ff[i] = 1.0f + 0.37f * static_cast<float>(i % 5);
    for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
      for (int32_t pos : {0, 1, 7, 511, 1234, 3999, 4000}) {
        SCOPED_TRACE(::testing::Message()
                     << "hd " << rc.head_dim << " n_rot " << rc.n_rot << " ff " << rc.freq_factors
                     << " neox " << (mode == RopeMode::kNeox) << " pos " << pos);
        std::vector<float> c(half), s(half);
        detail::rope_cache_f32(static_cast<float>(pos), rc.n_rot, 1000000.0f, 0.25f,
                               rc.freq_factors ? ff.data() : nullptr, c.data(), s.data());
        const auto x = random_floats(rc.head_dim, 40 + static_cast<uint32_t>(pos), 3.0f);
        std::vector<float> a(rc.head_dim), b(rc.head_dim);
        detail::rope_rotate_f32(x.data(), rc.head_dim, rc.n_rot, mode, c.data(), s.data(), a.data(),
                                Isa::kScalar);
        detail::rope_rotate_f32(x.data(), rc.head_dim, rc.n_rot, mode, c.data(), s.data(), b.data(),
                                Isa::kAvx2);
        ASSERT_TRUE(same_bits(a, b));
        std::vector<float> in_place = x;
        detail::rope_rotate_f32(in_place.data(), rc.head_dim, rc.n_rot, mode, c.data(), s.data(),
                                in_place.data(), Isa::kAvx2);
        ASSERT_TRUE(same_bits(a, in_place));
      }
    }
  }
}

TEST(cpu_NormRope, RopeMatchesScalarComposition) {
  // The public rope (active ISA) equals the scalar cache + rotation per head,
  // bit for bit, with freq factors and positions up to 4000.
  const int64_t tokens = 5, heads = 3, hd = 128, n_rot = 96;
  const auto x = random_floats(tokens * heads * hd, 51, 2.0f);
  const std::vector<int32_t> positions = {0, 3, 999, 2048, 4000};
  std::vector<float> ff(n_rot / 2);
  for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0f + static_cast<float>(i) / 16.0f;
  for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
    std::vector<float> got(x.size());
    ASSERT_TRUE(rope(x.data(), tokens, heads, hd, n_rot, positions.data(), 10000.0f, 1.0f,
                     ff.data(), mode, got.data())
                    .is_ok());
    std::vector<float> ref(x.size()), c(n_rot / 2), s(n_rot / 2);
    for (int64_t t = 0; t < tokens; ++t) {
      detail::rope_cache_f32(static_cast<float>(positions[t]), n_rot, 10000.0f, 1.0f, ff.data(),
                             c.data(), s.data());
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t off = (t * heads + h) * hd;
        detail::rope_rotate_f32(&x[off], hd, n_rot, mode, c.data(), s.data(), &ref[off],
                                Isa::kScalar);
      }
    }
    EXPECT_TRUE(same_bits(ref, got)) << (mode == RopeMode::kNeox ? "neox" : "normal");
  }
}

}  // namespace
}  // namespace minfer::cpu
