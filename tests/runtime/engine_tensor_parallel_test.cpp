// The engine over tensor-parallel CPU ranks (docs/PARALLEL.md): batching,
// paged KV and chunked prefill work unchanged above the split, and a
// sequence's greedy tokens beside others equal its solo run in the same
// configuration (batch invariance holds within 2 ranks as within 1).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/runtime_testutil.h"
#include "runtime/staggered_testutil.h"

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

// Sequences started one every other step (prompt chunks and decodes share
// steps) give the tokens each gives alone, over 2 ranks.
TEST(EngineTensorParallel, StaggeredSequencesGiveTheirTokensAlone) {
  for (const char* shape : {"tiny-qwen2", "tiny-gemma3", "tiny-qwen3moe"}) {
    SCOPED_TRACE(shape);
    EngineOptions o = engine_options(2);
    o.max_batch = 12;
    testing::expect_staggered_tokens_equal_alone(testing::tiny_model(shape, 9), o, 3, 12);
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
    Request r{testing::prompt_tokens(20, 7), greedy(), 12};
    r.ignore_eog = true;
    auto id = (*e)->add(r);
    ASSERT_TRUE(id.is_ok()) << id.message();
    out.push_back(testing::run_to_idle(**e)[*id]);
  }
  EXPECT_EQ(out[1], out[0]);
  EXPECT_EQ(out[2], out[0]);
}

}  // namespace
}  // namespace minfer::runtime
