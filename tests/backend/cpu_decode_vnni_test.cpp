// The single-token AVX-512 VNNI GEMV for Q4_K and Q6_K (matmul_gemv_vnni.h)
// against the dequantized double-precision dot of each row with the Q8_K
// activations, within the integer kernels' tolerance of vec_dot_test.cpp
// (1e-5 of sum |w x|). Weights are random bytes with random positive f16
// scales, so every quant, scale and minimum pattern occurs (Q6_K scales of
// -128 included). Shapes: Qwen2.5-7B's (3584 -> 18944, 18944 -> 3584,
// 3584 -> 152064) and row counts that cut the 4-row passes and 64-row tasks.
// Skipped where the CPU lacks AVX-512 VNNI (or MINFER_CPU_NO_AVX512 is set).
#include "backend/cpu/matmul_gemv_vnni.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_gemm_vnni.h"
#include "quant/blocks.h"
#include "quant/half.h"

namespace minfer::cpu {
namespace {

using quant::TensorType;
using testing::decode;
using testing::encode;
using testing::random_floats;

#define SKIP_WITHOUT_VNNI() \
  if (!vnni_gemm_available()) GTEST_SKIP() << "CPU lacks AVX-512 VNNI (or MINFER_CPU_NO_AVX512)"

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// `rows` rows of random super-blocks, `stride` bytes apart; the f16 scales
// (Q4_K d and dmin, Q6_K d) are random in [1e-3, 0.1).
std::vector<uint8_t> random_weights(TensorType type, int64_t rows, int64_t row_len, size_t stride,
                                    uint64_t seed) {
  const size_t block = quant::type_traits(type).type_size;
  const int64_t nsb = row_len / quant::kQK_K;
  std::vector<uint8_t> w(static_cast<size_t>(rows) * stride);
  for (size_t i = 0; i + 8 <= w.size(); i += 8) {
    const uint64_t v = splitmix(seed);
    std::memcpy(&w[i], &v, 8);
  }
  auto scale = [&] {
    const double u = static_cast<double>(splitmix(seed) >> 11) * 0x1.0p-53;
    return quant::f32_to_f16(static_cast<float>(1e-3 + u * (0.1 - 1e-3)));
  };
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nsb; ++b) {
      uint8_t* pb = &w[static_cast<size_t>(r) * stride + static_cast<size_t>(b) * block];
      const uint16_t d = scale();
      if (type == TensorType::Q6_K) {
        std::memcpy(pb + offsetof(quant::BlockQ6_K, d), &d, 2);
      } else {
        const uint16_t dmin = scale();
        std::memcpy(pb, &d, 2);
        std::memcpy(pb + 2, &dmin, 2);
      }
    }
  }
  return w;
}

// y through matmul() (one token, 2 threads) against the reference per row.
void check(TensorType type, int64_t rows, int64_t row_len, size_t pad = 0) {
  SCOPED_TRACE(std::string(quant::type_name(type)) + " [" + std::to_string(rows) + " x " +
               std::to_string(row_len) + "] pad " + std::to_string(pad));
  const size_t row_bytes = *quant::row_bytes(type, row_len);
  const size_t stride = row_bytes + pad;
  const auto w = random_weights(type, rows, row_len, stride, 1000 + rows + row_len);
  const auto x = random_floats(row_len, static_cast<uint32_t>(rows + row_len), 2.0f);
  const auto xf = decode(TensorType::Q8_K, encode(TensorType::Q8_K, x).data(), row_len);
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  std::vector<float> y(static_cast<size_t>(rows), NAN);
  const MatmulWeight mw{type, rows, row_len, w.data(), pad == 0 ? 0 : stride};
  ASSERT_TRUE(matmul(mw, x.data(), 1, y.data(), pool, scratch).is_ok());
  int bad = 0;
  for (int64_t r = 0; r < rows && bad < 5; ++r) {
    const auto wf = decode(type, w.data() + static_cast<size_t>(r) * stride, row_len);
    double exact = 0.0, mag = 0.0;
    for (int64_t i = 0; i < row_len; ++i) {
      exact += static_cast<double>(wf[i]) * xf[i];
      mag += std::fabs(static_cast<double>(wf[i]) * xf[i]);
    }
    const double tol = 1e-5 * mag + 1e-30;
    if (!(std::fabs(y[r] - exact) <= tol)) {
      ++bad;
      ADD_FAILURE() << "row " << r << ": " << y[r] << " vs " << exact << " (tol " << tol << ")";
    }
  }
}

TEST(CpuDecodeVnni, SmallAndOddRowCounts) {
  SKIP_WITHOUT_VNNI();
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K}) {
    for (int64_t rows : {1, 2, 3, 4, 5, 7, 17, 37, 63, 64, 65, 131}) {
      for (int64_t row_len : {256, 768, 3584}) check(type, rows, row_len);
    }
  }
}

TEST(CpuDecodeVnni, HonoursRowStride) {
  SKIP_WITHOUT_VNNI();
  check(TensorType::Q4_K, 37, 512, 48);
  check(TensorType::Q6_K, 37, 512, 7);
}

TEST(CpuDecodeVnni, Qwen7BShapes) {
  SKIP_WITHOUT_VNNI();
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K}) {
    check(type, 18944, 3584);
    check(type, 3584, 18944);
  }
  check(TensorType::Q6_K, 152064, 3584);  // the output matrix of Q4_K_M
}

// The kernel writes exactly its row range.
TEST(CpuDecodeVnni, WritesOnlyItsRows) {
  SKIP_WITHOUT_VNNI();
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K}) {
    const int64_t rows = 23, row_len = 512;
    const size_t stride = *quant::row_bytes(type, row_len);
    const auto w = random_weights(type, rows, row_len, stride, 9);
    const auto q8 = encode(TensorType::Q8_K, random_floats(row_len, 10));
    std::vector<uint8_t> xp(vnni_gemv_x_bytes(row_len));
    vnni_gemv_prepare_x(type, q8.data(), row_len, xp.data());
    std::vector<float> y(rows, -7.0f);
    const GemmProblem gp{w.data(), stride, xp.data(), 0, row_len, y.data(), rows};
    vnni_gemv(type, gp, 5, 14);
    for (int64_t r = 0; r < rows; ++r) {
      if (r < 5 || r >= 14)
        EXPECT_EQ(y[r], -7.0f) << "row " << r;
      else
        EXPECT_NE(y[r], -7.0f) << "row " << r;
    }
  }
}

// Batch-invariant matmuls keep the tiled kernels: one token equals the
// first token of a two-token batch bit for bit.
TEST(CpuDecodeVnni, BatchInvariantModeKeepsTheTiles) {
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K}) {
    const int64_t rows = 37, row_len = 768;
    const auto w = encode(type, random_floats(rows * row_len, 3));
    const auto x = random_floats(2 * row_len, 4);
    ThreadPool pool(2);
    std::vector<uint8_t> scratch;
    std::vector<float> one(rows), two(2 * rows);
    const MatmulWeight mw{type, rows, row_len, w.data(), 0};
    ASSERT_TRUE(matmul(mw, x.data(), 1, one.data(), pool, scratch, MatmulMode{true}).is_ok());
    ASSERT_TRUE(matmul(mw, x.data(), 2, two.data(), pool, scratch, MatmulMode{true}).is_ok());
    EXPECT_EQ(one, std::vector<float>(two.begin(), two.begin() + rows));
  }
}

}  // namespace
}  // namespace minfer::cpu
