// The Vulkan device layer: opening (and refusing to open) a device, what it
// reports, the kernels' SPIR-V against their manifests, host copies (mapped,
// staged, and MemoryUse::kHostAccess on lavapipe opened as a discrete GPU
// with and without a BAR heap), waits that poll their fence and still end at
// the deadline, and the descriptor-pool path that devices without
// VK_KHR_push_descriptor take.
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/shader/encoders.h"
#include "backend/shader/kernel_args.h"
#include "backend/shader/kernel_table.h"
#include "backend/shader/recorder.h"
#include "backend/shader/spirv_reflect.h"
#include "backend/vulkan/vulkan_options.h"
#include "backend/vulkan_testutil.h"

namespace minfer::vulkan::testing {
namespace {

using cpu::testing::random_floats;

TEST(VulkanDevice, ReportsItsLimitsAndFeatures) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const shader::DeviceInfo& info = device().info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_EQ(info.api.rfind("Vulkan 1.", 0), 0u) << info.api;
  const shader::DeviceLimits& l = info.limits;
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
  const auto table = shader::embedded_kernels();
  ASSERT_FALSE(table.empty());
  for (uint32_t i = 0; i < table.size(); ++i) {
    const shader::KernelState& st = device().kernel(i);
    EXPECT_TRUE(st.available || !st.unavailable_reason.empty()) << table[i].label();
  }
  EXPECT_TRUE(device().kernel(shader::find_kernel("spin", "u32").value()).available)
      << "the test device has the test-only kernels";
}

TEST(VulkanDevice, TestKernelsStayOutOfAnOrdinaryDevice) {
  MINFER_SKIP_WITHOUT_VULKAN();
  TestDevice plain = open_test_device({.quiet = true});
  ASSERT_TRUE(plain.status.is_ok()) << plain.status.message();
  const shader::KernelState& spin =
      plain.device->kernel(shader::find_kernel("spin", "u32").value());
  EXPECT_FALSE(spin.available);
  EXPECT_NE(spin.unavailable_reason.find("test-only"), std::string::npos);
}

TEST(VulkanDevice, DisabledByTheOption) {
  Options o;
  o.section<vulkan::VulkanOptions>().disable_vulkan = true;
  auto d = open_device(o);
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(d.message().find("MINFER_DISABLE_VULKAN"), std::string::npos) << d.message();
}

TEST(VulkanDevice, AnAbsentDeviceIndexIsUnavailableWithTheCount) {
  MINFER_SKIP_WITHOUT_VULKAN();
  Options o;
  o.section<vulkan::VulkanOptions>().vulkan_device = 1000;
  auto d = open_device(o, {.quiet = true});
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(d.message().find("MINFER_VULKAN_DEVICE=1000"), std::string::npos) << d.message();
}

// The embedded SPIR-V agrees with the manifests and kernel_args.h (the
// device checks the same at open; this names the kernel without a device).
TEST(VulkanKernels, SpirvMatchesManifestAndArgStructs) {
  for (const shader::KernelInfo& k : shader::embedded_kernels()) {
    auto r = shader::reflect_spirv(k.spirv);
    ASSERT_TRUE(r.is_ok()) << k.label() << ": " << r.message();
    EXPECT_EQ(r->local_size, k.workgroup) << k.label();
    EXPECT_EQ(r->push_constant_bytes, k.push_size) << k.label();
    for (uint32_t b : r->bindings) EXPECT_LT(b, k.bindings.size()) << k.label();
  }
  const auto matmul = shader::find_kernel("matmul", "q4_0");
  ASSERT_TRUE(matmul);
  EXPECT_EQ(shader::embedded_kernels()[*matmul].push_size, sizeof(shader::args::MatmulArgs));
}

TEST(VulkanKernels, ReflectionRefusesMalformedWords) {
  const std::vector<uint32_t> junk = {1, 2, 3};
  EXPECT_EQ(shader::reflect_spirv(junk).status().code(), StatusCode::kInvalidArgument);
  std::vector<uint32_t> cut(shader::embedded_kernels()[0].spirv.begin(),
                            shader::embedded_kernels()[0].spirv.end());
  cut[5] = (1000u << 16) | 17u;  // an instruction longer than the module
  EXPECT_EQ(shader::reflect_spirv(cut).status().code(), StatusCode::kInvalidArgument);
}

TEST(VulkanDevice, HostCopiesRoundTripAtOffsets) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
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

// Round trips of `bytes` at offset 3 of a buffer made with `use`; whether it is mapped.
bool round_trips(shader::Device& d, shader::MemoryUse use, size_t bytes) {
  std::vector<std::byte> data(bytes);
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 13 + 1);
  auto b = d.create_buffer(bytes + 3, use);
  EXPECT_TRUE(b.is_ok()) << b.message();
  if (!b.is_ok()) return false;
  EXPECT_TRUE(d.write_buffer(**b, 3, data).is_ok());
  std::vector<std::byte> back(bytes);
  EXPECT_TRUE(d.read_buffer(**b, 3, back).is_ok());
  EXPECT_EQ(back, data) << bytes << " bytes";
  return (*b)->mapped();
}

TEST(VulkanDevice, HostAccessBuffersAreMappedWhereTheMemoryIs) {
  MINFER_SKIP_WITHOUT_VULKAN();
  if (device().info().unified_memory) {  // lavapipe: every buffer is mapped
    EXPECT_TRUE(round_trips(device(), shader::MemoryUse::kDevice, 100));
    EXPECT_TRUE(round_trips(device(), shader::MemoryUse::kHostAccess, 100));
  }
  // As a discrete GPU with a BAR heap: only kHostAccess buffers are mapped;
  // reads of them past 512 bytes go through staging (uncached BAR reads), and
  // staged copies of device-local buffers round-trip too.
  TestDevice bar = open_test_device({.quiet = true, .allow_unified_memory = false});
  ASSERT_TRUE(bar.status.is_ok()) << bar.status.message();
  EXPECT_FALSE(bar.device->info().unified_memory);
  for (size_t bytes : {size_t{16}, size_t{512}, size_t{4096}, size_t{70000}}) {
    EXPECT_TRUE(round_trips(*bar.device, shader::MemoryUse::kHostAccess, bytes));
    EXPECT_FALSE(round_trips(*bar.device, shader::MemoryUse::kDevice, bytes));
  }
}

TEST(VulkanDevice, HostAccessFallsBackWithoutMappedDeviceMemory) {
  MINFER_SKIP_WITHOUT_VULKAN();
  TestDevice plain = open_test_device(
      {.quiet = true, .allow_unified_memory = false, .allow_host_access_memory = false});
  ASSERT_TRUE(plain.status.is_ok()) << plain.status.message();
  EXPECT_FALSE(round_trips(*plain.device, shader::MemoryUse::kHostAccess, 16));
  EXPECT_FALSE(round_trips(*plain.device, shader::MemoryUse::kHostAccess, 5000));
}

// Seconds that `groups` workgroups of spin.u32 for `iterations` took on `d`
// (the status of the wait in `status`), workgroup 0's count in `counted`.
double time_spin(shader::Device& d, uint32_t iterations, uint32_t groups, Status& status,
                 uint32_t& counted) {
  auto flag = zeros(d, 16), count = zeros(d, 16);
  shader::Recorder rec(d);
  const shader::BufferRange bindings[] = {whole(flag), whole(count)};
  status =
      rec.dispatch_args(shader::find_kernel("spin", "u32").value(), bindings,
                        shader::args::SpinArgs{iterations}, shader::Groups{groups, 1, 1}, "spin");
  if (!status.is_ok()) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  status = rec.submit_and_wait();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (status.is_ok()) {
    EXPECT_TRUE(d.read_buffer(*count, 0, std::as_writable_bytes(std::span(&counted, 1))).is_ok());
  }
  return s;
}

// A wait that polls its fence for longer than the deadline (5 s here; 2 ms on
// a GPU) still ends at the deadline; polled waits that finish in time give
// their results.
TEST(VulkanDevice, PollingWaitsStillEndAtTheDeadline) {
  MINFER_SKIP_WITHOUT_VULKAN();
  // About 0.4 s of spinning, calibrated on the shared device (10 s deadline).
  Status st;
  uint32_t counted = 0, iterations = 1u << 20, groups = 1;
  const double one = time_spin(device(), iterations, 1, st, counted);
  ASSERT_TRUE(st.is_ok()) << st.message();
  if (counted == iterations) {  // loops run as long as asked
    iterations = static_cast<uint32_t>(
        std::clamp(iterations * 0.4 / std::max(one, 1e-4), double(iterations), 4.0e9));
  } else {  // lavapipe's loop cap: more workgroups instead
    iterations = counted;
    const double many = time_spin(device(), iterations, 64, st, counted);
    ASSERT_TRUE(st.is_ok()) << st.message();
    groups = static_cast<uint32_t>(std::clamp(64 * 0.4 / std::max(many, 1e-4), 64.0, 65535.0));
  }
  ScopedEnv tiny("MINFER_GPU_TIMEOUT", "0.05");
  // Staged host copies: their waits poll too.
  TestDevice polling = open_test_device(
      {.test_kernels = true, .quiet = true, .allow_unified_memory = false, .fence_spin_s = 5});
  ASSERT_TRUE(polling.status.is_ok()) << polling.status.message();
  shader::Device& d = *polling.device;
  time_spin(d, 100, 1, st, counted);  // finishes in time: the poll sees the fence
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(counted, 100u);
  const double late = time_spin(d, iterations, groups, st, counted);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.message();
  EXPECT_NE(st.message().find("within 0.05 s (MINFER_GPU_TIMEOUT)"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("spin.u32 'spin'"), std::string::npos) << st.message();
  EXPECT_LT(late, 0.3) << "the wait ended near its deadline, not after the poll's 5 s";
  // Closing `polling` waits (bounded) for the spin to end before freeing anything.
}

TEST(VulkanDevice, DescriptorPoolsWorkWherePushDescriptorsAreOff) {
  MINFER_SKIP_WITHOUT_VULKAN();
  TestDevice pools = open_test_device({.allow_push_descriptors = false, .quiet = true});
  ASSERT_TRUE(pools.status.is_ok()) << pools.status.message();
  shader::Device& d = *pools.device;
  // More dispatches than one descriptor pool holds (256 sets).
  const int64_t n = 1000;
  const auto a = random_floats(n, 1);
  std::vector<float> one(n, 1.0f);
  auto ga = upload_floats(d, a), gone = upload_floats(d, one);
  shader::Recorder rec(d);
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(shader::encode_elementwise(rec, shader::ElementwiseOp::kAdd, whole(ga), whole(gone),
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
