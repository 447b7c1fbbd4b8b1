// The packed AVX2 matmul against the per-row AVX2 dot kernels (which the
// quantization goldens pin to ggml's), its integer sums at the extremes of
// each format against exact arithmetic, and its batch invariance; on AVX-512
// VNNI CPUs every case also checks that the VNNI kernels give the same bits.
#include "backend/cpu/matmul_packed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cpu/matmul.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/kquant_layout.h"

namespace minfer::cpu {
namespace {

using quant::TensorType;
using testing::encode;
using testing::random_floats;

constexpr TensorType kPackedTypes[] = {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q5_1,
                                       TensorType::Q8_0, TensorType::Q4_K, TensorType::Q5_K,
                                       TensorType::Q6_K};

bool k_quant(TensorType t) {
  return t == TensorType::Q4_K || t == TensorType::Q5_K || t == TensorType::Q6_K;
}

// The AVX2 kernels' outputs; on CPUs with AVX-512 VNNI also the VNNI
// kernels', which must be the same bits (every test below checks both).
std::vector<float> run_packed(TensorType type, int64_t rows, int64_t in_dim,
                              const std::vector<uint8_t>& w, const std::vector<float>& x,
                              int64_t n_tokens, int threads) {
  ThreadPool pool(threads);
  Result<PackedWeight> p = pack_weight({type, rows, in_dim, w.data(), 0}, pool);
  EXPECT_TRUE(p.is_ok()) << p.message();
  std::vector<float> y(static_cast<size_t>(rows * n_tokens), NAN);
  if (!p) return y;
  std::vector<uint8_t> scratch;
  const Status s =
      packed_matmul(*p, x.data(), n_tokens, y.data(), pool, scratch, PackedKernels::kAvx2);
  EXPECT_TRUE(s.is_ok()) << s.message();
  if (packed_vnni_available()) {
    std::vector<float> yv(y.size(), NAN);
    const Status sv = packed_matmul(*p, x.data(), n_tokens, yv.data(), pool, scratch);
    EXPECT_TRUE(sv.is_ok()) << sv.message();
    EXPECT_EQ(0, std::memcmp(y.data(), yv.data(), y.size() * sizeof(float)))
        << "VNNI kernels differ from AVX2: " << quant::type_name(type) << " [" << rows << " x "
        << in_dim << "], " << n_tokens << " tokens";
  }
  return y;
}

// y[t][r] from the per-row AVX2 dot kernels.
std::vector<float> per_row(TensorType type, int64_t rows, int64_t in_dim,
                           const std::vector<uint8_t>& w, const std::vector<float>& x,
                           int64_t n_tokens) {
  const size_t w_bytes = *quant::row_bytes(type, in_dim);
  const DotFn dot = dot_kernel(type, Isa::kAvx2);
  std::vector<float> y(static_cast<size_t>(rows * n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const auto xq = encode(*vec_dot_type(type), std::vector<float>(x.begin() + t * in_dim,
                                                                   x.begin() + (t + 1) * in_dim));
    for (int64_t r = 0; r < rows; ++r)
      y[t * rows + r] = dot(in_dim, w.data() + r * w_bytes, xq.data());
  }
  return y;
}

TEST(cpu_MatmulPacked, EqualsPerRowKernelsForEveryTokenCountAndRowCount) {
  if (!packable(TensorType::Q4_0)) GTEST_SKIP() << "no AVX2";
  uint32_t seed = 300;
  for (TensorType type : kPackedTypes) {
    for (int64_t rows : {1, 8, 19, 37}) {
      const bool k = k_quant(type);
      for (int64_t in_dim :
           k ? std::vector<int64_t>{256, 3 * 256, 4864} : std::vector<int64_t>{32, 7 * 32, 4864}) {
        for (int64_t n_tokens : {1, 2, 3, 4, 5, 9, 70}) {
          const auto w = encode(type, random_floats(rows * in_dim, ++seed));
          const auto x = random_floats(in_dim * n_tokens, ++seed);
          const auto expected = per_row(type, rows, in_dim, w, x, n_tokens);
          const auto y = run_packed(type, rows, in_dim, w, x, n_tokens, 2);
          double sq = 0;
          for (float e : expected) sq += double(e) * e;
          const double rms = std::sqrt(sq / double(expected.size()));
          // The scaled block sums are added in another order: the f32
          // rounding grows with the number of blocks.
          // Q4_K's and Q5_K's scale and min terms partly cancel, which the f32 sums show more.
          const double tol =
              std::max(2e-6, (k ? 4e-6 : 1e-6) * std::sqrt(double(in_dim / (k ? 256 : 32))));
          for (size_t i = 0; i < y.size(); ++i) {
            ASSERT_TRUE(std::isfinite(y[i]));
            ASSERT_LT(std::abs(double(y[i]) - expected[i]) / rms, tol)
                << quant::type_name(type) << " rows=" << rows << " in=" << in_dim
                << " tokens=" << n_tokens << " at " << i;
          }
        }
      }
    }
  }
}

// Every token's outputs are the same bits whatever the batch around it and
// the thread count: alone, first, in the middle or last of 1..70 tokens.
TEST(cpu_MatmulPacked, TokenResultsDoNotDependOnTheBatch) {
  if (!packable(TensorType::Q4_0)) GTEST_SKIP() << "no AVX2";
  const int64_t rows = 45;
  for (TensorType type : kPackedTypes) {
    const int64_t in_dim = k_quant(type) ? 2 * 256 : 9 * 32;
    const auto w = encode(type, random_floats(rows * in_dim, 11));
    const auto all = random_floats(in_dim * 70, 12);
    std::vector<std::vector<float>> alone(70);
    for (int64_t t = 0; t < 70; ++t) {
      alone[static_cast<size_t>(t)] = run_packed(
          type, rows, in_dim, w,
          std::vector<float>(all.begin() + t * in_dim, all.begin() + (t + 1) * in_dim), 1, 1);
    }
    for (int64_t n : {2, 3, 5, 17, 70}) {
      for (int threads : {1, 2}) {
        const auto y =
            run_packed(type, rows, in_dim, w,
                       std::vector<float>(all.begin(), all.begin() + n * in_dim), n, threads);
        for (int64_t t = 0; t < n; ++t) {
          ASSERT_EQ(0, std::memcmp(y.data() + t * rows, alone[static_cast<size_t>(t)].data(),
                                   static_cast<size_t>(rows) * sizeof(float)))
              << quant::type_name(type) << " token " << t << " of " << n << ", " << threads
              << " threads";
        }
      }
    }
  }
}

// Blocks written directly at each format's extremes (every weight quant at
// its largest magnitude, activations at +-127): an int16 partial sum that
// overflowed would show. Expected: exact integer sums times the scales, in
// double.
TEST(cpu_MatmulPacked, ExtremeQuantsSumExactly) {
  if (!packable(TensorType::Q4_0)) GTEST_SKIP() << "no AVX2";
  const int64_t rows = 9, nb = 4, in_dim = nb * 32;
  for (TensorType type : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0}) {
    for (int sign : {1, -1}) {
      const size_t w_bytes = *quant::row_bytes(type, in_dim);
      std::vector<uint8_t> w(static_cast<size_t>(rows) * w_bytes);
      const uint16_t one = quant::f32_to_f16(1.0f);
      std::vector<double> wq(static_cast<size_t>(rows * in_dim));  // signed quant values
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < nb; ++b) {
          uint8_t* blk = w.data() + r * w_bytes + b * (w_bytes / nb);
          std::memcpy(blk, &one, 2);
          for (int e = 0; e < 32; ++e) {
            // Row 0 all at the top (the largest int16 partial sums); the
            // others mix the extremes so both signs appear.
            const bool high = r == 0 || ((e + r + b) % 3) != 0;
            int q = 0;
            if (type == TensorType::Q8_0) {
              q = high ? 127 : -127;
              blk[2 + e] = static_cast<uint8_t>(static_cast<int8_t>(q));
            } else {
              const int bits = type == TensorType::Q4_0 ? 4 : 5;
              const int u = high ? (1 << bits) - 1 : 0;
              q = u - (1 << (bits - 1));
              uint8_t* qs = blk + (type == TensorType::Q4_0 ? 2 : 6);
              const int nib = u & 15;
              qs[e % 16] = static_cast<uint8_t>(qs[e % 16] | (e < 16 ? nib : nib << 4));
              if (bits == 5 && (u & 16) != 0) blk[2 + e / 8] |= static_cast<uint8_t>(1 << (e % 8));
            }
            wq[static_cast<size_t>(r * in_dim + b * 32 + e)] = q;
          }
        }
      }
      // Activations quantize to +-127 exactly: each block's amax is 127.
      std::vector<float> x(static_cast<size_t>(in_dim));
      // The first block all one sign, the rest mixed.
      for (int64_t i = 0; i < in_dim; ++i)
        x[static_cast<size_t>(i)] = (i >= 32 && i % 5 == 0 ? -127.0f : 127.0f) * float(sign);
      const auto y = run_packed(type, rows, in_dim, w, x, 1, 1);
      for (int64_t r = 0; r < rows; ++r) {
        double expected = 0;
        for (int64_t i = 0; i < in_dim; ++i)
          expected += wq[static_cast<size_t>(r * in_dim + i)] * x[static_cast<size_t>(i)];
        EXPECT_EQ(double(y[static_cast<size_t>(r)]), expected)
            << quant::type_name(type) << " row " << r << " sign " << sign;
      }
    }
  }
}

// The packed outputs of K-quant weights wb (values wv in double) against
// activations at +-127 (the second super-block mixed), to f32 precision
// (the exact sums pass 2^24).
void expect_k_extremes(TensorType type, int64_t rows, int64_t in_dim,
                       const std::vector<uint8_t>& wb, const std::vector<double>& wv) {
  for (int sign : {1, -1}) {
    std::vector<float> x(static_cast<size_t>(in_dim));
    for (int64_t i = 0; i < in_dim; ++i)
      x[static_cast<size_t>(i)] = (i >= 256 && i % 7 == 0 ? -127.0f : 127.0f) * float(sign);
    const auto y = run_packed(type, rows, in_dim, wb, x, 1, 1);
    for (int64_t r = 0; r < rows; ++r) {
      double expected = 0;
      for (int64_t i = 0; i < in_dim; ++i)
        expected += wv[static_cast<size_t>(r * in_dim + i)] * x[static_cast<size_t>(i)];
      EXPECT_NEAR(double(y[static_cast<size_t>(r)]), expected, std::abs(expected) * 1e-6)
          << quant::type_name(type) << " row " << r << " sign " << sign;
    }
  }
}

// Q4_K at its extremes: every quant 15, every 6-bit scale and min 63, the
// activations +-127; an overflowing int16 partial sum would be far off.
TEST(cpu_MatmulPacked, Q4KExtremesSumExactly) {
  if (!packable(TensorType::Q4_K)) GTEST_SKIP() << "no AVX2";
  const int64_t rows = 9, in_dim = 2 * 256;
  std::vector<quant::BlockQ4_K> w(static_cast<size_t>(rows * 2));
  for (quant::BlockQ4_K& b : w) {
    b.d = quant::f32_to_f16(1.0f);
    b.dmin = quant::f32_to_f16(0.5f);
    std::memset(b.scales, 0, sizeof(b.scales));
    for (int s = 0; s < 8; ++s) quant::detail::set_k4_scale_min(b.scales, s, 63, 63);
    std::memset(b.qs, 0xff, sizeof(b.qs));  // every quant 15
  }
  std::vector<uint8_t> wb(w.size() * sizeof(quant::BlockQ4_K));
  std::memcpy(wb.data(), w.data(), wb.size());
  // Each weight is 63 * 15 - 0.5 * 63.
  expect_k_extremes(TensorType::Q4_K, rows, in_dim, wb,
                    std::vector<double>(static_cast<size_t>(rows * in_dim), 63.0 * 15 - 0.5 * 63));
}

// Q5_K at its extremes: quants at 31 and 0, every 6-bit scale and min at
// 63, activations +-127 (row 0 all at 31: the largest int16 partial sums);
// the fifth bits of each pair and half take part. The exact sums pass 2^24,
// so they are compared to f32 precision.
TEST(cpu_MatmulPacked, Q5KExtremesSumExactly) {
  if (!packable(TensorType::Q5_K)) GTEST_SKIP() << "no AVX2";
  const int64_t rows = 9, nb = 2, in_dim = nb * 256;
  std::vector<quant::BlockQ5_K> w(static_cast<size_t>(rows * nb));
  std::vector<double> wv(static_cast<size_t>(rows * in_dim));  // scale * quant - min
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      quant::BlockQ5_K& blk = w[static_cast<size_t>(r * nb + b)];
      std::memset(&blk, 0, sizeof(blk));
      blk.d = quant::f32_to_f16(1.0f);
      blk.dmin = quant::f32_to_f16(0.5f);
      for (int s = 0; s < 8; ++s) quant::detail::set_k4_scale_min(blk.scales, s, 63, 63);
      for (int e = 0; e < 256; ++e) {
        const int u = r == 0 || (e + r + b) % 3 != 0 ? 31 : (e % 2 == 0 ? 0 : 16);
        quant::detail::set_k4(blk.qs, e, u & 15);
        quant::detail::set_hbit(blk.qh, e, u >> 4);
        wv[static_cast<size_t>(r * in_dim + b * 256 + e)] = 63.0 * u - 0.5 * 63;
      }
    }
  }
  std::vector<uint8_t> wb(w.size() * sizeof(quant::BlockQ5_K));
  std::memcpy(wb.data(), w.data(), wb.size());
  expect_k_extremes(TensorType::Q5_K, rows, in_dim, wb, wv);
}

// Q6_K at its extremes: quants at 63 (+31) and 0 (-32), scales at 127 and
// -128, activations +-127; row 0 takes the largest int16 partial sums. The
// exact sums pass 2^24, so they are compared to f32 precision.
TEST(cpu_MatmulPacked, Q6KExtremesSumExactly) {
  if (!packable(TensorType::Q6_K)) GTEST_SKIP() << "no AVX2";
  const int64_t rows = 9, nb = 2, in_dim = nb * 256;
  std::vector<quant::BlockQ6_K> w(static_cast<size_t>(rows * nb));
  std::vector<double> wv(static_cast<size_t>(rows * in_dim));  // scale * signed quant
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      quant::BlockQ6_K& blk = w[static_cast<size_t>(r * nb + b)];
      std::memset(&blk, 0, sizeof(blk));
      blk.d = quant::f32_to_f16(1.0f);
      for (int s = 0; s < 16; ++s) {
        blk.scales[s] = static_cast<int8_t>(r == 0 || (s + r) % 4 != 0 ? 127 : -128);
      }
      for (int e = 0; e < 256; ++e) {
        const int u = r == 0 || (e + r + b) % 3 != 0 ? 63 : 0;
        quant::detail::set_q6_low(blk.ql, e, u & 15);
        quant::detail::set_2bit(blk.qh, e, u >> 4);
        wv[static_cast<size_t>(r * in_dim + b * 256 + e)] = blk.scales[e / 16] * (u - 32.0);
      }
    }
  }
  std::vector<uint8_t> wb(w.size() * sizeof(quant::BlockQ6_K));
  std::memcpy(wb.data(), w.data(), wb.size());
  expect_k_extremes(TensorType::Q6_K, rows, in_dim, wb, wv);
}

TEST(cpu_MatmulPacked, RefusesOtherTypesAndNamesABadToken) {
  if (!packable(TensorType::Q4_0)) GTEST_SKIP() << "no AVX2";
  EXPECT_FALSE(packable(TensorType::Q3_K));
  EXPECT_FALSE(packable(TensorType::F32));
  ThreadPool pool(1);
  const auto w3 = encode(TensorType::Q3_K, random_floats(2 * 256, 3));
  const Result<PackedWeight> bad = pack_weight({TensorType::Q3_K, 2, 256, w3.data(), 0}, pool);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("Q3_K"), std::string::npos) << bad.message();

  const auto w = encode(TensorType::Q4_0, random_floats(8 * 64, 4));
  const Result<PackedWeight> p = pack_weight({TensorType::Q4_0, 8, 64, w.data(), 0}, pool);
  ASSERT_TRUE(p.is_ok()) << p.message();
  auto x = random_floats(64 * 3, 5);
  x[64 * 2 + 7] = NAN;
  std::vector<float> y(8 * 3);
  std::vector<uint8_t> scratch;
  const Status s = packed_matmul(*p, x.data(), 3, y.data(), pool, scratch);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("activation row 2"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace minfer::cpu
