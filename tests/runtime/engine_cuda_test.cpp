// The engine on the GPU (skipped without a CUDA device): batch invariance.
//   - Runner level, bit for bit: a sequence's logits rows are the same alone
//     and in a batch with another sequence's 150-token prompt chunk (past the
//     tensor-core size) or decode token, for its prefill and its next decode
//     step; with MINFER_BATCH_INVARIANT=0 the same check finds differences
//     (the check can fail).
//   - Paged rows on the GPU follow the CPU's (the fused q|k|v node's cells),
//     and a one-slot engine's prompt rows do (the tiled kernel over pages).
//   - Engine level: twelve staggered sequences of different prompt lengths,
//     greedy, give their solo tokens, with f16 and q8_0 caches, on Q8_0 and
//     Q4_K_M (Q6_K rows and types the int8 GEMVs lack) models, and on
//     gpt-oss (sinks, YaRN, swiglu_oai) with MXFP4 experts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "runtime/engine.h"
#include "runtime/forward.h"
#include "runtime/paged_testutil.h"
#include "runtime/runtime_testutil.h"
#include "runtime/staggered_testutil.h"

namespace minfer::runtime {
namespace {

#define SKIP_WITHOUT_CUDA()                                                       \
  do {                                                                            \
    if (!::minfer::cuda::available()) {                                           \
      GTEST_SKIP() << "no CUDA device: " << ::minfer::cuda::unavailable_reason(); \
    }                                                                             \
  } while (0)

TEST(CudaEngine, LogitsRowsAreBatchInvariantBitForBit) {
  SKIP_WITHOUT_CUDA();
  for (const char* shape : {"tiny-qwen2", "tiny-gemma3", "tiny-qwen3moe", "tiny-gpt-oss"}) {
    SCOPED_TRACE(shape);
    const model::Model& m = testing::tiny_model(shape, 9);
    ASSERT_TRUE(testing::PagedRunner(m, true, true).gpu()) << "the GPU did not take part";
    EXPECT_EQ(testing::differences(m, true, true), 0);
    // The same check with the batch-dependent kernels allowed finds the
    // difference (a tensor-core GEMM for the 156-token batch).
    EXPECT_GT(testing::differences(m, false, true), 0);
  }
}

// max_i |a_i - b_i| / (max b - min b), worst over the rows.
double worst_rel(const std::vector<std::vector<float>>& a,
                 const std::vector<std::vector<float>>& b) {
  double worst = a.size() == b.size() ? 0.0 : 1e9;
  for (size_t r = 0; r < a.size() && r < b.size(); ++r) {
    const auto [lo, hi] = std::minmax_element(b[r].begin(), b[r].end());
    double d = 0.0;
    for (size_t i = 0; i < b[r].size(); ++i) d = std::max(d, std::fabs(double(a[r][i]) - b[r][i]));
    worst = std::max(worst, d / std::max(1e-6, double(*hi - *lo)));
  }
  return worst;
}

// The GPU's paged rows (its fused q|k|v node storing at the cells: the
// one-token GEMV, or the tensor-core projections for a batch and for every
// batch-invariant step) follow the CPU's unfused paged pass: a prompt chunk
// beside another sequence's, both decoding, then one alone. Both quantize
// activations to int8 (rel < 5e-2, the bound of the int8 GEMV against the
// reference); a wrong cell or rotation moves a row by far more. The MoE
// model has f32 weights: with quantized activations on both sides, rounded
// differently, a router near-tie sends a token to another expert on one of
// them (rel 0.1-0.5), which says nothing about the cells.
TEST(CudaEngine, PagedRowsFollowTheCpu) {
  SKIP_WITHOUT_CUDA();
  const std::vector<std::vector<testing::Part>> steps = {
      {{1, 40, testing::prompt_tokens(150, 2), 0}, {0, 5, testing::prompt_tokens(6, 1), 0}},
      {{1, 40, {23}, 150}, {0, 5, {17}, 6}},
      {{0, 5, {29}, 7}},
      {{0, 5, {31}, 8}, {1, 40, {37}, 151}}};
  for (const char* shape : {"tiny-qwen2", "tiny-qwen3", "tiny-gemma3", "tiny-qwen3moe"}) {
    const bool moe = std::string(shape) == "tiny-qwen3moe";
    const model::Model& m = testing::tiny_model(shape, 9, moe ? "F32" : "Q8_0");
    for (bool invariant : {true, false}) {
      SCOPED_TRACE(std::string(shape) + (invariant ? " invariant" : " batch-dependent"));
      testing::PagedRunner cpu(m, true, false), gpu(m, invariant, true);
      ASSERT_TRUE(gpu.gpu()) << "the GPU did not take part";
      for (size_t i = 0; i < steps.size(); ++i) {
        const double rel = worst_rel(gpu.run(steps[i]), cpu.run(steps[i]));
        std::printf("  %s %s step %zu rel %.2e\n", shape, invariant ? "invariant" : "dependent", i,
                    rel);
        EXPECT_LT(rel, 5e-2) << "step " << i;
      }
    }
  }
}

using testing::greedy;

// A one-slot engine's prompt on the GPU (the tiled attention kernel over
// its pages: GraphParams::one_sequence, batch invariance off) follows the
// CPU's rows at every position: chunks of 64 tokens, the later ones reading
// the earlier ones' pages, the last one padded up to its step bucket; f16 and
// q8_0 caches, a sliding window (Gemma 3).
std::vector<std::vector<float>> prompt_rows(const model::Model& m, bool gpu, quant::TensorType kv,
                                            const std::vector<int32_t>& prompt) {
  EngineOptions o;
  o.n_slots = 1;
  o.n_ctx = 256;
  o.page_size = 16;
  o.max_batch = 64;
  o.gpu = gpu;
  o.k_type = o.v_type = kv;
  o.options.batch_invariant = false;
  std::vector<std::vector<float>> rows;
  auto e = Engine::create(m, o);
  EXPECT_TRUE(e.is_ok()) << e.message();
  if (!e) return rows;
  EXPECT_EQ((*e)->runner().gpu(), gpu);
  Request r(prompt, greedy(), 0);
  const auto n_vocab = static_cast<size_t>(m.hparams().n_vocab);
  r.on_prompt_logits = [&](int64_t pos, std::span<const float> got) {
    EXPECT_EQ(pos, static_cast<int64_t>(rows.size()));
    for (size_t i = 0; i < got.size(); i += n_vocab) rows.emplace_back(&got[i], &got[i] + n_vocab);
    return Status::ok();
  };
  EXPECT_TRUE((*e)->add(std::move(r)).is_ok());
  testing::run_to_idle(**e);
  return rows;
}

TEST(CudaEngine, OneSequencePromptRowsFollowTheCpu) {
  SKIP_WITHOUT_CUDA();
  const std::vector<int32_t> prompt = testing::prompt_tokens(150, 4);
  for (const char* shape : {"tiny-qwen2", "tiny-qwen3", "tiny-gemma3"}) {
    const model::Model& m = testing::tiny_model(shape, 9);
    for (quant::TensorType kv : {quant::TensorType::F16, quant::TensorType::Q8_0}) {
      SCOPED_TRACE(std::string(shape) + " cache " + std::string(quant::type_name(kv)));
      const auto gpu = prompt_rows(m, true, kv, prompt);
      const auto cpu = prompt_rows(m, false, kv, prompt);
      ASSERT_EQ(gpu.size(), prompt.size());
      const double rel = worst_rel(gpu, cpu);
      std::printf("  %s %s rel %.2e\n", shape, std::string(quant::type_name(kv)).c_str(), rel);
      EXPECT_LT(rel, 5e-2);
    }
  }
}

// Twelve slots over pages of 8; a batch may hold a whole long prompt beside
// the decoders.
EngineOptions staggered_options(quant::TensorType kv) {
  EngineOptions o;
  o.n_slots = 12;
  o.n_ctx = 256;
  o.page_size = 8;
  o.max_batch = 160;
  o.k_type = o.v_type = kv;
  return o;
}

TEST(CudaEngine, StaggeredSequencesGiveTheirTokensAlone) {
  SKIP_WITHOUT_CUDA();
  struct Case {
    const char* shape;
    const char* quant;
  };
  for (const Case& c : {Case{"tiny-qwen3", "Q8_0"}, Case{"tiny-gemma3", "Q4_K_M"},
                        Case{"tiny-qwen3moe", "Q4_K_M"}}) {
    const model::Model& m = testing::tiny_model(c.shape, 9, c.quant);
    for (quant::TensorType kv : {quant::TensorType::F16, quant::TensorType::Q8_0}) {
      SCOPED_TRACE(std::string(c.shape) + " " + c.quant + " cache " +
                   std::string(quant::type_name(kv)));
      testing::expect_staggered_tokens_equal_alone(m, staggered_options(kv), 12, 12);
    }
  }
}

constexpr int kGptOssSequences = 12, kGptOssTokens = 12;

// Sequence i of the gpt-oss check: expect_staggered_tokens_equal_alone's
// prompt, generating all its tokens: the random tiny model draws its
// end-of-generation tokens within a few steps, which would end most
// sequences before they reach the batches worth checking.
Request gpt_oss_request(int i) {
  Request r(testing::prompt_tokens(3 + 13 * i, 30 + i), greedy(), kGptOssTokens);
  r.ignore_eog = true;
  return r;
}

// gpt-oss (sinks on both layers, a window of 8 on one, YaRN, swiglu_oai,
// MXFP4 experts) as above: each sequence alone, then one started every
// other step in one engine; its tokens the same, all of them.
TEST(CudaEngine, GptOssStaggeredSequencesGiveTheirTokensAlone) {
  SKIP_WITHOUT_CUDA();
  const model::Model& m = testing::tiny_model("tiny-gpt-oss", 9, "MXFP4");
  for (quant::TensorType kv : {quant::TensorType::F16, quant::TensorType::Q8_0}) {
    SCOPED_TRACE(std::string("cache ") + std::string(quant::type_name(kv)));
    std::vector<std::vector<int32_t>> alone;
    for (int i = 0; i < kGptOssSequences; ++i) {
      auto e = Engine::create(m, staggered_options(kv));
      ASSERT_TRUE(e.is_ok()) << e.message();
      auto id = (*e)->add(gpt_oss_request(i));
      ASSERT_TRUE(id.is_ok()) << id.message();
      alone.push_back(testing::run_to_idle(**e)[*id]);
    }
    auto e = Engine::create(m, staggered_options(kv));
    ASSERT_TRUE(e.is_ok()) << e.message();
    testing::SequenceTokens got;
    std::vector<SequenceId> ids;
    for (int i = 0; i < kGptOssSequences; ++i) {
      auto id = (*e)->add(gpt_oss_request(i));
      ASSERT_TRUE(id.is_ok()) << id.message();
      ids.push_back(*id);
      for (int k = 0; k < 2; ++k) {
        auto events = (*e)->step();
        ASSERT_TRUE(events.is_ok()) << events.message();
        for (const SequenceEvent& ev : *events) {
          if (ev.has_token) got[ev.id].push_back(ev.token);
        }
      }
    }
    got = testing::run_to_idle(**e, got);
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(got[ids[i]], alone[i]) << "sequence " << i;
      EXPECT_EQ(got[ids[i]].size(), size_t{kGptOssTokens}) << "sequence " << i;
    }
  }
}

}  // namespace
}  // namespace minfer::runtime
