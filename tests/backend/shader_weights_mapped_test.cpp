// Zero-copy weights of unified-memory GPUs (Metal), on a host-memory fake
// device that wraps host memory as Device::wrap_host_memory does: the part
// plan (shader/host_parts.h) and WeightsRegistry::map_all (shader/weights.h) —
// tensors become (part buffer, offset) views of the memory they lie in, read
// back bit-exact, and only those a part cannot hold or the device cannot
// bind at their offset are copied.
#ifdef MINFER_HAS_SHADER_KERNELS

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/shader/host_parts.h"
#include "backend/shader/weights.h"
#include "backend/vulkan_fake_device.h"

namespace minfer::shader {
namespace {

constexpr uint64_t kPage = 4096;
constexpr size_t kNone = HostPartPlan::kNoPart;

TEST(ShaderHostParts, TouchingRangesShareAPartRoundedToPages) {
  const std::vector<HostRange> r = {
      {8192 + 100, 8192 + 5000}, {8192 + 5000, 8192 + 9000}, {8192 + 9032, 8192 + 9100}};
  const HostPartPlan p = plan_host_parts(r, kPage, 1 << 20);
  ASSERT_EQ(p.parts.size(), 1u);
  EXPECT_EQ(p.parts[0].begin, 8192u);
  EXPECT_EQ(p.parts[0].end, 8192u + 3 * kPage);
  EXPECT_EQ(p.part_of, (std::vector<size_t>{0, 0, 0}));
}

TEST(ShaderHostParts, UntouchedPagesStartANewPartInAddressOrder) {
  // Given out of order; the second range starts two pages past the first's end.
  const std::vector<HostRange> r = {{5 * kPage, 5 * kPage + 10}, {kPage, kPage + 100}};
  const HostPartPlan p = plan_host_parts(r, kPage, 1 << 20);
  ASSERT_EQ(p.parts.size(), 2u);
  EXPECT_EQ(p.parts[0].begin, kPage);
  EXPECT_EQ(p.parts[1].begin, 5 * kPage);
  EXPECT_EQ(p.part_of, (std::vector<size_t>{1, 0}));
}

TEST(ShaderHostParts, PartsStayWithinTheLargestBufferAndOversizedRangesAreLeftOut) {
  const std::vector<HostRange> r = {{0, 3 * kPage},
                                    {3 * kPage, 5 * kPage},
                                    {5 * kPage, 5 * kPage + 1},
                                    {6 * kPage, 11 * kPage},  // 5 pages > 4
                                    {20 * kPage, 20 * kPage}};
  const HostPartPlan p = plan_host_parts(r, kPage, 4 * kPage);
  ASSERT_EQ(p.parts.size(), 2u);
  EXPECT_EQ(p.parts[0].begin, 0u);
  EXPECT_EQ(p.parts[0].end, 3 * kPage);
  EXPECT_EQ(p.parts[1].begin, 3 * kPage);
  EXPECT_EQ(p.parts[1].end, 6 * kPage);
  EXPECT_EQ(p.part_of, (std::vector<size_t>{0, 1, 1, kNone, kNone}));
  for (const HostRange& part : p.parts) EXPECT_LE(part.end - part.begin, 4 * kPage);
}

// Page-aligned host memory standing in for the mapped model file.
struct Arena {
  explicit Arena(size_t bytes)
      : size(bytes), data(static_cast<std::byte*>(std::aligned_alloc(kPage, bytes))) {
    std::mt19937 rng(7);
    for (size_t i = 0; i < bytes; ++i) data.get()[i] = std::byte(rng() & 0xff);
  }
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  size_t size;
  std::unique_ptr<std::byte, Free> data;
};

HostTensor f32_at(const Arena& a, const char* name, size_t offset, int64_t n,
                  std::vector<int64_t>& shape) {
  shape = {n};
  return {name, quant::TensorType::F32, shape,
          std::span<const std::byte>(a.data.get() + offset, size_t(n) * 4)};
}

void expect_reads_back(Device& d, const WeightsRegistry& reg, const HostTensor& t) {
  auto w = reg.lookup(t.name);
  ASSERT_TRUE(w.is_ok()) << w.message();
  std::vector<std::byte> back((*w)->bytes);
  ASSERT_TRUE(d.read_buffer(*(*w)->buffer, (*w)->offset, back).is_ok());
  EXPECT_TRUE(std::equal(back.begin(), back.end(), t.bytes.begin(), t.bytes.end())) << t.name;
}

TEST(ShaderWeightsMapped, TensorsBecomeViewsOfTheMemoryTheyLieIn) {
  vulkan::testing::FakeDevice d(1 << 20, 16, 64 << 20);
  d.allow_wrap(kPage);
  const Arena file(8 * kPage);
  std::vector<int64_t> s0, s1, s2;
  const std::vector<HostTensor> t = {f32_at(file, "a", 96, 1000, s0),
                                     f32_at(file, "b", 96 + 4000, 3000, s1),
                                     f32_at(file, "c", 4 * kPage + 32, 8, s2)};
  WeightsRegistry reg(d);
  ASSERT_TRUE(reg.map_all(t).is_ok());
  EXPECT_EQ(reg.device_bytes(), 0u) << "nothing copied";
  EXPECT_EQ(reg.mapped_bytes(), (1000u + 3000u + 8u) * 4);
  ASSERT_EQ(d.wrapped().size(), 1u);
  EXPECT_EQ(d.wrapped()[0].data(), file.data.get());
  EXPECT_EQ(d.wrapped()[0].size(), 5 * kPage) << "the pages the tensors touch";
  for (const HostTensor& x : t) expect_reads_back(d, reg, x);
  EXPECT_EQ((*reg.lookup("b"))->offset, 96u + 4000u);
  EXPECT_TRUE(reg.all_registered(std::vector<std::string>{"a", "b", "c"}).is_ok());
}

TEST(ShaderWeightsMapped, WhatAPartCannotHoldOrBindIsCopied) {
  vulkan::testing::FakeDevice d(2 * kPage, 16, 64 << 20);  // buffers of 2 pages at most
  d.allow_wrap(kPage);
  const Arena file(8 * kPage);
  std::vector<int64_t> s0, s1, s2;
  const std::vector<HostTensor> t = {
      f32_at(file, "fits", 0, 100, s0), f32_at(file, "misaligned", 1004, 10, s1),  // not 16-aligned
      f32_at(file, "too_big", 3 * kPage, 3 * kPage / 4, s2)};                      // 3 pages > 2
  WeightsRegistry reg(d);
  ASSERT_TRUE(reg.map_all(t).is_ok());
  EXPECT_EQ(reg.mapped_bytes(), 400u);
  EXPECT_GT(reg.device_bytes(), 0u);
  for (const HostTensor& x : t) expect_reads_back(d, reg, x);
  EXPECT_EQ((*reg.lookup("misaligned"))->offset % reg.alignment(), 0u) << "a copy";
}

TEST(ShaderWeightsMapped, MemoryTheDeviceWillNotWrapIsCopied) {
  vulkan::testing::FakeDevice d(1 << 20, 16, 64 << 20);
  d.allow_wrap(kPage);
  d.refuse_wraps();
  const Arena file(4 * kPage);
  std::vector<int64_t> s0, s1;
  const std::vector<HostTensor> t = {f32_at(file, "a", 0, 1000, s0),
                                     f32_at(file, "b", 2 * kPage, 500, s1)};
  WeightsRegistry reg(d);
  ASSERT_TRUE(reg.map_all(t).is_ok());
  EXPECT_EQ(reg.mapped_bytes(), 0u);
  EXPECT_GT(reg.device_bytes(), 0u);
  for (const HostTensor& x : t) expect_reads_back(d, reg, x);
}

TEST(ShaderWeightsMapped, ADeviceThatCannotWrapCopiesAndBadBytesAreNamed) {
  vulkan::testing::FakeDevice d(1 << 20, 16, 64 << 20);
  const Arena file(2 * kPage);
  std::vector<int64_t> s0;
  const HostTensor a = f32_at(file, "a", 64, 100, s0);
  WeightsRegistry reg(d);
  ASSERT_TRUE(reg.map_all(std::span(&a, 1)).is_ok());
  EXPECT_TRUE(d.wrapped().empty());
  EXPECT_EQ(reg.mapped_bytes(), 0u);
  expect_reads_back(d, reg, a);

  d.allow_wrap(kPage);
  WeightsRegistry reg2(d);
  std::vector<int64_t> shape = {101};  // 404 bytes said, 400 given
  const HostTensor wrong{"wrong", quant::TensorType::F32, shape, a.bytes};
  const Status st = reg2.map_all(std::span(&wrong, 1));
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("'wrong' has 400 bytes"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace minfer::shader

#endif  // MINFER_HAS_SHADER_KERNELS
