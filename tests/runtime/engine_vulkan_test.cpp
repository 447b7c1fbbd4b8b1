// The engine on the Vulkan backend (lavapipe in CI; skipped without a
// Vulkan device): paged batches of many sequences.
//   - Runner level, bit for bit: a sequence's logits rows are the same alone
//     and in a batch with another sequence's 150-token prompt chunk or decode
//     token, for its prefill and its next decode step (the row matmul
//     kernel at every batch size); with MINFER_BATCH_INVARIANT=0 the
//     150-token chunk takes the tiled GEMM and the same check finds
//     differences.
//   - Engine level: six staggered sequences of different prompt lengths,
//     greedy, give their solo tokens, with f16 and q8_0 caches.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/forward.h"
#include "runtime/paged_testutil.h"
#include "runtime/runtime_testutil.h"
#include "runtime/staggered_testutil.h"

#if MINFER_HAS_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#include "vulkan_options.h"
#endif

namespace minfer::runtime {
namespace {

#if MINFER_HAS_VULKAN

using ::minfer::testing::vulkan_options;

TEST(VulkanEngine, LogitsRowsAreBatchInvariantBitForBit) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  for (const char* shape : {"tiny-qwen2", "tiny-gemma3"}) {
    SCOPED_TRACE(shape);
    const model::Model& m = testing::tiny_model(shape, 9);
    ASSERT_TRUE(testing::PagedRunner(m, true, true, vulkan_options()).gpu())
        << "the GPU did not take part";
    EXPECT_EQ(testing::differences(m, true, true, 1, vulkan_options()), 0);
    // With batch-dependent kernels allowed, the 150-token chunk takes the
    // tiled GEMM and the rows differ: the check can fail.
    EXPECT_GT(testing::differences(m, false, true, 1, vulkan_options()), 0);
  }
}

TEST(VulkanEngine, StaggeredSequencesGiveTheirTokensAlone) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  const model::Model& m = testing::tiny_model("tiny-gemma3", 9, "Q4_K_M");
  for (quant::TensorType kv : {quant::TensorType::F16, quant::TensorType::Q8_0}) {
    SCOPED_TRACE("cache " + std::string(quant::type_name(kv)));
    EngineOptions o;
    o.n_slots = 6;
    o.n_ctx = 128;
    o.page_size = 8;
    o.max_batch = 64;
    o.k_type = o.v_type = kv;
    o.options = vulkan_options();
    testing::expect_staggered_tokens_equal_alone(m, o, 6, 10);
  }
}

#else

TEST(VulkanEngine, NotBuilt) {
  GTEST_SKIP() << "built without MINFER_VULKAN";
}

#endif

}  // namespace
}  // namespace minfer::runtime
