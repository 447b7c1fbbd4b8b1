// The engine over tensor-parallel CPU ranks (docs/PARALLEL.md): batching,
// paged KV and chunked prefill work unchanged above the split, and a
// sequence's greedy tokens batched with others equal its solo run in the
// same configuration (batch invariance holds within 2 ranks as within 1).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/runtime_testutil.h"

namespace minfer::runtime {
namespace {

using testing::greedy;

EngineOptions engine_options(int ranks) {
  EngineOptions o;
  o.n_slots = 4;
  o.n_ctx = 128;
  o.page_size = 8;
  o.n_threads = 2;
  o.gpu = false;
  o.tensor_parallel = ranks;
  return o;
}

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

Request request(const std::vector<int32_t>& prompt) {
  Request r{prompt, greedy(), 12};
  r.ignore_eog = true;
  return r;
}

// Each prompt's tokens alone, then all prompts in one engine whose steps
// (max_batch 12) mix prompt chunks and decodes.
void expect_batched_equal_solo(const model::Model& m, int ranks) {
  const std::vector<std::vector<int32_t>> prompts = {
      testing::prompt_tokens(5, 2), testing::prompt_tokens(27, 3), testing::prompt_tokens(14, 4)};
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    auto e = Engine::create(m, engine_options(ranks));
    ASSERT_TRUE(e.is_ok()) << e.message();
    auto id = (*e)->add(request(p));
    ASSERT_TRUE(id.is_ok()) << id.message();
    alone.push_back(run_all(**e)[*id]);
  }
  EngineOptions o = engine_options(ranks);
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
    EXPECT_EQ(together[ids[i]].size(), 12u) << "sequence " << i;
  }
}

TEST(EngineTensorParallel, BatchedSequencesGiveTheirTokensAlone) {
  for (const char* shape : {"tiny-qwen2", "tiny-gemma3", "tiny-qwen3moe"}) {
    SCOPED_TRACE(shape);
    expect_batched_equal_solo(testing::tiny_model(shape, 9), 2);
  }
}

// Q8_0 weights: the ranks multiply the same blocks as one rank and sum the
// two halves (tests/model/tensor_parallel_test.cpp), so the greedy tokens
// match one rank's on this file.
TEST(EngineTensorParallel, TwoRanksDecodeOneRanksTokens) {
  const model::Model& m = testing::tiny_model("tiny-llama", 9);
  std::vector<std::vector<int32_t>> out;
  for (int ranks : {1, 2, 4}) {
    auto e = Engine::create(m, engine_options(ranks));
    ASSERT_TRUE(e.is_ok()) << e.message();
    auto id = (*e)->add(request(testing::prompt_tokens(20, 7)));
    ASSERT_TRUE(id.is_ok()) << id.message();
    out.push_back(run_all(**e)[*id]);
  }
  EXPECT_EQ(out[1], out[0]);
  EXPECT_EQ(out[2], out[0]);
}

}  // namespace
}  // namespace minfer::runtime
