// ArgMax (the engine's greedy rows computed where the logits are) on the CPU
// and, when a device is there, the GPU: each row's first largest element,
// NaN never chosen, -1 for a row of -inf and NaN only; the choice the host
// greedy sampler makes (runtime/sampler.h), checked here against a plain
// scan written for the test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cuda_testutil.h"

namespace minfer::cuda::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::nanf("");

// Rows of `width` exercising each rule, and the expected index of each.
struct Case {
  std::vector<float> x;
  std::vector<int32_t> want;
};

Case make_case(int64_t width) {
  Case c;
  auto row = [&](std::vector<float> r, int32_t want) {
    c.x.insert(c.x.end(), r.begin(), r.end());
    c.want.push_back(want);
  };
  const auto w = static_cast<size_t>(width);
  std::vector<float> r = cpu::testing::random_floats(width, 81);
  const auto top = static_cast<int32_t>(std::max_element(r.begin(), r.end()) - r.begin());
  row(r, top);  // a unique maximum
  r.assign(w, 1.0f);
  r[w / 3] = r[w - 1] = 5.0f;  // ties: the first
  row(r, static_cast<int32_t>(w / 3));
  r.assign(w, -2.0f);
  r[0] = kNaN;
  r[w / 2] = kNaN;
  r[w - 2] = -1.0f;  // NaN never wins
  row(r, static_cast<int32_t>(w - 2));
  row(std::vector<float>(w, -kInf), -1);  // nothing to choose
  row(std::vector<float>(w, kNaN), -1);
  r.assign(w, 3.0f);
  r[w / 4] = r[w / 2] = kInf;  // the first +inf
  row(r, static_cast<int32_t>(w / 4));
  r.assign(w, -kInf);
  r[w - 1] = -1e30f;  // the only finite one, last
  row(r, static_cast<int32_t>(w - 1));
  return c;
}

void check(backend::Backend& b, int64_t width) {
  const Case c = make_case(width);
  const auto rows = static_cast<int64_t>(c.want.size());
  graph::Node n = make_node(graph::Op::kArgMax, 1, rows, graph::ArgMaxMeta{width});
  n.dtype = graph::DType::kI32;
  n.inputs = {0};
  ASSERT_TRUE(b.supports_op(n)) << b.name();
  auto got = run_node(b, n, {bytes_of(c.x)});
  ASSERT_TRUE(got.is_ok()) << got.message();
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  std::memcpy(ids.data(), got->data(), ids.size() * sizeof(int32_t));
  EXPECT_EQ(ids, c.want) << b.name() << ", width " << width;
}

TEST(ArgMax, FirstLargestNeverNaNOnTheCpu) {
  model::Weights none;
  cpu::CpuBackend cpu(none, 1);
  for (int64_t width : {int64_t{37}, int64_t{151936}}) check(cpu, width);
}

TEST(cuda_ArgMax, FirstLargestNeverNaNOnTheGpu) {
  MINFER_SKIP_WITHOUT_CUDA();
  model::Weights none;
  auto gpu = create_backend(none, env_options());
  ASSERT_TRUE(gpu.is_ok()) << gpu.message();
  for (int64_t width : {int64_t{37}, int64_t{151936}, int64_t{262144}}) check(**gpu, width);
}

}  // namespace
}  // namespace minfer::cuda::testing
