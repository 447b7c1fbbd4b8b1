// The AVX-512 VNNI GEMM against references: exact integer block sums (a
// reference that adds d_w * d_x * sum block by block in the kernel's order
// must agree bit for bit), and the scalar dot kernels through matmul()
// within rounding. Edges: rows not a multiple of 16, tokens not a multiple of
// the tile or of a task, Qwen2.5's row lengths (896, 4864) and 3584.
// Skipped where the CPU lacks AVX-512 VNNI.
#include "backend/cpu/matmul_gemm_vnni.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "backend/backend_testutil.h"
#include "backend/cpu/matmul.h"
#include "quant/blocks.h"
#include "quant/half.h"

namespace minfer::cpu {
namespace {

using quant::TensorType;
using testing::encode;
using testing::random_floats;

constexpr TensorType kTypes[] = {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0};

#define SKIP_WITHOUT_VNNI() \
  if (!vnni_gemm_available()) GTEST_SKIP() << "CPU lacks AVX-512 VNNI (or MINFER_CPU_NO_AVX512)"

// Weight rows of random bytes: every quant value occurs (Q8_0 includes -128,
// which the quantizer never writes), with a random positive f16 scale.
std::vector<uint8_t> random_weights(TensorType type, int64_t rows, int64_t row_len, uint32_t seed) {
  const size_t block = quant::type_traits(type).type_size;
  std::vector<uint8_t> w(static_cast<size_t>(rows * row_len / quant::kQK) * block);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1e-3f, 0.1f);
  for (size_t b = 0; b < w.size(); b += block) {
    const uint16_t d = quant::f32_to_f16(scale(rng));
    std::memcpy(&w[b], &d, 2);
    for (size_t i = 2; i < block; ++i) w[b + i] = static_cast<uint8_t>(byte(rng));
  }
  return w;
}

// Element e of a weight block as its signed integer quant.
int weight_quant(TensorType type, const uint8_t* blk, int e) {
  switch (type) {
    case TensorType::Q4_0: {
      const uint8_t q = blk[2 + e % 16];
      return (e < 16 ? q & 15 : q >> 4) - 8;
    }
    case TensorType::Q5_0: {
      uint32_t qh;
      std::memcpy(&qh, blk + 2, 4);
      const uint8_t q = blk[6 + e % 16];
      const int lo = e < 16 ? q & 15 : q >> 4;
      return (lo | static_cast<int>(((qh >> e) & 1u) << 4)) - 16;
    }
    default:
      return static_cast<int8_t>(blk[2 + e]);
  }
}

// y[t][r] with the kernel's arithmetic written out: exact integer block sums,
// then acc = fma(d_w * d_x, sum, acc) in block order.
std::vector<float> reference(TensorType type, const std::vector<uint8_t>& w, int64_t rows,
                             int64_t row_len, const std::vector<uint8_t>& xq, int64_t n_tokens) {
  const size_t wb = quant::type_traits(type).type_size;
  const int64_t nb = row_len / quant::kQK;
  std::vector<float> y(static_cast<size_t>(rows * n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* pw = w.data() + static_cast<size_t>(r * nb + b) * wb;
        const uint8_t* px = xq.data() + static_cast<size_t>(t * nb + b) * sizeof(quant::BlockQ8_0);
        int sum = 0;
        for (int e = 0; e < quant::kQK; ++e) {
          sum += weight_quant(type, pw, e) * static_cast<int8_t>(px[2 + e]);
        }
        uint16_t dw, dx;
        std::memcpy(&dw, pw, 2);
        std::memcpy(&dx, px, 2);
        const float scale = quant::f16_to_f32(dw) * quant::f16_to_f32(dx);
        acc = std::fma(scale, static_cast<float>(sum), acc);
      }
      y[static_cast<size_t>(t * rows + r)] = acc;
    }
  }
  return y;
}

// Runs vnni_gemm over the whole problem in the given row/token ranges.
std::vector<float> run_vnni(TensorType type, const std::vector<uint8_t>& w, int64_t rows,
                            int64_t row_len, const std::vector<uint8_t>& xq, int64_t n_tokens,
                            int64_t row_step, int64_t token_step) {
  const size_t x_bytes = vnni_x_row_bytes(row_len);
  const size_t q8_bytes = *quant::row_bytes(TensorType::Q8_0, row_len);
  std::vector<uint8_t> xp(static_cast<size_t>(n_tokens) * x_bytes);
  for (int64_t t = 0; t < n_tokens; ++t) {
    vnni_prepare_x(type, xq.data() + t * q8_bytes, row_len, xp.data() + t * x_bytes);
  }
  std::vector<float> y(static_cast<size_t>(rows * n_tokens), NAN);
  const GemmProblem p{
      w.data(), *quant::row_bytes(type, row_len), xp.data(), x_bytes, row_len, y.data(), rows};
  for (int64_t r = 0; r < rows; r += row_step) {
    for (int64_t t = 0; t < n_tokens; t += token_step) {
      vnni_gemm(type, p, r, std::min(rows, r + row_step), t, std::min(n_tokens, t + token_step));
    }
  }
  return y;
}

void expect_exact(TensorType type, int64_t rows, int64_t row_len, int64_t n_tokens,
                  int64_t row_step, int64_t token_step, uint32_t seed) {
  const auto w = random_weights(type, rows, row_len, seed);
  const auto xq = encode(TensorType::Q8_0, random_floats(row_len * n_tokens, seed + 1, 3.0f));
  const auto expected = reference(type, w, rows, row_len, xq, n_tokens);
  const auto y = run_vnni(type, w, rows, row_len, xq, n_tokens, row_step, token_step);
  int mismatches = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] != expected[i] && ++mismatches <= 3) {
      ADD_FAILURE() << quant::type_name(type) << " rows=" << rows << " K=" << row_len
                    << " tokens=" << n_tokens << " at t=" << i / rows << " r=" << i % rows << ": "
                    << y[i] << " vs " << expected[i];
    }
  }
}

TEST(cpu_MatmulGemmVnni, TypesCovered) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "the VNNI GEMM exists on x86-64 only";
#endif
  for (TensorType t : kTypes) EXPECT_TRUE(vnni_gemm_type(t)) << quant::type_name(t);
  EXPECT_TRUE(vnni_gemm_type(TensorType::Q4_K));
  EXPECT_TRUE(vnni_gemm_type(TensorType::Q5_K));
  EXPECT_TRUE(vnni_gemm_type(TensorType::Q6_K));
  EXPECT_FALSE(vnni_gemm_type(TensorType::Q4_1));
  EXPECT_FALSE(vnni_gemm_type(TensorType::Q3_K));
  EXPECT_FALSE(vnni_gemm_type(TensorType::F32));
}

TEST(cpu_MatmulGemmVnni, ExactBlockSumsOnTileEdges) {
  SKIP_WITHOUT_VNNI();
  uint32_t seed = 1;
  for (TensorType type : kTypes) {
    for (int64_t rows : {1, 15, 16, 17, 33}) {
      for (int64_t n_tokens : {1, 2, 7, 8, 9, 17}) {
        expect_exact(type, rows, 3 * 32, n_tokens, 64, 64, seed += 2);
      }
    }
  }
}

TEST(cpu_MatmulGemmVnni, ExactOnModelRowLengthsAndSplitRanges) {
  SKIP_WITHOUT_VNNI();
  uint32_t seed = 500;
  for (TensorType type : kTypes) {
    for (int64_t row_len : {896, 4864, 3584}) {
      // Ranges that start off the 16-row grid and cut token tiles.
      expect_exact(type, 37, row_len, 21, 13, 5, seed += 2);
    }
  }
}

// The fused f32 -> prepared conversion equals quantize_row + prepare byte for
// byte: random rows at several scales, exact .5 ties (block 0: amax 127 makes
// d = 1), an all-zero block, and non-finite values refused.
TEST(cpu_MatmulGemmVnni, FusedQuantizeEqualsReferenceBitForBit) {
  SKIP_WITHOUT_VNNI();
  const int64_t row_len = 4864;
  const size_t x_bytes = vnni_x_row_bytes(row_len);
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    auto x = random_floats(row_len, seed, seed % 3 == 0 ? 1e-3f : (seed % 3 == 1 ? 1.0f : 400.0f));
    x[0] = 127.0f;
    for (int e = 1; e < 32; ++e)
      x[static_cast<size_t>(e)] = (e % 2 == 0 ? -1.0f : 1.0f) * (float(e) + 0.5f);
    for (int e = 32; e < 64; ++e) x[static_cast<size_t>(e)] = 0.0f;
    const auto q8 = encode(TensorType::Q8_0, x);
    for (TensorType type : kTypes) {
      std::vector<uint8_t> expected(x_bytes), got(x_bytes, 0xAB);
      vnni_prepare_x(type, q8.data(), row_len, expected.data());
      ASSERT_TRUE(vnni_quantize_x(type, x.data(), row_len, got.data()));
      EXPECT_EQ(got, expected) << quant::type_name(type) << " seed=" << seed;
    }
  }
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> out(vnni_x_row_bytes(64));
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    x[40] = bad;
    EXPECT_FALSE(vnni_quantize_x(TensorType::Q4_0, x.data(), 64, out.data())) << bad;
  }
}

// ---- K-quants against Q8_K rows.

std::vector<uint8_t> random_kquant_weights(TensorType type, int64_t rows, int64_t row_len,
                                           uint32_t seed) {
  const size_t block = quant::type_traits(type).type_size;
  std::vector<uint8_t> w(static_cast<size_t>(rows * row_len / quant::kQK_K) * block);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1e-4f, 1e-2f);
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  for (size_t b = 0; b < w.size(); b += block) {
    const uint16_t d = quant::f32_to_f16(scale(rng)), dmin = quant::f32_to_f16(scale(rng));
    if (type == TensorType::Q4_K || type == TensorType::Q5_K) {  // same header
      std::memcpy(&w[b + offsetof(quant::BlockQ4_K, d)], &d, 2);
      std::memcpy(&w[b + offsetof(quant::BlockQ4_K, dmin)], &dmin, 2);
    } else {
      std::memcpy(&w[b + offsetof(quant::BlockQ6_K, d)], &d, 2);
    }
  }
  return w;
}

// One super-block's exact integer terms, as the kernel forms them: `sum` the
// scaled quant sums, `off` the bsums term (Q4_K, Q5_K: sum(min * bsum32);
// Q6_K: folded into sum as -32 * sum(sc * bsum16)).
void kquant_terms(TensorType type, const uint8_t* pw, const quant::BlockQ8_K& x, int64_t* sum,
                  int64_t* off, float* d, float* dmin) {
  *sum = 0;
  *off = 0;
  if (type == TensorType::Q4_K || type == TensorType::Q5_K) {
    const bool q5 = type == TensorType::Q5_K;
    // The two share d, dmin and scales; Q5_K then has qh[32] before its qs.
    quant::BlockQ4_K b;
    std::memcpy(&b, pw, sizeof(b));
    const uint8_t* qh = pw + offsetof(quant::BlockQ5_K, qh);
    const uint8_t* qs = pw + (q5 ? offsetof(quant::BlockQ5_K, qs) : offsetof(quant::BlockQ4_K, qs));
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      if (j < 4) {
        sc = b.scales[j] & 63;
        m = b.scales[j + 4] & 63;
      } else {
        sc = (b.scales[j + 4] & 0x0f) | ((b.scales[j - 4] >> 6) << 4);
        m = (b.scales[j + 4] >> 4) | ((b.scales[j] >> 6) << 4);
      }
      int s = 0;
      for (int e = 0; e < 32; ++e) {
        const uint8_t q = qs[32 * (j / 2) + e];
        const int fifth = q5 ? ((qh[e] >> j) & 1) << 4 : 0;
        s += ((j % 2 == 0 ? q & 15 : q >> 4) | fifth) * x.qs[32 * j + e];
      }
      *sum += int64_t{sc} * s;
      *off += int64_t{m} * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
    }
    *d = quant::f16_to_f32(b.d);
    *dmin = quant::f16_to_f32(b.dmin);
  } else {
    quant::BlockQ6_K b;
    std::memcpy(&b, pw, sizeof(b));
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, r = e % 128;
      const int lo = (b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
      const int hi = (b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      *sum += int64_t{b.scales[e / 16]} * ((lo | (hi << 4)) - 32) * x.qs[e];
    }
    *d = quant::f16_to_f32(b.d);
    *dmin = 0.0f;
  }
}

void expect_kquant_exact(TensorType type, int64_t rows, int64_t row_len, int64_t n_tokens,
                         int64_t row_step, int64_t token_step, uint32_t seed) {
  const auto w = random_kquant_weights(type, rows, row_len, seed);
  const auto xq = encode(TensorType::Q8_K, random_floats(row_len * n_tokens, seed + 1, 3.0f));
  const size_t wb = quant::type_traits(type).type_size;
  const int64_t nsb = row_len / quant::kQK_K;
  std::vector<float> y(static_cast<size_t>(rows * n_tokens), NAN);
  const size_t x_bytes = *quant::row_bytes(TensorType::Q8_K, row_len);
  const GemmProblem p{
      w.data(), *quant::row_bytes(type, row_len), xq.data(), x_bytes, row_len, y.data(), rows};
  for (int64_t r = 0; r < rows; r += row_step) {
    for (int64_t t = 0; t < n_tokens; t += token_step) {
      vnni_gemm(type, p, r, std::min(rows, r + row_step), t, std::min(n_tokens, t + token_step));
    }
  }
  int mismatches = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nsb; ++b) {
        quant::BlockQ8_K x;
        std::memcpy(&x, xq.data() + t * x_bytes + b * sizeof(x), sizeof(x));
        int64_t sum, off;
        float d, dmin;
        kquant_terms(type, w.data() + static_cast<size_t>(r * nsb + b) * wb, x, &sum, &off, &d,
                     &dmin);
        acc = std::fma(d * x.d, static_cast<float>(sum), acc);
        if (type != TensorType::Q6_K) acc = std::fma(-(dmin * x.d), static_cast<float>(off), acc);
      }
      const float got = y[static_cast<size_t>(t * rows + r)];
      if (got != acc && ++mismatches <= 3) {
        ADD_FAILURE() << quant::type_name(type) << " rows=" << rows << " K=" << row_len
                      << " tokens=" << n_tokens << " at t=" << t << " r=" << r << ": " << got
                      << " vs " << acc;
      }
    }
  }
}

TEST(cpu_MatmulGemmVnni, KQuantsExactOnEdgesAndModelRowLengths) {
  SKIP_WITHOUT_VNNI();
  uint32_t seed = 700;
  for (TensorType type : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    for (int64_t rows : {1, 16, 17, 33}) {
      for (int64_t n_tokens : {1, 3, 4, 5, 9}) {
        expect_kquant_exact(type, rows, 2 * 256, n_tokens, 64, 64, seed += 2);
      }
    }
    for (int64_t row_len : {896, 4864, 3584}) {
      if (row_len % 256 != 0) continue;
      expect_kquant_exact(type, 37, row_len, 11, 13, 5, seed += 2);
    }
  }
}

// Through matmul(): activation conversion, tasks and threads, against the
// scalar dot kernels (which round differently: d_w and d_x are applied one
// after the other there).
TEST(cpu_MatmulGemmVnni, MatmulMatchesScalarKernels) {
  SKIP_WITHOUT_VNNI();
  uint32_t seed = 900;
  for (TensorType type : kTypes) {
    for (int64_t n_tokens : {2, 9, 300}) {
      const int64_t rows = 45, row_len = 896;
      const auto w = encode(type, random_floats(rows * row_len, seed += 2));
      const auto x = random_floats(row_len * n_tokens, seed + 1);
      std::vector<uint8_t> scratch;
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        std::vector<float> y(static_cast<size_t>(rows * n_tokens), NAN);
        std::vector<float> ref(y.size(), NAN);
        const MatmulWeight mw{type, rows, row_len, w.data(), 0};
        ASSERT_TRUE(matmul(mw, x.data(), n_tokens, y.data(), pool, scratch, Isa::kAvx2).is_ok());
        ASSERT_TRUE(
            matmul(mw, x.data(), n_tokens, ref.data(), pool, scratch, Isa::kScalar).is_ok());
        double sq = 0, worst = 0;
        for (float e : ref) sq += double(e) * e;
        const double rms = std::sqrt(sq / double(ref.size()));
        for (size_t i = 0; i < y.size(); ++i) {
          worst = std::max(worst, std::abs(double(y[i]) - ref[i]) / rms);
        }
        EXPECT_LT(worst, 2e-6) << quant::type_name(type) << " tokens=" << n_tokens
                               << " threads=" << threads;
      }
    }
  }
}

}  // namespace
}  // namespace minfer::cpu
