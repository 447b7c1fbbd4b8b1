// The backend registry: priority order, the CPU always last and always usable.
#include "backend/registry.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "backend/cuda/cuda_backend.h"
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
  options.disable_cuda = true;
  options.disable_vulkan = true;
  options.disable_metal = true;
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
  options.disable_cuda = false;
  const std::string why = backend_kinds().front().unavailable(config);
  EXPECT_EQ(why.empty(), cuda::available()) << why;
}

}  // namespace
}  // namespace minfer::backend
