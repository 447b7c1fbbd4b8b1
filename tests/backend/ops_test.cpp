#include "backend/cpu/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/reference_ops.h"
#include "quant/half.h"

namespace minfer::cpu {
namespace {

using testing::gelu_ref;
using testing::random_floats;
using testing::rope_ref;

TEST(cpu_RmsNorm, MatchesDoublePrecision) {
  const int64_t rows = 3, dim = 4096;
  const auto x = random_floats(rows * dim, 1, 3.0f);
  const auto w = random_floats(dim, 2);
  std::vector<float> y(x.size()), y_nw(x.size());
  rms_norm(x.data(), w.data(), rows, dim, 1e-6f, y.data());
  rms_norm(x.data(), nullptr, rows, dim, 1e-6f, y_nw.data());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double s = 1.0 / std::sqrt(ss / dim + 1e-6);
    for (int64_t i = 0; i < dim; ++i) {
      const double ref = x[r * dim + i] * s;
      ASSERT_NEAR(y_nw[r * dim + i], ref, 1e-6 * std::fabs(ref) + 1e-12);
      ASSERT_NEAR(y[r * dim + i], ref * w[i], 1e-6 * std::fabs(ref * w[i]) + 1e-12);
    }
  }
}

TEST(cpu_RmsNorm, InPlaceAndPerHeadAgree) {
  const int64_t tokens = 2, heads = 3, hd = 128;
  const auto x = random_floats(tokens * heads * hd, 3);
  const auto w = random_floats(hd, 4);
  std::vector<float> per_head(x.size());
  rms_norm_heads(x.data(), w.data(), tokens, heads, hd, 1e-5f, per_head.data());
  for (int64_t c = 0; c < tokens * heads; ++c) {
    std::vector<float> chunk(x.begin() + c * hd, x.begin() + (c + 1) * hd);
    rms_norm(chunk.data(), w.data(), 1, hd, 1e-5f, chunk.data());  // in place
    for (int64_t i = 0; i < hd; ++i) ASSERT_EQ(chunk[i], per_head[c * hd + i]);
  }
}

TEST(cpu_Rope, MatchesDoublePrecisionForBothModes) {
  const int64_t heads = 2;
  const std::vector<int32_t> positions = {0, 1, 17, 500, 3000};
  const int64_t tokens = static_cast<int64_t>(positions.size());
  for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
    for (int64_t hd : {64, 128, 256}) {
      for (int64_t n_rot : {hd, hd / 2}) {
        const auto ff = random_floats(n_rot / 2, 9, 0.1f);
        std::vector<float> factors(ff.size());
        for (size_t i = 0; i < ff.size(); ++i) factors[i] = 1.0f + std::fabs(ff[i]);
        for (const float* fptr :
             {static_cast<const float*>(nullptr), static_cast<const float*>(factors.data())}) {
          SCOPED_TRACE("mode " + std::to_string(int(mode)) + " hd " + std::to_string(hd) +
                       " n_rot " + std::to_string(n_rot) + (fptr ? " ff" : ""));
          const auto x = random_floats(tokens * heads * hd, 5);
          std::vector<float> y(x.size());
          ASSERT_TRUE(rope(x.data(), tokens, heads, hd, n_rot, positions.data(), 10000.0f, 0.5f,
                           fptr, mode, y.data())
                          .is_ok());
          for (int64_t t = 0; t < tokens; ++t) {
            for (int64_t h = 0; h < heads; ++h) {
              const int64_t off = (t * heads + h) * hd;
              const auto ref =
                  rope_ref(&x[off], hd, n_rot, positions[t], 10000.0f, 0.5f, fptr, mode);
              // theta accumulates f32 products, so its error grows with the position.
              const double tol = 1e-5 + 4e-6 * positions[t];
              for (int64_t i = 0; i < hd; ++i)
                ASSERT_NEAR(y[off + i], ref[i], tol) << "t " << t << " i " << i;
            }
          }
        }
      }
    }
  }
}

TEST(cpu_Rope, RejectsBadRotationDims) {
  std::vector<float> x(64), y(64);
  const int32_t pos = 0;
  for (int64_t n_rot : {0, 3, 66}) {
    const Status s =
        rope(x.data(), 1, 1, 64, n_rot, &pos, 10000.0f, 1.0f, nullptr, RopeMode::kNeox, y.data());
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find(std::to_string(n_rot)), std::string::npos) << s.message();
  }
}

TEST(cpu_Activations, GeluFollowsTheF16Table) {
  const auto x = random_floats(10000, 6, 4.0f);
  std::vector<float> y(x.size());
  gelu(x.data(), static_cast<int64_t>(x.size()), y.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = gelu_ref(x[i]);
    // Input and output are both rounded to f16 (relative 2^-11 each).
    ASSERT_NEAR(y[i], ref, 2e-3 * (std::fabs(ref) + std::fabs(x[i])) + 1e-6) << x[i];
    // Inside (-10, 10) the result is an f16 value, as with ggml's table.
    if (std::fabs(x[i]) < 10.0f) ASSERT_EQ(quant::f16_to_f32(quant::f32_to_f16(y[i])), y[i]);
  }
  const float big[] = {-12.0f, 10.0f, 25.0f};
  float out[3];
  gelu(big, 3, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 10.0f);
  EXPECT_EQ(out[2], 25.0f);
}

TEST(cpu_Activations, GluVariantsAndElementwise) {
  const int64_t n = 1000;
  const auto a = random_floats(n, 7, 3.0f);
  const auto b = random_floats(n, 8);
  std::vector<float> sw(n), ge(n), g(n), si(n), ad(n), mu(n), sc(n);
  swiglu(a.data(), b.data(), n, sw.data());
  geglu(a.data(), b.data(), n, ge.data());
  gelu(a.data(), n, g.data());
  silu(a.data(), n, si.data());
  add(a.data(), b.data(), n, ad.data());
  mul(a.data(), b.data(), n, mu.data());
  scale(a.data(), n, 0.25f, sc.data());
  for (int64_t i = 0; i < n; ++i) {
    const double silu_ref = a[i] / (1.0 + std::exp(-double(a[i])));
    ASSERT_NEAR(si[i], silu_ref, 1e-6 * (1 + std::fabs(silu_ref)));
    ASSERT_EQ(sw[i], si[i] * b[i]);
    ASSERT_EQ(ge[i], g[i] * b[i]);
    ASSERT_EQ(ad[i], a[i] + b[i]);
    ASSERT_EQ(mu[i], a[i] * b[i]);
    ASSERT_EQ(sc[i], a[i] * 0.25f);
  }
}

TEST(cpu_Softmax, MatchesDoublePrecision) {
  const int64_t rows = 4, n = 333;
  const auto x = random_floats(rows * n, 9, 5.0f);
  std::vector<float> y(x.size());
  softmax(x.data(), rows, n, 0.7f, y.data());
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, 0.7 * x[r * n + i]);
    for (int64_t i = 0; i < n; ++i) sum += std::exp(0.7 * x[r * n + i] - mx);
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double ref = std::exp(0.7 * x[r * n + i] - mx) / sum;
      ASSERT_NEAR(y[r * n + i], ref, 1e-6 * ref + 1e-9);
      total += y[r * n + i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

}  // namespace
}  // namespace minfer::cpu
