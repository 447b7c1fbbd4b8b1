// The engine's per-request extras: log-probabilities of each drawn token,
// constraints that mask the draws, and a failed draw that ends one sequence
// while the others go on.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "runtime/engine.h"
#include "runtime/logprobs.h"
#include "runtime/runtime_testutil.h"
#include "runtime/session.h"

namespace minfer::runtime {
namespace {

const model::Model& tiny() {
  return testing::tiny_model("tiny-qwen2", /*seed=*/9);
}

EngineOptions options() {
  EngineOptions o;
  o.n_slots = 4;
  o.n_ctx = 128;
  o.page_size = 8;
  o.n_threads = 2;
  o.gpu = false;
  return o;
}

using testing::greedy;

std::map<SequenceId, std::vector<SequenceEvent>> run_all(Engine& e) {
  std::map<SequenceId, std::vector<SequenceEvent>> out;
  for (int i = 0; i < 1000 && !e.idle(); ++i) {
    auto events = e.step();
    EXPECT_TRUE(events.is_ok()) << events.message();
    if (!events) break;
    for (const SequenceEvent& ev : *events) out[ev.id].push_back(ev);
  }
  EXPECT_TRUE(e.idle());
  return out;
}

std::vector<int32_t> tokens_of(const std::vector<SequenceEvent>& events) {
  std::vector<int32_t> t;
  for (const SequenceEvent& e : events) {
    if (e.has_token) t.push_back(e.token);
  }
  return t;
}

TEST(LogSoftmax, MatchesTheFormulaAndOrdersTies) {
  const std::vector<float> row = {1.0f, 3.0f, NAN, 3.0f, -INFINITY, 0.5f};
  auto l = LogSoftmax::of(row);
  ASSERT_TRUE(l.is_ok()) << l.message();
  const double z = std::exp(1.0) + 2 * std::exp(3.0) + std::exp(0.5);
  EXPECT_NEAR(l->logprob(0), 1.0 - std::log(z), 1e-6);
  EXPECT_NEAR(l->logprob(3), 3.0 - std::log(z), 1e-6);
  EXPECT_EQ(l->logprob(2), -INFINITY);  // NaN counts as -inf
  EXPECT_EQ(l->logprob(4), -INFINITY);
  EXPECT_EQ(l->logprob(6), -INFINITY);  // outside the row
  const auto top = l->top(3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 1);  // the tie 1 / 3 goes to the lower id first
  EXPECT_EQ(top[1].id, 3);
  EXPECT_EQ(top[2].id, 0);
  EXPECT_EQ(l->top(100).size(), row.size());
  EXPECT_FALSE(LogSoftmax::of(std::vector<float>{NAN, -INFINITY}).is_ok());
}

// The first drawn token's log-probabilities equal the log-softmax of the
// prompt's last logits as a Session computes them alone; greedy tokens are
// the same with and without log-probs (logits on the host vs argmax).
TEST(EngineLogprobs, EqualTheSessionsLogSoftmax) {
  const model::Model& m = tiny();
  const auto prompt = testing::prompt_tokens(13, 4);
  SessionOptions so;
  so.n_ctx = 128;
  so.n_threads = 2;
  so.gpu = false;
  auto session = Session::create(m, so);
  ASSERT_TRUE(session.is_ok()) << session.message();
  auto logits = (*session)->eval(prompt);
  ASSERT_TRUE(logits.is_ok()) << logits.message();
  double max = -INFINITY, sum = 0;
  for (float v : *logits) max = std::max(max, static_cast<double>(v));
  for (float v : *logits) sum += std::exp(v - max);

  auto e = Engine::create(m, options());
  ASSERT_TRUE(e.is_ok()) << e.message();
  Request with(prompt, greedy(), 6);
  with.top_logprobs = 5;
  auto a = (*e)->add(with);
  auto b = (*e)->add(Request(prompt, greedy(), 6));
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  auto done = run_all(**e);
  const auto& ev = done[*a];
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(tokens_of(ev), tokens_of(done[*b]));
  const SequenceEvent& first = ev.front();
  ASSERT_EQ(first.top_logprobs.size(), 5u);
  EXPECT_EQ(first.top_logprobs[0].id, first.token);  // greedy draws the most likely
  EXPECT_FLOAT_EQ(first.top_logprobs[0].logprob, first.logprob);
  for (const TokenLogprob& t : first.top_logprobs) {
    const double want = (*logits)[static_cast<size_t>(t.id)] - max - std::log(sum);
    EXPECT_NEAR(t.logprob, want, 1e-3) << "token " << t.id;
  }
  for (size_t i = 1; i < first.top_logprobs.size(); ++i) {
    EXPECT_LE(first.top_logprobs[i].logprob, first.top_logprobs[i - 1].logprob);
  }
  EXPECT_TRUE(done[*b].front().top_logprobs.empty());  // not asked for
  Request bad(prompt, greedy(), 6);
  bad.top_logprobs = Request::kMaxTopLogprobs + 1;
  EXPECT_FALSE((*e)->add(bad).is_ok());
}

// Allows only the tokens of a set, and records what it was told.
class OnlyThese : public TokenConstraint {
 public:
  explicit OnlyThese(std::set<int32_t> allowed) : allowed_(std::move(allowed)) {}
  Status mask(std::span<float> logits) const override {
    if (allowed_.empty()) return Status::invalid_argument("nothing may come next");
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!allowed_.count(static_cast<int32_t>(i))) logits[i] = -INFINITY;
    }
    return Status::ok();
  }
  Status accept(int32_t token) override {
    if (!allowed_.count(token)) return Status::invalid_argument("not allowed");
    accepted.push_back(token);
    return Status::ok();
  }
  std::vector<int32_t> accepted;

 private:
  std::set<int32_t> allowed_;
};

TEST(EngineConstraint, MasksEachDrawAndAFailureEndsOnlyItsSequence) {
  const model::Model& m = tiny();
  auto e = Engine::create(m, options());
  ASSERT_TRUE(e.is_ok()) << e.message();
  const auto prompt = testing::prompt_tokens(9, 2);
  SamplerParams sampled;  // temperature 0.8: draws from what the mask leaves
  sampled.seed = 5;
  Request masked(prompt, sampled, 10);
  auto only = std::make_shared<OnlyThese>(std::set<int32_t>{7, 11, 12});
  masked.constraint = only;
  Request none(prompt, greedy(), 10);
  none.constraint = std::make_shared<OnlyThese>(std::set<int32_t>{});
  auto a = (*e)->add(masked);
  auto b = (*e)->add(none);
  auto c = (*e)->add(Request(prompt, greedy(), 10));
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  auto done = run_all(**e);

  const auto got = tokens_of(done[*a]);
  ASSERT_EQ(got.size(), 10u);
  for (int32_t t : got) EXPECT_TRUE(t == 7 || t == 11 || t == 12) << t;
  EXPECT_EQ(only->accepted, got);

  ASSERT_EQ(done[*b].size(), 1u);
  EXPECT_EQ(done[*b][0].finished, FinishReason::kError);
  EXPECT_NE(done[*b][0].error.find("nothing may come next"), std::string::npos);

  // The third, beside both, equals its run alone.
  auto solo = Engine::create(m, options());
  ASSERT_TRUE(solo.is_ok());
  auto s = (*solo)->add(Request(prompt, greedy(), 10));
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(tokens_of(done[*c]), tokens_of(run_all(**solo)[*s]));
}

// A request that ignores end-of-generation tokens (a benchmark's) goes on
// past them to its budget; one that does not stops at the first. A cap on
// reuse keeps later prompt pages from being taken from the cache.
TEST(EngineRequest, IgnoreEogGoesOnAndMaxReusedCapsTheReuse) {
  const model::Model& m = tiny();
  const int32_t eos = m.tokenizer().eos();
  ASSERT_GE(eos, 0);
  ASSERT_TRUE(m.tokenizer().is_eog(eos));
  auto e = Engine::create(m, options());
  ASSERT_TRUE(e.is_ok()) << e.message();
  const auto prompt = testing::prompt_tokens(33, 4);
  Request stops(prompt, greedy(), 5), goes_on(prompt, greedy(), 5);
  stops.constraint = std::make_shared<OnlyThese>(std::set<int32_t>{eos});
  goes_on.constraint = std::make_shared<OnlyThese>(std::set<int32_t>{eos});
  goes_on.ignore_eog = true;
  auto a = (*e)->add(stops);
  auto b = (*e)->add(goes_on);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  auto done = run_all(**e);
  EXPECT_TRUE(tokens_of(done[*a]).empty());
  EXPECT_EQ(done[*a].back().finished, FinishReason::kStop);
  EXPECT_EQ(tokens_of(done[*b]), std::vector<int32_t>(5, eos));
  EXPECT_EQ(done[*b].back().finished, FinishReason::kLength);

  // The prompt's 4 whole pages (8 tokens each) are cached now: a cap of 20
  // tokens takes 2 of them, no cap 4.
  Request capped(prompt, greedy(), 2);
  capped.max_reused = 20;
  auto c = (*e)->add(capped);
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(run_all(**e)[*c].back().reused_tokens, 16);
  auto d = (*e)->add(Request(prompt, greedy(), 2));
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(run_all(**e)[*d].back().reused_tokens, 32);
}

}  // namespace
}  // namespace minfer::runtime
