// Helpers for the Vulkan tests: one device for the whole test binary (opened
// with the test-only kernels), skipping when the machine has no Vulkan
// device, and host <-> buffer copies of f32 data.
//
// MINFER_SKIP_WITHOUT_VULKAN() skips a test only when open_device() says
// unavailable (no loader, no driver, no device, MINFER_DISABLE_VULKAN=1);
// any other failure to open (a kernel the driver refuses, say) fails it.
// Compiled only in builds with MINFER_HAS_VULKAN.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "backend/shader/device.h"
#include "backend/vulkan/vulkan_device.h"
#include "base/options.h"
#include "scoped_env.h"

namespace minfer::vulkan::testing {

struct TestDevice {
  std::unique_ptr<shader::Device> device;
  Status status;
};

// Opens a device with the environment's options and the test kernels.
inline TestDevice open_test_device(const OpenConfig& config = {.test_kernels = true}) {
  TestDevice t;
  auto options = Options::from_env(backend::option_sections());
  if (!options.is_ok()) {
    t.status = options.status();
    return t;
  }
  auto d = open_device(*options, config);
  if (d.is_ok()) {
    t.device = std::move(d).value();
  } else {
    t.status = d.status();
  }
  return t;
}

// The binary's shared device (opened on first use).
inline TestDevice& shared_device() {
  static TestDevice t = open_test_device();
  return t;
}

#define MINFER_SKIP_WITHOUT_VULKAN()                                                 \
  do {                                                                               \
    const ::minfer::Status& s_ = ::minfer::vulkan::testing::shared_device().status;  \
    if (s_.code() == ::minfer::StatusCode::kUnavailable) {                           \
      GTEST_SKIP() << "no Vulkan device: " << s_.message();                          \
    }                                                                                \
    ASSERT_TRUE(s_.is_ok()) << "opening the Vulkan device failed: " << s_.message(); \
  } while (0)

using ::minfer::testing::ScopedEnv;

inline shader::Device& device() {
  return *shared_device().device;
}

inline std::unique_ptr<shader::Buffer> upload(shader::Device& d, std::span<const std::byte> bytes) {
  auto b = d.create_buffer(bytes.size());
  EXPECT_TRUE(b.is_ok()) << b.message();
  if (!b.is_ok()) return nullptr;
  const Status s = d.write_buffer(**b, 0, bytes);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return std::move(b).value();
}

inline std::unique_ptr<shader::Buffer> upload_floats(shader::Device& d,
                                                     const std::vector<float>& v) {
  return upload(d, std::as_bytes(std::span(v)));
}

inline std::unique_ptr<shader::Buffer> zeros(shader::Device& d, uint64_t bytes) {
  return upload(d, std::vector<std::byte>(bytes));
}

inline std::vector<float> download_floats(shader::Device& d, const shader::Buffer& b, size_t n) {
  std::vector<float> out(n);
  const Status s = d.read_buffer(b, 0, std::as_writable_bytes(std::span(out)));
  EXPECT_TRUE(s.is_ok()) << s.message();
  return out;
}

inline shader::BufferRange whole(const std::unique_ptr<shader::Buffer>& b) {
  return shader::BufferRange{b.get(), 0, 0};
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    m = d > m || d != d ? d : m;  // a NaN counts as the largest difference
  }
  return m;
}

}  // namespace minfer::vulkan::testing
