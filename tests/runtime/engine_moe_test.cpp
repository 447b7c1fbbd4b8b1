// The engine on mixture-of-experts models (tiny-qwen3moe, tiny-gpt-oss with
// its sinks and alternating window): a sequence's
// logits and greedy tokens do not depend on what it is batched with, though
// the expert matmuls group the batch's rows by expert (docs/MOE.md).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_options.h"
#include "backend/cpu/matmul_gemm_vnni.h"
#include "runtime/engine.h"
#include "runtime/paged_testutil.h"
#include "runtime/runtime_testutil.h"

namespace minfer::runtime {
namespace {

using testing::greedy;

EngineOptions engine_options() {
  EngineOptions o;
  o.n_slots = 4;
  o.n_ctx = 128;
  o.page_size = 8;
  o.n_threads = 2;
  o.gpu = false;  // the CPU numerics these tests pin
  return o;
}

// Each sequence's greedy tokens after running every request to the end.
std::map<SequenceId, std::vector<int32_t>> run_all(Engine& e) {
  std::map<SequenceId, std::vector<int32_t>> out;
  for (int i = 0; i < 10000 && !e.idle(); ++i) {
    auto events = e.step();
    EXPECT_TRUE(events.is_ok()) << events.message();
    if (!events) break;
    for (const SequenceEvent& ev : *events) {
      if (ev.has_token) out[ev.id].push_back(ev.token);
    }
  }
  EXPECT_TRUE(e.idle()) << "the engine did not drain";
  return out;
}

// Bit for bit: a sequence's logits rows alone equal its rows beside another
// sequence's 150-token chunk and decode token, whose rows share its experts.
// Without batch invariance a batch takes the VNNI GEMM (another summation
// order) in the expert and dense matmuls alike, so the same check can fail.
TEST(EngineMoe, LogitsRowsAreBatchInvariantBitForBit) {
  const std::pair<const char*, const char*> files[] = {{"tiny-qwen3moe", "Q8_0"},
                                                       {"tiny-qwen3moe", "Q4_K_M"},
                                                       {"tiny-qwen3moe", "Q4_0"},
                                                       {"tiny-gpt-oss", "Q8_0"},
                                                       {"tiny-gpt-oss", "MXFP4"}};
  for (const auto& [shape, quant] : files) {
    SCOPED_TRACE(std::string(shape) + " " + quant);
    const model::Model& m = testing::tiny_model(shape, 9, quant);
    EXPECT_EQ(testing::differences(m, true, false), 0);
    EXPECT_EQ(testing::differences(m, true, false, 5), 0);
  }
  if (!cpu::vnni_gemm_available()) return;
  // Weights read from the file rows (no repacking), as the dense test does.
  Options file_rows;
  file_rows.section<cpu::CpuOptions>().cpu_no_repack = true;
  const model::Model& m = testing::tiny_model("tiny-qwen3moe", 9, "Q4_K_M");
  EXPECT_GT(testing::differences(m, false, false, 1, file_rows), 0) << "the check cannot fail";
}

// Four sequences in one engine, chunked so prompts and decodes share steps:
// each gives the greedy tokens it gives alone (all 16: an end-of-generation
// token does not end them, so every sequence decodes as long).
Request request(const std::vector<int32_t>& prompt) {
  Request r{prompt, greedy(), 16};
  r.ignore_eog = true;
  return r;
}

void expect_batched_tokens_equal_solo(const model::Model& m) {
  const std::vector<std::vector<int32_t>> prompts = {
      testing::prompt_tokens(5, 2), testing::prompt_tokens(30, 3), testing::prompt_tokens(17, 4),
      testing::prompt_tokens(9, 5)};
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    auto e = Engine::create(m, engine_options());
    ASSERT_TRUE(e.is_ok()) << e.message();
    auto id = (*e)->add(request(p));
    ASSERT_TRUE(id.is_ok()) << id.message();
    alone.push_back(run_all(**e)[*id]);
  }
  EngineOptions o = engine_options();
  o.max_batch = 12;
  auto e = Engine::create(m, o);
  ASSERT_TRUE(e.is_ok()) << e.message();
  std::vector<SequenceId> ids;
  for (const auto& p : prompts) {
    auto id = (*e)->add(request(p));
    ASSERT_TRUE(id.is_ok()) << id.message();
    ids.push_back(*id);
  }
  auto together = run_all(**e);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(together[ids[i]], alone[i]) << "sequence " << i;
    EXPECT_EQ(together[ids[i]].size(), 16u) << "sequence " << i;
  }
}

TEST(EngineMoe, BatchedSequencesGiveTheirTokensAlone) {
  for (const char* shape : {"tiny-qwen3moe", "tiny-gpt-oss"}) {
    SCOPED_TRACE(shape);
    expect_batched_tokens_equal_solo(testing::tiny_model(shape, 9));
  }
}

}  // namespace
}  // namespace minfer::runtime
