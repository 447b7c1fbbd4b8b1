// The staggered-sequences check of the engine tests on the GPU backends
// (CUDA, Vulkan): greedy sequences of different prompt lengths, each run
// alone in its own engine, then started one every other step in one shared
// engine; each sequence's tokens must equal its solo run's, bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/runtime_testutil.h"

namespace minfer::runtime::testing {

using SequenceTokens = std::map<SequenceId, std::vector<int32_t>>;

// Steps `e` until it is idle (at most 10,000 steps), adding each
// sequence's generated tokens to `out`.
inline SequenceTokens run_to_idle(Engine& e, SequenceTokens out = {}) {
  for (int i = 0; i < 10000 && !e.idle(); ++i) {
    auto events = e.step();
    EXPECT_TRUE(events.is_ok()) << events.message();
    if (!events) break;
    for (const SequenceEvent& ev : *events) {
      if (ev.has_token) out[ev.id].push_back(ev.token);
    }
  }
  EXPECT_TRUE(e.idle());
  return out;
}

// n_sequences prompts of 3, 16, 29, ... tokens, each generating max_tokens
// greedily under options `o`: alone, then staggered in one engine.
inline void expect_staggered_tokens_equal_alone(const model::Model& m, const EngineOptions& o,
                                                int n_sequences, int max_tokens) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n_sequences; ++i) prompts.push_back(prompt_tokens(3 + 13 * i, 30 + i));
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    auto e = Engine::create(m, o);
    ASSERT_TRUE(e.is_ok()) << e.message();
    const SequenceId id = *(*e)->add({p, greedy(), max_tokens});
    alone.push_back(run_to_idle(**e)[id]);
  }
  auto e = Engine::create(m, o);
  ASSERT_TRUE(e.is_ok()) << e.message();
  SequenceTokens got;
  std::vector<SequenceId> ids;
  for (const auto& p : prompts) {  // one new sequence every other step
    ids.push_back(*(*e)->add({p, greedy(), max_tokens}));
    for (int k = 0; k < 2; ++k) {
      auto events = (*e)->step();
      ASSERT_TRUE(events.is_ok()) << events.message();
      for (const SequenceEvent& ev : *events) {
        if (ev.has_token) got[ev.id].push_back(ev.token);
      }
    }
  }
  got = run_to_idle(**e, got);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[ids[i]], alone[i]) << "sequence " << i;
    EXPECT_EQ(got[ids[i]].size(), static_cast<size_t>(max_tokens)) << "sequence " << i;
  }
}

}  // namespace minfer::runtime::testing
