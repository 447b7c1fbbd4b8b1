// The backend registry: priority order, the CPU always last and always usable.
#include "backend/registry.h"

#include <gtest/gtest.h>

#include <cctype>
#include <optional>
#include <set>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_options.h"
#include "backend/metal/metal_options.h"
#include "backend/vulkan/vulkan_options.h"
#include "model/weights.h"

namespace minfer::backend {
namespace {

TEST(BackendRegistry, KindsInPriorityOrderWithTheCpuLast) {
  const auto kinds = backend_kinds();
  ASSERT_GE(kinds.size(), 2u);
  for (size_t i = 1; i < kinds.size(); ++i) {
    EXPECT_GT(kinds[i - 1].priority, kinds[i].priority) << kinds[i].name;
  }
  EXPECT_EQ(kinds.back().name, "CPU");
  EXPECT_FALSE(kinds.back().gpu);
#if MINFER_HAS_METAL
  EXPECT_EQ(kinds.front().name, "Metal");
#else
  EXPECT_EQ(kinds.front().name, "CUDA");
#endif
  EXPECT_TRUE(kinds.front().gpu);
}

TEST(BackendRegistry, CpuStartsAndTheGpuKindsSayWhyNot) {
  model::Weights weights;
  Options options;
  options.section<cuda::CudaOptions>().disable_cuda = true;
  options.section<vulkan::VulkanOptions>().disable_vulkan = true;
  options.section<metal::MetalOptions>().disable_metal = true;
  const BackendConfig config{weights, options, 2};
  for (const BackendKind& kind : backend_kinds()) {
    if (kind.gpu) {
      std::string upper(kind.name);
      for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      EXPECT_EQ(kind.unavailable(config), "disabled by MINFER_DISABLE_" + upper);
      continue;
    }
    EXPECT_EQ(kind.unavailable(config), "") << kind.name;
    auto b = kind.create(config);
    ASSERT_TRUE(b.is_ok()) << b.message();
    EXPECT_EQ((*b)->name(), kind.name);
    EXPECT_FALSE((*b)->requires_all_weights());
  }
  options.section<cuda::CudaOptions>().disable_cuda = false;
  const std::string why = backend_kinds().front().unavailable(config);
  EXPECT_EQ(why.empty(), cuda::available()) << why;
}

TEST(BackendRegistry, GathersEveryBackendsOptions) {
  // Every backend's switches, those of kinds this build lacks included.
  std::set<std::string> names;
  for (const OptionVariable& v : option_variables(option_sections())) {
    EXPECT_FALSE(v.help.empty()) << v.name;
    EXPECT_TRUE(names.insert(std::string(v.name)).second) << "listed twice: " << v.name;
  }
  for (const char* name : {"MINFER_DISABLE_CUDA", "MINFER_VULKAN_DEVICE", "MINFER_DISABLE_METAL",
                           "MINFER_NO_GPU_REPLAY", "MINFER_GPU_TIMEOUT", "MINFER_CPU_NO_REPACK"}) {
    EXPECT_TRUE(names.contains(name)) << name;
  }
  EXPECT_EQ(names.size(), 30u);
  auto o = Options::parse(
      [](std::string_view name) -> std::optional<std::string> {
        if (name == "MINFER_VULKAN_DEVICE") return "2";
        return std::nullopt;
      },
      option_sections());
  ASSERT_TRUE(o.is_ok()) << o.message();
  EXPECT_EQ(o->section<vulkan::VulkanOptions>().vulkan_device, 2);
}

}  // namespace
}  // namespace minfer::backend
