// The CUDA weight upload (weights.cu): every tensor's bytes arrive intact
// whatever its size and place, through the pinned double-buffered staging
// (tensors packed several to a chunk, one tensor spanning several chunks, the
// two staging buffers each reused) or the pageable fallback. Read back
// through GetRows of F32 tensors, which copies rows exactly (scale 1).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda_testutil.h"

namespace minfer::cuda::testing {
namespace {

constexpr int64_t kRowLen = 32;  // 128-byte rows: odd row counts leave padding after a tensor

// Integer-valued floats (exact in f32) that differ between tensors and rows.
std::vector<float> pattern(int64_t n, uint32_t tensor) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[static_cast<size_t>(i)] =
        static_cast<float>((static_cast<uint64_t>(i) * 2654435761u + tensor * 7919u) % 1000003u);
  }
  return v;
}

// Rows 0..rows-1 of F32 tensor `name` as the device holds them.
Result<std::vector<float>> device_rows(backend::Backend& b, const std::string& name, int64_t rows,
                                       int64_t row_len) {
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) ids[static_cast<size_t>(r)] = static_cast<int32_t>(r);
  Node n;
  n.op = Op::kGetRows;
  n.shape.ne = {row_len, rows};
  n.name = "test.read." + name;
  n.meta = graph::GetRowsMeta{name, {}, 1.0f};
  return run_node(b, n, {bytes_of(ids)});
}

TEST(cuda_Weights, UploadKeepsEveryTensorsBytes) {
  MINFER_SKIP_WITHOUT_CUDA();
  struct Spec {
    std::string name;
    int64_t rows;
    int64_t row_len;
  };
  // Small tensors of odd sizes around one of 160 MiB: more than two 64 MiB
  // staging chunks, so both buffers are refilled after their first copy.
  std::vector<Spec> specs;
  for (int i = 0; i < 40; ++i) specs.push_back({"small." + std::to_string(i), 1 + 2 * i, kRowLen});
  specs.push_back({"big", 10240, 4096});
  for (int i = 0; i < 9; ++i) specs.push_back({"tail." + std::to_string(i), 3 + 6 * i, kRowLen});
  model::Weights weights;
  std::vector<std::vector<float>> values;
  for (size_t t = 0; t < specs.size(); ++t) {
    values.push_back(pattern(specs[t].rows * specs[t].row_len, static_cast<uint32_t>(t)));
    add_weight(weights, specs[t].name, TensorType::F32, specs[t].rows, specs[t].row_len,
               values.back());
  }
  auto gpu = create_backend(weights, env_options());
  ASSERT_TRUE(gpu.is_ok()) << gpu.message();
  for (size_t t = 0; t < specs.size(); ++t) {
    auto got = device_rows(**gpu, specs[t].name, specs[t].rows, specs[t].row_len);
    ASSERT_TRUE(got.is_ok()) << got.message();
    ASSERT_EQ(got->size(), values[t].size()) << specs[t].name;
    EXPECT_EQ(std::memcmp(got->data(), values[t].data(), values[t].size() * sizeof(float)), 0)
        << specs[t].name;
  }
}

TEST(cuda_Weights, UploadOfATableSmallerThanOneChunk) {
  MINFER_SKIP_WITHOUT_CUDA();
  // Smaller than one staging chunk: two half-size buffers, one tensor across them.
  model::Weights weights;
  const std::vector<float> a = pattern(3 * kRowLen, 1);
  const std::vector<float> b = pattern(1001 * kRowLen, 2);
  add_weight(weights, "a", TensorType::F32, 3, kRowLen, a);
  add_weight(weights, "b", TensorType::F32, 1001, kRowLen, b);
  auto gpu = create_backend(weights, env_options());
  ASSERT_TRUE(gpu.is_ok()) << gpu.message();
  auto got_a = device_rows(**gpu, "a", 3, kRowLen);
  auto got_b = device_rows(**gpu, "b", 1001, kRowLen);
  ASSERT_TRUE(got_a.is_ok()) << got_a.message();
  ASSERT_TRUE(got_b.is_ok()) << got_b.message();
  EXPECT_EQ(*got_a, a);
  EXPECT_EQ(*got_b, b);
}

}  // namespace
}  // namespace minfer::cuda::testing
