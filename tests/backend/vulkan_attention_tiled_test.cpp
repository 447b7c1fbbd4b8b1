// The tiled prefill attention (shader::encode_attention_tiled) against the host
// loop of vulkan_attention_test.cpp (double, over the dequantized cache),
// max abs diff < 1e-3: F32/F16/Q8_0 and mixed K/V caches, GQA 7 and 8 (14/2
// and 8/1 heads) and 1, head_dim 64/128/256 (and 96, 32, 10), queries from
// position 0 and from later positions (chunked prefill), token counts that
// are no multiple of the query block, every rows-per-invocation geometry, a
// sliding window, a paged cache of two interleaved sequences (blocks of
// mixed slots), bad positions/slots/pages reported as attention.comp does,
// malformed shapes refused, and when ShaderBackend picks it. By hand:
// --gtest_also_run_disabled_tests --gtest_filter='VulkanAttentionTiled*'
// also times it against encode_attention at the Qwen2.5 prompt shapes.
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "backend/shader/encode_attention.h"
#include "backend/shader/encode_attention_tiled.h"
#include "backend/vulkan_attention_testutil.h"

namespace minfer::vulkan::testing {
namespace {

struct TypeCase {
  TensorType k, v;
  int64_t n_head, n_head_kv, head_dim;
};

TEST(VulkanAttentionTiled, ChunksFromLaterPositionsMatchTheHostForEveryCacheType) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const TypeCase cases[] = {
      {TensorType::F32, TensorType::F32, 14, 2, 64},
      {TensorType::F16, TensorType::F16, 8, 1, 128},
      {TensorType::Q8_0, TensorType::Q8_0, 8, 1, 256},
      {TensorType::F16, TensorType::Q8_0, 14, 2, 128},
      {TensorType::Q8_0, TensorType::F32, 4, 4, 64},
      {TensorType::F32, TensorType::F16, 4, 2, 256},
      {TensorType::Q8_0, TensorType::F16, 6, 2, 96},
      {TensorType::F16, TensorType::F32, 4, 1, 32},
      {TensorType::F32, TensorType::Q8_0, 2, 2, 32},
      {TensorType::F16, TensorType::F16, 6, 3, 10},
      {TensorType::F32, TensorType::F16, 3, 1, 6},
  };
  uint32_t seed = 100;
  for (const TypeCase& tc : cases) {
    expect_matches_reference(prompt(37, 90, tc.n_head, tc.n_head_kv, tc.head_dim, tc.k, tc.v),
                             seed += 10, AttentionKernel::kTiled);
  }
}

// Blocks of 32 rows (8 at head_dim 256): 77 tokens x 7 heads and 45 x 8
// leave partial blocks; the prompt starts at 0, so the first block's rows
// see few keys.
TEST(VulkanAttentionTiled, PromptsFromZeroWithPartialBlocksMatchTheHost) {
  MINFER_SKIP_WITHOUT_VULKAN();
  expect_matches_reference(prompt(77, 0, 14, 2, 64, TensorType::F16, TensorType::F16), 200,
                           AttentionKernel::kTiled);
  expect_matches_reference(prompt(45, 0, 8, 1, 128, TensorType::F32, TensorType::F32), 210,
                           AttentionKernel::kTiled);
  expect_matches_reference(prompt(33, 0, 8, 1, 256, TensorType::F16, TensorType::Q8_0), 220,
                           AttentionKernel::kTiled);
}

TEST(VulkanAttentionTiled, EveryRowsPerInvocationMatchesTheHost) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (uint32_t rows : {1u, 2u, 4u}) {
    const ForcedRows forced(rows);
    expect_matches_reference(prompt(41, 20, 14, 2, 64, TensorType::F16, TensorType::F16), 300,
                             AttentionKernel::kTiled);
    expect_matches_reference(prompt(19, 5, 6, 2, 96, TensorType::Q8_0, TensorType::F32), 310,
                             AttentionKernel::kTiled);
  }
}

TEST(VulkanAttentionTiled, SlidingWindowKeepsOnlyRecentKeys) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (int64_t window : {1, 7, 40}) {
    AttentionCase c = prompt(37, 100, 14, 2, 64, TensorType::Q8_0, TensorType::F16);
    c.shape.sliding_window = window;
    expect_matches_reference(c, 400 + uint32_t(window), AttentionKernel::kTiled);
  }
}

TEST(VulkanAttentionTiled, PagedCacheOfTwoSequencesInShuffledPages) {
  MINFER_SKIP_WITHOUT_VULKAN();
  expect_paged_cases_match(AttentionKernel::kTiled, 500);
}

TEST(VulkanAttentionTiled, BadPositionsSlotsAndPagesAreSkippedAndReported) {
  MINFER_SKIP_WITHOUT_VULKAN();
  expect_bad_indices_reported(AttentionKernel::kTiled);
}

TEST(VulkanAttentionTiled, RefusesWhatEncodeAttentionRefuses) {
  MINFER_SKIP_WITHOUT_VULKAN();
  expect_malformed_shapes_refused(AttentionKernel::kTiled);
}

TEST(VulkanAttentionTiled, AppliesToPromptsOfReadableCaches) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const shader::Device& d = device();
  auto s =
      shape_of(shader::kAttentionTiledMinTokens, 14, 2, 64, 4096, TensorType::F16, TensorType::F16);
  EXPECT_TRUE(shader::attention_tiled_applies(d, s));
  s.n_tokens -= 1;
  EXPECT_FALSE(shader::attention_tiled_applies(d, s));
  s.n_tokens = 512;
  s.k_type = TensorType::Q4_0;
  EXPECT_FALSE(shader::attention_tiled_applies(d, s));
  s.k_type = TensorType::F16;
  s.head_dim = 258;
  EXPECT_FALSE(shader::attention_tiled_applies(d, s));
  s.head_dim = 64;
  s.n_ctx = 1 << 20;  // past lavapipe's loop cap, fine elsewhere
  EXPECT_EQ(shader::attention_tiled_applies(d, s), d.info().type != "cpu");
  EXPECT_GT(shader::attention_tiled_loop_bound(s, 4), 65535u);
  s.n_ctx = 2048;
  EXPECT_LT(shader::attention_tiled_loop_bound(s, 4), 30000u);
}

// ---- by hand: GPU time per call, the per-query kernel against the tiled one ----

TEST(VulkanAttentionTiled, DISABLED_PromptTiming) {
  MINFER_SKIP_WITHOUT_VULKAN();
  struct Bench {
    const char* model;
    int64_t n_head, n_head_kv, head_dim, n_tokens;
    int32_t first;  // the first query's position
  };
  const Bench benches[] = {
      {"qwen2.5-0.5b", 14, 2, 64, 2048, 0},   {"qwen2.5-0.5b", 14, 2, 64, 1024, 0},
      {"qwen2.5-0.5b", 14, 2, 64, 512, 0},    {"qwen2.5-0.5b", 14, 2, 64, 256, 0},
      {"qwen2.5-0.5b", 14, 2, 64, 128, 0},    {"qwen2.5-0.5b", 14, 2, 64, 64, 0},
      {"qwen2.5-0.5b", 14, 2, 64, 32, 0},     {"qwen2.5-0.5b", 14, 2, 64, 16, 0},
      {"qwen2.5-0.5b", 14, 2, 64, 32, 2016},  {"qwen2.5-0.5b", 14, 2, 64, 128, 1920},
      {"qwen2.5-0.5b", 14, 2, 64, 256, 1792}, {"qwen2.5-7b", 28, 4, 128, 2048, 0},
      {"qwen2.5-7b", 28, 4, 128, 512, 0},     {"gemma-3-1b", 4, 1, 256, 2048, 0},
  };
  for (const Bench& b : benches) {
    const AttentionCase c = prompt(b.n_tokens, b.first, b.n_head, b.n_head_kv, b.head_dim,
                                   TensorType::F16, TensorType::F16);
    const int calls = b.n_tokens >= 2048 ? 10 : 40;
    std::vector<float> want, got;
    const double per_query = time_attention(c, AttentionKernel::kDecode, calls, &want);
    if (per_query < 0)
      GTEST_SKIP() << "no timing (timestamps, the deadline) on " << device().info().name;
    std::string line;
    for (uint32_t rows : {0u, 4u, 2u, 1u}) {
      const ForcedRows forced(rows);
      const double tiled = time_attention(c, AttentionKernel::kTiled, calls, &got);
      const std::vector<double> ref(want.begin(), want.end());
      char part[96];
      std::snprintf(part, sizeof(part), "  rows/inv %u: %9.1f us (x%.1f, max diff %.1e)", rows,
                    tiled, per_query / tiled, max_abs_diff(got, ref));
      line += part;
      EXPECT_LT(max_abs_diff(got, ref), 1e-3) << b.model << " " << b.n_tokens << " rows " << rows;
    }
    std::printf("%-13s f16 %4lld tokens from %4d: per-query %9.1f us;%s\n", b.model,
                static_cast<long long>(b.n_tokens), b.first, per_query, line.c_str());
  }
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
