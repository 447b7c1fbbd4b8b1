// The Vulkan elementwise and RMS-norm kernels against plain host loops in
// double, at real widths (896 and 3584) and odd row counts, out of place and
// in place. Tolerance: max abs diff < 1e-3 (f32 arithmetic, unit-scale data).
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/shader/encoders.h"
#include "backend/shader/recorder.h"
#include "backend/vulkan_testutil.h"

namespace minfer::vulkan::testing {
namespace {

using cpu::testing::random_floats;
using shader::ElementwiseOp;

std::vector<double> elementwise_reference(ElementwiseOp op, const std::vector<float>& a,
                                          const std::vector<float>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i % b.size()];
    out[i] = op == ElementwiseOp::kAdd ? x + y : x * y;
  }
  return out;
}

TEST(VulkanOps, AddAndMulMatchTheHostWithAndWithoutBroadcast) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  struct Case {
    int64_t rows, dim, b_len;
  };
  for (ElementwiseOp op : {ElementwiseOp::kAdd, ElementwiseOp::kMul}) {
    for (const Case& c : {Case{5, 896, 896 * 5}, Case{7, 3584, 3584}, Case{1, 1001, 1001}}) {
      const auto a = random_floats(c.rows * c.dim, 1);
      const auto b = random_floats(c.b_len, 2);
      auto ga = upload_floats(d, a), gb = upload_floats(d, b);
      auto out = zeros(d, a.size() * 4);
      shader::Recorder rec(d);
      ASSERT_TRUE(shader::encode_elementwise(rec, op, whole(ga), whole(gb), whole(out),
                                             c.rows * c.dim, c.b_len)
                      .is_ok());
      const Status s = rec.submit_and_wait();
      ASSERT_TRUE(s.is_ok()) << s.message();
      EXPECT_LT(max_abs_diff(download_floats(d, *out, a.size()), elementwise_reference(op, a, b)),
                1e-6)
          << "rows " << c.rows << " dim " << c.dim;
    }
  }
}

TEST(VulkanOps, AddInPlaceOverwritesItsInput) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  const auto a = random_floats(896 * 3, 3), b = random_floats(896, 4);
  auto ga = upload_floats(d, a), gb = upload_floats(d, b);
  shader::Recorder rec(d);
  ASSERT_TRUE(shader::encode_elementwise(rec, ElementwiseOp::kAdd, whole(ga), whole(gb), whole(ga),
                                         896 * 3, 896)
                  .is_ok());
  ASSERT_TRUE(rec.submit_and_wait().is_ok());
  EXPECT_LT(max_abs_diff(download_floats(d, *ga, a.size()),
                         elementwise_reference(ElementwiseOp::kAdd, a, b)),
            1e-6);
}

std::vector<double> rms_norm_reference(const std::vector<float>& x, const std::vector<float>* w,
                                       int64_t rows, int64_t dim, float eps) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double scale = 1.0 / std::sqrt(ss / double(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      out[r * dim + i] = x[r * dim + i] * scale * (w != nullptr ? (*w)[i] : 1.0);
    }
  }
  return out;
}

TEST(VulkanOps, RmsNormMatchesTheHostPerRow) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  struct Case {
    int64_t rows, dim;
  };
  for (const Case& c : {Case{1, 896}, Case{5, 896}, Case{3, 3584}, Case{9, 128}, Case{2, 77}}) {
    for (bool with_weight : {false, true}) {
      const auto x = random_floats(c.rows * c.dim, 5, 3.0f);
      const auto w = random_floats(c.dim, 6);
      auto gx = upload_floats(d, x), gw = upload_floats(d, w);
      auto gy = zeros(d, x.size() * 4);
      shader::Recorder rec(d);
      const shader::BufferRange wr = with_weight ? whole(gw) : shader::BufferRange{};
      ASSERT_TRUE(
          shader::encode_rms_norm(rec, whole(gx), wr, whole(gy), c.rows, c.dim, 1e-6f).is_ok());
      ASSERT_TRUE(rec.submit_and_wait().is_ok());
      const auto want = rms_norm_reference(x, with_weight ? &w : nullptr, c.rows, c.dim, 1e-6f);
      EXPECT_LT(max_abs_diff(download_floats(d, *gy, x.size()), want), 1e-3)
          << "rows " << c.rows << " dim " << c.dim << " weight " << with_weight;
    }
  }
}

TEST(VulkanOps, RmsNormInPlaceThenAddInOneSubmission) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  const int64_t rows = 5, dim = 896;
  const auto x = random_floats(rows * dim, 7), w = random_floats(dim, 8),
             r = random_floats(rows * dim, 9);
  auto gx = upload_floats(d, x), gw = upload_floats(d, w), gr = upload_floats(d, r);
  shader::Recorder rec(d);
  // x = norm(x) * w, then x = x + r: the add reads what the norm wrote.
  ASSERT_TRUE(
      shader::encode_rms_norm(rec, whole(gx), whole(gw), whole(gx), rows, dim, 1e-5f).is_ok());
  ASSERT_TRUE(shader::encode_elementwise(rec, ElementwiseOp::kAdd, whole(gx), whole(gr), whole(gx),
                                         rows * dim, rows * dim)
                  .is_ok());
  EXPECT_EQ(rec.pending(), 2u);
  EXPECT_EQ(rec.barriers(), 1u);
  ASSERT_TRUE(rec.submit_and_wait().is_ok());
  auto want = rms_norm_reference(x, &w, rows, dim, 1e-5f);
  for (size_t i = 0; i < want.size(); ++i) want[i] += r[i];
  EXPECT_LT(max_abs_diff(download_floats(d, *gx, x.size()), want), 1e-3);
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
