// The Metal backend's KV cache policy (metal_backend.h), plain C++ run on
// every platform, and its path through the shared GPU backend: a backend
// made with a policy answers default_cache_type() with it, one without has
// no preference (the runtime's default stands). The GPU backend runs over a
// host-memory fake device here (no kernels needed for the question).
#include <gtest/gtest.h>

#include "backend/metal/metal_backend.h"

#ifdef MINFER_HAS_SHADER_KERNELS
#include "backend/shader/shader_backend.h"
#include "backend/vulkan_fake_device.h"
#endif

namespace minfer::metal {
namespace {

using quant::TensorType;

TEST(MetalPolicy, F16CacheFromTheSevenBillionClassOnF32Below) {
  EXPECT_EQ(default_cache_type(24, 128), TensorType::F32);  // Qwen2.5-0.5B: 3072
  EXPECT_EQ(default_cache_type(18, 256), TensorType::F32);  // Gemma 3 270M: 4608
  EXPECT_EQ(default_cache_type(32, 255), TensorType::F32);  // 8160, just below
  EXPECT_EQ(default_cache_type(32, 256), TensorType::F16);  // 8192
  EXPECT_EQ(default_cache_type(28, 512), TensorType::F16);  // Qwen2.5-7B: 14336
}

#ifdef MINFER_HAS_SHADER_KERNELS
TEST(MetalPolicy, TheShaderBackendAnswersWithThePolicyItWasGiven) {
  auto device = std::make_shared<vulkan::testing::FakeDevice>(1 << 20, 16, 64 << 20);
  const model::Weights weights;
  const Options options;
  auto with = shader::create_shader_backend("Metal", device, weights, options, default_cache_type);
  ASSERT_TRUE(with.is_ok()) << with.message();
  EXPECT_EQ((*with)->default_cache_type(24, 128), TensorType::F32);
  EXPECT_EQ((*with)->default_cache_type(28, 512), TensorType::F16);
  auto without = shader::create_shader_backend("Vulkan", device, weights, options);
  ASSERT_TRUE(without.is_ok()) << without.message();
  EXPECT_FALSE((*without)->default_cache_type(24, 128).has_value());
}
#endif

}  // namespace
}  // namespace minfer::metal
