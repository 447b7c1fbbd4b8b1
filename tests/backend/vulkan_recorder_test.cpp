// The shared GPU layer on the Vulkan device: device-limit guards with the
// actual numbers, barriers only between dependent dispatches, the kernel
// trail, and the bounded wait: a kernel that spins past a tiny
// MINFER_GPU_TIMEOUT ends in an error naming it.
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/kernel_trail.h"
#include "backend/shader/encoders.h"
#include "backend/shader/kernel_args.h"
#include "backend/shader/kernel_table.h"
#include "backend/shader/limits.h"
#include "backend/shader/recorder.h"
#include "backend/vulkan_testutil.h"

namespace minfer::vulkan::testing {
namespace {

using cpu::testing::random_floats;

uint32_t kernel_index(std::string_view name, std::string_view variant) {
  const auto k = shader::find_kernel(name, variant);
  EXPECT_TRUE(k.has_value()) << name << "." << variant;
  return k.value_or(0);
}

TEST(VulkanRecorder, AGridPastMaxComputeWorkGroupCountIsRefusedWithTheNumbers) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  auto buf = zeros(d, 1024);
  shader::Recorder rec(d);
  const uint32_t max_x = d.info().limits.max_workgroup_count[0];
  const shader::BufferRange bindings[] = {whole(buf), whole(buf), whole(buf)};
  const shader::args::ElementwiseArgs args{256, 256};
  const Status s = rec.dispatch_args(kernel_index("elementwise", "add"), bindings, args,
                                     shader::Groups{max_x + 1, 1, 1});
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("elementwise.add"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::to_string(max_x + 1)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("maxComputeWorkGroupCount[0] = " + std::to_string(max_x)),
            std::string::npos)
      << s.message();
  EXPECT_EQ(rec.pending(), 0u);  // nothing was encoded
  // The same through an encoder: more token groups than the z limit allows.
  const uint32_t max_z = d.info().limits.max_workgroup_count[2];
  const int64_t tokens = int64_t(max_z + 1) * MINFER_MATMUL_TOKENS_PER_GROUP;
  auto x = zeros(d, 32 * 4 * tokens);
  const Status m = shader::encode_matmul(rec, kernel_index("matmul", "f32"), quant::TensorType::F32,
                                         whole(buf), whole(x), whole(x), {32, 1, tokens});
  EXPECT_EQ(m.code(), StatusCode::kOutOfRange) << m.message();
  EXPECT_NE(m.message().find("maxComputeWorkGroupCount[2]"), std::string::npos) << m.message();
}

TEST(VulkanRecorder, MalformedCallsAreRefusedBeforeEncoding) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  auto buf = zeros(d, 1024);
  shader::Recorder rec(d);
  const uint32_t add = kernel_index("elementwise", "add");
  const shader::args::ElementwiseArgs args{256, 256};
  const shader::BufferRange two[] = {whole(buf), whole(buf)};
  Status s = rec.dispatch_args(add, two, args, shader::Groups{});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("manifest declares 3"), std::string::npos) << s.message();
  const shader::BufferRange past[] = {whole(buf), whole(buf),
                                      shader::BufferRange{buf.get(), 0, 4096}};
  s = rec.dispatch_args(add, past, args, shader::Groups{});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("binding 2 (out)"), std::string::npos) << s.message();
  const shader::BufferRange three[] = {whole(buf), whole(buf), whole(buf)};
  const uint32_t wrong_size = 7;
  s = rec.dispatch_args(add, three, wrong_size, shader::Groups{});
  EXPECT_NE(s.message().find("ElementwiseArgs has 8"), std::string::npos) << s.message();
  EXPECT_EQ(rec.pending(), 0u);
}

// check_dispatch on made-up limits: shared memory, storage range, alignment.
class FakeBuffer : public shader::Buffer {
 public:
  explicit FakeBuffer(uint64_t n) : n_(n) {}
  uint64_t size() const override { return n_; }
  uint64_t capacity() const override { return n_; }

 private:
  uint64_t n_;
};

TEST(VulkanRecorder, LimitChecksNameTheLimitAndBothNumbers) {
  const shader::KernelInfo& matmul = shader::embedded_kernels()[kernel_index("matmul", "f32")];
  shader::DeviceLimits l;
  l.max_workgroup_count = {65535, 65535, 65535};
  l.max_workgroup_size = {1024, 1024, 64};
  l.max_workgroup_invocations = 1024;
  l.max_shared_memory_bytes = 512;
  l.max_storage_buffer_range = 1 << 20;
  l.min_storage_buffer_offset_alignment = 64;
  l.max_push_constant_bytes = 128;
  shader::KernelState st{true, "", 1024};
  const FakeBuffer big(4 << 20);
  // matmul's six bindings: w, x, y, bias, residual, norm_w.
  const shader::BufferRange ok[] = {{&big, 0, 1024}, {&big, 0, 1024}, {&big, 0, 1024},
                                    {&big, 0, 1024}, {&big, 0, 1024}, {&big, 0, 1024}};
  Status s = shader::check_dispatch(l, matmul, st, ok, matmul.push_size, {});
  EXPECT_NE(s.message().find("maxComputeSharedMemorySize = 512"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1024"), std::string::npos);
  st.shared_bytes = 256;
  EXPECT_TRUE(shader::check_dispatch(l, matmul, st, ok, matmul.push_size, {}).is_ok());
  const shader::BufferRange wide[] = {{&big, 0, 0},    {&big, 0, 1024}, {&big, 0, 1024},
                                      {&big, 0, 1024}, {&big, 0, 1024}, {&big, 0, 1024}};
  s = shader::check_dispatch(l, matmul, st, wide, matmul.push_size, {});
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(
      s.message().find("range of 4194304 exceeds the device's maxStorageBufferRange = 1048576"),
      std::string::npos)
      << s.message();
  const shader::BufferRange odd[] = {{&big, 32, 1024}, {&big, 0, 1024}, {&big, 0, 1024},
                                     {&big, 0, 1024},  {&big, 0, 1024}, {&big, 0, 1024}};
  s = shader::check_dispatch(l, matmul, st, odd, matmul.push_size, {});
  EXPECT_NE(s.message().find("minStorageBufferOffsetAlignment = 64"), std::string::npos)
      << s.message();
  l.max_workgroup_size[0] = 32;
  s = shader::check_dispatch(l, matmul, st, ok, matmul.push_size, {});
  EXPECT_NE(s.message().find("maxComputeWorkGroupSize[0] = 32"), std::string::npos) << s.message();
  EXPECT_EQ(shader::fold_groups(70000, l).value().x, 65535u);
  EXPECT_EQ(shader::fold_groups(70000, l).value().y, 2u);
}

TEST(VulkanRecorder, BarriersOnlyBetweenDependentDispatches) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  const int64_t n = 4096;
  auto a = upload_floats(d, random_floats(n, 1)), b = upload_floats(d, random_floats(n, 2));
  auto c = zeros(d, n * 4), e = zeros(d, n * 4), f = zeros(d, n * 4);
  shader::Recorder rec(d);
  using shader::ElementwiseOp;
  // c = a + b and e = a * b are independent; f = c + e reads both.
  ASSERT_TRUE(
      shader::encode_elementwise(rec, ElementwiseOp::kAdd, whole(a), whole(b), whole(c), n, n)
          .is_ok());
  ASSERT_TRUE(
      shader::encode_elementwise(rec, ElementwiseOp::kMul, whole(a), whole(b), whole(e), n, n)
          .is_ok());
  EXPECT_EQ(rec.barriers(), 0u);
  ASSERT_TRUE(
      shader::encode_elementwise(rec, ElementwiseOp::kAdd, whole(c), whole(e), whole(f), n, n)
          .is_ok());
  EXPECT_EQ(rec.barriers(), 1u);
  // Writing a, which the first two read, must wait for them too (write after read).
  ASSERT_TRUE(
      shader::encode_elementwise(rec, ElementwiseOp::kMul, whole(f), whole(b), whole(a), n, n)
          .is_ok());
  EXPECT_EQ(rec.barriers(), 2u);
  ASSERT_TRUE(rec.submit_and_wait().is_ok());
  EXPECT_EQ(rec.pending(), 0u);
  EXPECT_NE(rec.trail().describe().find("last 4 kernels (oldest first): elementwise.add, "
                                        "elementwise.mul, elementwise.add, elementwise.mul"),
            std::string::npos)
      << rec.trail().describe();
}

TEST(VulkanRecorder, TheTrailKeepsTheLastSixteenOldestFirst) {
  backend::KernelTrail trail;
  EXPECT_EQ(trail.describe(), "no kernel dispatched yet");
  for (int i = 0; i < 20; ++i) trail.record("k" + std::to_string(i));
  EXPECT_EQ(trail.size(), 16u);
  const std::string d = trail.describe();
  EXPECT_EQ(d.rfind("last 16 kernels (oldest first): k4, k5,", 0), 0u) << d;
  EXPECT_NE(d.find("k18, k19"), std::string::npos) << d;
  EXPECT_EQ(d.find("k3,"), std::string::npos) << d;
}

// Runs spin.u32 for `iterations` in each of `groups` workgroups on `d`
// after three other kernels; the status of the wait and workgroup 0's count.
struct Spin {
  Status status;
  uint32_t counted = 0;
  double seconds = 0;
};

Spin run_spin(shader::Device& d, uint32_t iterations, uint32_t groups) {
  Spin out;
  auto flag = zeros(d, 16), count = zeros(d, 16), x = zeros(d, 4096);
  shader::Recorder rec(d);
  for (int i = 0; i < 3; ++i) {
    out.status = shader::encode_elementwise(rec, shader::ElementwiseOp::kAdd, whole(x), whole(x),
                                            whole(x), 1024, 1024, "warmup");
    if (!out.status.is_ok()) return out;
  }
  const shader::BufferRange bindings[] = {whole(flag), whole(count)};
  out.status =
      rec.dispatch_args(kernel_index("spin", "u32"), bindings, shader::args::SpinArgs{iterations},
                        shader::Groups{groups, 1, 1}, "the spinning node");
  if (!out.status.is_ok()) return out;
  const auto t0 = std::chrono::steady_clock::now();
  out.status = rec.submit_and_wait();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (out.status.is_ok()) {
    EXPECT_TRUE(
        d.read_buffer(*count, 0, std::as_writable_bytes(std::span(&out.counted, 1))).is_ok());
  }
  return out;  // the buffers go; a device still running the spin frees them when it ends
}

TEST(VulkanRecorder, AWaitPastTheDeadlineNamesTheSpinningKernel) {
  MINFER_SKIP_WITHOUT_VULKAN();
  // Calibrate on the shared device (10 s deadline) for about 1.5 s of spinning.
  const uint32_t probe = 1u << 20;
  const Spin one = run_spin(device(), probe, 1);
  ASSERT_TRUE(one.status.is_ok()) << one.status.message();
  uint32_t iterations = probe, groups = 1;
  if (one.counted == probe) {  // loops run as long as asked: one long workgroup
    iterations = static_cast<uint32_t>(
        std::clamp(probe * 1.5 / std::max(one.seconds, 1e-4), double(probe), 4.0e9));
  } else {  // lavapipe: a loop cap (its count); many capped workgroups instead
    EXPECT_GT(one.counted, 0u);
    iterations = one.counted;
    const Spin many = run_spin(device(), iterations, 64);
    ASSERT_TRUE(many.status.is_ok()) << many.status.message();
    groups =
        static_cast<uint32_t>(std::clamp(64 * 1.5 / std::max(many.seconds, 1e-4), 64.0, 65535.0));
  }

  ScopedEnv tiny("MINFER_GPU_TIMEOUT", "0.05");
  TestDevice hurried = open_test_device({.test_kernels = true, .quiet = true});
  ASSERT_TRUE(hurried.status.is_ok()) << hurried.status.message();
  EXPECT_DOUBLE_EQ(hurried.device->timeout_s(), 0.05);
  const Spin late = run_spin(*hurried.device, iterations, groups);
  const Status& s = late.status;
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.message();
  EXPECT_NE(s.message().find("within 0.05 s (MINFER_GPU_TIMEOUT)"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("spin.u32 'the spinning node'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("elementwise.add 'warmup'"), std::string::npos) << s.message();
  EXPECT_LT(late.seconds, 1.0) << "the wait ended near its deadline";
  std::printf(
      "spin: %u iterations x %u workgroups (probe: %u counted in %.3f s); the wait gave "
      "up after %.3f s: %s\n",
      iterations, groups, one.counted, one.seconds, late.seconds, s.message().c_str());
  // Closing `hurried` waits (bounded) for the spin to end before freeing anything.
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
