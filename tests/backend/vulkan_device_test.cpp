// The Vulkan device layer: opening (and refusing to open) a device, what it
// reports, the kernels' SPIR-V against their manifests, host copies, and
// the descriptor-pool path that devices without VK_KHR_push_descriptor take.
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/gpu/encoders.h"
#include "backend/gpu/kernel_args.h"
#include "backend/gpu/kernel_table.h"
#include "backend/gpu/recorder.h"
#include "backend/gpu/spirv_reflect.h"
#include "backend/vulkan_testutil.h"

namespace minfer::vulkan::testing {
namespace {

using cpu::testing::random_floats;

TEST(VulkanDevice, ReportsItsLimitsAndFeatures) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const gpu::DeviceInfo& info = device().info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_EQ(info.api.rfind("Vulkan 1.", 0), 0u) << info.api;
  const gpu::DeviceLimits& l = info.limits;
  EXPECT_GE(l.max_workgroup_count[0], 65535u);  // the Vulkan minimum
  EXPECT_GE(l.max_workgroup_invocations, 128u);
  EXPECT_GE(l.max_shared_memory_bytes, 16384u);
  EXPECT_GE(l.max_push_constant_bytes, 128u);
  EXPECT_GE(l.max_storage_buffer_range, 1u << 27);
  EXPECT_GT(l.subgroup_size, 0u);
  EXPECT_TRUE(info.features.subgroup_arithmetic);
  std::printf("device: %s (%s; %s; %s), subgroup %u\n", info.name.c_str(), info.type.c_str(),
              info.driver.c_str(), info.api.c_str(), l.subgroup_size);
}

TEST(VulkanDevice, EveryProductionKernelHasAPipelineOrAReason) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const auto table = gpu::embedded_kernels();
  ASSERT_FALSE(table.empty());
  for (uint32_t i = 0; i < table.size(); ++i) {
    const gpu::KernelState& st = device().kernel(i);
    EXPECT_TRUE(st.available || !st.unavailable_reason.empty()) << table[i].label();
  }
  EXPECT_TRUE(device().kernel(gpu::find_kernel("spin", "u32").value()).available)
      << "the test device has the test-only kernels";
}

TEST(VulkanDevice, TestKernelsStayOutOfAnOrdinaryDevice) {
  MINFER_SKIP_WITHOUT_VULKAN();
  TestDevice plain = open_test_device({.quiet = true});
  ASSERT_TRUE(plain.status.is_ok()) << plain.status.message();
  const gpu::KernelState& spin = plain.device->kernel(gpu::find_kernel("spin", "u32").value());
  EXPECT_FALSE(spin.available);
  EXPECT_NE(spin.unavailable_reason.find("test-only"), std::string::npos);
}

TEST(VulkanDevice, DisabledByTheOption) {
  Options o;
  o.disable_vulkan = true;
  auto d = open_device(o);
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(d.message().find("MINFER_DISABLE_VULKAN"), std::string::npos) << d.message();
}

TEST(VulkanDevice, AnAbsentDeviceIndexIsUnavailableWithTheCount) {
  MINFER_SKIP_WITHOUT_VULKAN();
  Options o;
  o.vulkan_device = 1000;
  auto d = open_device(o, {.quiet = true});
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(d.message().find("MINFER_VULKAN_DEVICE=1000"), std::string::npos) << d.message();
}

// The embedded SPIR-V agrees with the manifests and kernel_args.h (the
// device checks the same at open; this names the kernel without a device).
TEST(VulkanKernels, SpirvMatchesManifestAndArgStructs) {
  for (const gpu::KernelInfo& k : gpu::embedded_kernels()) {
    auto r = gpu::reflect_spirv(k.spirv);
    ASSERT_TRUE(r.is_ok()) << k.label() << ": " << r.message();
    EXPECT_EQ(r->local_size, k.workgroup) << k.label();
    EXPECT_EQ(r->push_constant_bytes, k.push_size) << k.label();
    for (uint32_t b : r->bindings) EXPECT_LT(b, k.bindings.size()) << k.label();
  }
  const auto matmul = gpu::find_kernel("matmul", "q4_0");
  ASSERT_TRUE(matmul);
  EXPECT_EQ(gpu::embedded_kernels()[*matmul].push_size, sizeof(gpu::args::MatmulArgs));
}

TEST(VulkanKernels, ReflectionRefusesMalformedWords) {
  const std::vector<uint32_t> junk = {1, 2, 3};
  EXPECT_EQ(gpu::reflect_spirv(junk).status().code(), StatusCode::kInvalidArgument);
  std::vector<uint32_t> cut(gpu::embedded_kernels()[0].spirv.begin(),
                            gpu::embedded_kernels()[0].spirv.end());
  cut[5] = (1000u << 16) | 17u;  // an instruction longer than the module
  EXPECT_EQ(gpu::reflect_spirv(cut).status().code(), StatusCode::kInvalidArgument);
}

TEST(VulkanDevice, HostCopiesRoundTripAtOffsets) {
  MINFER_SKIP_WITHOUT_VULKAN();
  gpu::Device& d = device();
  std::vector<std::byte> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 7);
  auto b = d.create_buffer(1003).value();
  EXPECT_EQ(b->size(), 1003u);
  EXPECT_EQ(b->capacity() % 16, 0u);
  ASSERT_TRUE(d.write_buffer(*b, 3, data).is_ok());
  std::vector<std::byte> back(1000);
  ASSERT_TRUE(d.read_buffer(*b, 3, back).is_ok());
  EXPECT_EQ(back, data);
  const Status past = d.write_buffer(*b, 4, data);
  EXPECT_EQ(past.code(), StatusCode::kInvalidArgument) << past.message();
}

TEST(VulkanDevice, DescriptorPoolsWorkWherePushDescriptorsAreOff) {
  MINFER_SKIP_WITHOUT_VULKAN();
  TestDevice pools = open_test_device({.allow_push_descriptors = false, .quiet = true});
  ASSERT_TRUE(pools.status.is_ok()) << pools.status.message();
  gpu::Device& d = *pools.device;
  // More dispatches than one descriptor pool holds (256 sets).
  const int64_t n = 1000;
  const auto a = random_floats(n, 1);
  std::vector<float> one(n, 1.0f);
  auto ga = upload_floats(d, a), gone = upload_floats(d, one);
  gpu::Recorder rec(d);
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(gpu::encode_elementwise(rec, gpu::ElementwiseOp::kAdd, whole(ga), whole(gone),
                                        whole(ga), n, n)
                    .is_ok());
  }
  const Status s = rec.submit_and_wait();
  ASSERT_TRUE(s.is_ok()) << s.message();
  std::vector<double> want(a.begin(), a.end());
  for (double& v : want) v += 300.0;
  EXPECT_LT(max_abs_diff(download_floats(d, *ga, n), want), 1e-3);
  EXPECT_EQ(rec.barriers(), 299u);  // each add reads the previous one's output
}

}  // namespace
}  // namespace minfer::vulkan::testing

#else  // !MINFER_HAS_VULKAN

#include <gtest/gtest.h>

TEST(VulkanDevice, NotBuilt) {
  GTEST_SKIP() << "built without Vulkan (MINFER_VULKAN=OFF)";
}

#endif  // MINFER_HAS_VULKAN
