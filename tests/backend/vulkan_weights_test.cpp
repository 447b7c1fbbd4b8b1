// The weights registry (backend/shader/weights.h) on the Vulkan device: upload
// and read back bit-exact (packed into one chunk, and spread over small
// chunks), aligned offsets, lookup errors naming the tensor, the progress
// callback (strictly increasing, ending at the total), duplicate
// registration, the bytes-vs-shape check and the all-weights gate. A tensor
// past maxStorageBufferRange uses a host-memory fake device with a small range.
#ifdef MINFER_HAS_VULKAN

#include "backend/shader/weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "backend/vulkan_fake_device.h"
#include "backend/vulkan_testutil.h"

namespace minfer::vulkan::testing {
namespace {

using quant::TensorType;
using shader::HostTensor;
using shader::WeightsRegistry;

struct OwnedTensor {
  std::string name;
  TensorType type;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;

  HostTensor view() const { return {name, type, shape, bytes}; }
};

OwnedTensor random_tensor(std::string name, TensorType type, std::vector<int64_t> shape,
                          uint32_t seed) {
  auto row = quant::row_bytes(type, shape[0]);
  EXPECT_TRUE(row.is_ok()) << row.message();
  uint64_t bytes = row.is_ok() ? *row : 0;
  for (size_t i = 1; i < shape.size(); ++i) bytes *= uint64_t(shape[i]);
  std::vector<std::byte> v(bytes);
  std::mt19937 rng(seed);
  for (std::byte& b : v) b = std::byte(rng() & 0xff);
  return {std::move(name), type, std::move(shape), std::move(v)};
}

std::vector<OwnedTensor> small_model() {
  std::vector<OwnedTensor> t;
  t.push_back(random_tensor("token_embd.weight", TensorType::Q8_0, {896, 67}, 1));
  t.push_back(random_tensor("blk.0.attn_norm.weight", TensorType::F32, {896}, 2));
  t.push_back(random_tensor("blk.0.attn_q.weight", TensorType::Q4_0, {896, 33}, 3));
  t.push_back(random_tensor("blk.0.ffn_up.weight", TensorType::F16, {77, 5}, 4));
  t.push_back(random_tensor("output_norm.weight", TensorType::F32, {3}, 5));
  return t;
}

void expect_on_device(shader::Device& d, const WeightsRegistry& reg, const OwnedTensor& t) {
  auto w = reg.lookup(t.name);
  ASSERT_TRUE(w.is_ok()) << w.message();
  const shader::DeviceWeight& dw = **w;
  EXPECT_EQ(dw.bytes, t.bytes.size()) << t.name;
  EXPECT_EQ(dw.type, t.type) << t.name;
  EXPECT_EQ(dw.shape, t.shape) << t.name;
  EXPECT_EQ(dw.offset % reg.alignment(), 0u) << t.name;
  std::vector<std::byte> back(dw.bytes);
  ASSERT_TRUE(d.read_buffer(*dw.buffer, dw.offset, back).is_ok());
  EXPECT_TRUE(back == t.bytes) << t.name << " differs after the round trip";
}

TEST(VulkanWeights, UploadedTensorsReadBackBitExactFromOneChunk) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  WeightsRegistry reg(d);
  const auto model = small_model();
  uint64_t total = 0;
  for (const OwnedTensor& t : model) {
    ASSERT_TRUE(reg.upload(t.view()).is_ok()) << t.name;
    total += t.bytes.size();
  }
  EXPECT_EQ(reg.registered_bytes(), total);
  EXPECT_EQ(reg.size(), model.size());
  EXPECT_EQ(reg.alignment() % device().info().limits.min_storage_buffer_offset_alignment, 0u);
  for (const OwnedTensor& t : model) expect_on_device(d, reg, t);
  EXPECT_EQ((*reg.lookup(model[0].name))->buffer, (*reg.lookup(model[4].name))->buffer)
      << "small tensors are packed into one chunk";
  EXPECT_EQ(reg.device_bytes(), std::min(WeightsRegistry::kDefaultChunkBytes,
                                         d.info().limits.max_storage_buffer_range));
}

TEST(VulkanWeights, SmallChunksSpreadTensorsAndABigOneGetsItsOwn) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  WeightsRegistry reg(d, 64 << 10);
  auto model = small_model();
  model.push_back(
      random_tensor("blk.1.ffn_down.weight", TensorType::F32, {4096, 40}, 6));  // 640 KiB
  ASSERT_TRUE(
      reg.upload_all(std::vector<HostTensor>{model[0].view(), model[1].view(), model[2].view(),
                                             model[3].view(), model[4].view(), model[5].view()})
          .is_ok());
  for (const OwnedTensor& t : model) expect_on_device(d, reg, t);
  EXPECT_GE((*reg.lookup("blk.1.ffn_down.weight"))->buffer->size(), model[5].bytes.size());
}

TEST(VulkanWeights, LookupErrorsNameTheTensor) {
  MINFER_SKIP_WITHOUT_VULKAN();
  WeightsRegistry reg(device());
  const auto model = small_model();
  ASSERT_TRUE(reg.upload(model[1].view()).is_ok());
  EXPECT_TRUE(reg.contains("blk.0.attn_norm.weight"));
  EXPECT_FALSE(reg.contains("blk.9.ffn_gate.weight"));
  auto r = reg.lookup("blk.9.ffn_gate.weight");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.message().find("'blk.9.ffn_gate.weight'"), std::string::npos) << r.message();
}

TEST(VulkanWeights, ProgressIsStrictlyIncreasingAndEndsAtTheTotal) {
  MINFER_SKIP_WITHOUT_VULKAN();
  WeightsRegistry reg(device());
  std::vector<OwnedTensor> big;
  big.push_back(random_tensor("a", TensorType::F32, {1024, 5 * 1024}, 7));  // 20 MiB
  big.push_back(random_tensor("b", TensorType::F32, {256}, 8));
  big.push_back(random_tensor("c", TensorType::Q8_0, {4096, 2000}, 9));  // ~8.3 MiB
  std::vector<HostTensor> views;
  uint64_t total = 0;
  for (const OwnedTensor& t : big) {
    views.push_back(t.view());
    total += t.bytes.size();
  }
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  ASSERT_TRUE(reg.upload_all(views,
                             [&](uint64_t done, uint64_t all) {
                               calls.push_back({done, all});
                             })
                  .is_ok());
  ASSERT_GE(calls.size(), 4u) << "a 20 MiB tensor reports in pieces";
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, total);
    if (i > 0) EXPECT_GT(calls[i].first, calls[i - 1].first);
  }
  EXPECT_EQ(calls.back().first, total);
  for (const OwnedTensor& t : big) expect_on_device(device(), reg, t);
}

TEST(VulkanWeights, ASecondRegistrationIsAnErrorUnlessItIsTheSameBytes) {
  MINFER_SKIP_WITHOUT_VULKAN();
  WeightsRegistry reg(device());
  const auto model = small_model();
  ASSERT_TRUE(reg.upload(model[0].view()).is_ok());
  const uint64_t bytes = reg.registered_bytes();
  int calls = 0;
  EXPECT_TRUE(reg.upload(model[0].view(), [&](uint64_t, uint64_t) { ++calls; }).is_ok());
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(reg.registered_bytes(), bytes);
  const OwnedTensor copy = model[0];  // same name and contents, other host bytes
  const Status s = reg.upload(copy.view());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'token_embd.weight'"), std::string::npos) << s.message();
  EXPECT_EQ(reg.registered_bytes(), bytes);
}

TEST(VulkanWeights, BytesThatDisagreeWithTheShapeAreRefused) {
  MINFER_SKIP_WITHOUT_VULKAN();
  WeightsRegistry reg(device());
  OwnedTensor t = random_tensor("blk.0.attn_k.weight", TensorType::Q4_0, {896, 2}, 10);
  t.bytes.pop_back();
  const Status s = reg.upload(t.view());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'blk.0.attn_k.weight'"), std::string::npos) << s.message();
  t = random_tensor("blk.0.attn_v.weight", TensorType::Q4_0, {896, 2}, 10);
  t.shape[0] = 900;  // not whole blocks
  EXPECT_EQ(reg.upload(t.view()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.size(), 0u);
}

TEST(VulkanWeights, AllRegisteredNamesWhatIsMissing) {
  MINFER_SKIP_WITHOUT_VULKAN();
  WeightsRegistry reg(device());
  const auto model = small_model();
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(reg.upload(model[i].view()).is_ok());
  std::vector<std::string> names;
  for (const OwnedTensor& t : model) names.push_back(t.name);
  const Status s = reg.all_registered(names);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("2 of 5"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'blk.0.ffn_up.weight'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'output_norm.weight'"), std::string::npos) << s.message();
  names.resize(3);
  EXPECT_TRUE(reg.all_registered(names).is_ok());
}

TEST(VulkanWeights, ATensorPastTheStorageRangeGetsABufferOfItsOwn) {
  FakeDevice d(64 << 10, 64, 1 << 30);  // one binding sees at most 64 KiB
  WeightsRegistry reg(d);
  const OwnedTensor small = random_tensor("small", TensorType::F32, {100}, 11);
  const OwnedTensor big = random_tensor("big", TensorType::F32, {1024, 20}, 12);  // 80 KiB
  ASSERT_TRUE(reg.upload(small.view()).is_ok());
  ASSERT_TRUE(reg.upload(big.view()).is_ok());
  EXPECT_EQ(d.created(), 2);
  EXPECT_EQ((*reg.lookup("small"))->buffer->size(), 64u << 10) << "chunks capped at the range";
  expect_on_device(d, reg, small);
  expect_on_device(d, reg, big);
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
