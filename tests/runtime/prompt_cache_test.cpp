// PromptCache: a conversation's next prompt evaluates only what differs from
// the cached tokens, and the logits after that reuse equal a fresh session's
// over the whole prompt (the reuse changes nothing but the work).
#include "runtime/prompt_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "runtime/runtime_testutil.h"

namespace minfer::runtime {
namespace {

std::unique_ptr<Session> session_of(const model::Model& m) {
  SessionOptions so;
  so.n_ctx = 128;
  so.n_threads = 2;
  so.gpu = false;
  auto s = Session::create(m, so);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return s ? std::move(*s) : nullptr;
}

std::vector<float> last_logits(Session& s, std::span<const int32_t> tokens) {
  auto l = s.eval(tokens, 1);
  EXPECT_TRUE(l.is_ok()) << l.message();
  return l ? std::vector<float>(l->begin(), l->end()) : std::vector<float>{};
}

TEST(PromptCache, ReusesTheCommonPrefixAndGivesTheSameLogits) {
  const model::Model& m = testing::tiny_model("tiny-qwen2");
  auto s = session_of(m);
  ASSERT_NE(s, nullptr);
  PromptCache cache;
  const std::vector<int32_t> turn1 = testing::prompt_tokens(20, 1);
  auto fresh = cache.prepare(*s, turn1);
  EXPECT_EQ(fresh.size(), turn1.size()) << "nothing cached yet";
  const std::vector<int32_t> first(fresh.begin(), fresh.end());
  last_logits(*s, first);
  cache.commit(*s, first);
  EXPECT_EQ(s->n_past(), 20);

  // The next prompt: the first turn, a reply, a new turn; 8 of the first
  // turn's tokens differ from position 12 on (as a re-rendered template may).
  std::vector<int32_t> turn2(turn1.begin(), turn1.begin() + 12);
  for (int32_t t : testing::prompt_tokens(15, 2)) turn2.push_back(t);
  fresh = cache.prepare(*s, turn2);
  EXPECT_EQ(fresh.size(), turn2.size() - 12);
  EXPECT_EQ(s->n_past(), 12);
  const std::vector<int32_t> rest(fresh.begin(), fresh.end());
  const std::vector<float> reused = last_logits(*s, rest);
  cache.commit(*s, rest);

  auto whole = session_of(m);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(last_logits(*whole, turn2), reused) << "the reused cache changed the logits";

  // The same prompt again still evaluates its last token.
  fresh = cache.prepare(*s, turn2);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0], turn2.back());
  EXPECT_EQ(s->n_past(), static_cast<int64_t>(turn2.size()) - 1);

  cache.clear();
  s->reset();
  EXPECT_EQ(cache.prepare(*s, turn2).size(), turn2.size());
}

}  // namespace
}  // namespace minfer::runtime
