// Speculative decoding on the engine: prompt-lookup drafts, verification of
// a draft in one chunk, and the rollback of rejected positions. With batch
// invariance on (the engine's default), a sequence's tokens — and its
// log-probabilities, bit for bit — must be those of decoding one token per
// step, greedy or sampled, alone or in company.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "runtime/engine.h"
#include "runtime/ngram_draft.h"
#include "runtime/runtime_testutil.h"
#include "test_models.h"

namespace minfer::runtime {
namespace {

using testing::greedy;
using testing::prompt_tokens;

TEST(NgramDraft, ProposesWhatFollowedTheLongestRecentMatch) {
  // "1 2 3 4 9 | 7 2 3 4 5 6 | 2 3 4": the 3-gram "2 3 4" last occurred
  // before "5 6".
  const std::vector<int32_t> t = {1, 2, 3, 4, 9, 7, 2, 3, 4, 5, 6, 2, 3, 4};
  EXPECT_EQ(ngram_draft(t, {1, 3}, 8), (std::vector<int32_t>{5, 6, 2, 3, 4}));
  EXPECT_EQ(ngram_draft(t, {1, 3}, 2), (std::vector<int32_t>{5, 6}));
  // A 4-gram "3 4 ..." never recurs; min 4 finds nothing.
  EXPECT_TRUE(ngram_draft(t, {4, 4}, 8).empty());
  EXPECT_TRUE(ngram_draft(t, {1, 3}, 0).empty());
  EXPECT_TRUE(ngram_draft(std::vector<int32_t>{5}, {1, 3}, 4).empty());
  // The longest n wins over a more recent shorter match: "8 4" occurred
  // before "1", the 1-gram "4" most recently before "7".
  const std::vector<int32_t> u = {8, 4, 1, 4, 7, 8, 4};
  EXPECT_EQ(ngram_draft(u, {1, 2}, 1), (std::vector<int32_t>{1}));
  EXPECT_EQ(ngram_draft(u, {1, 1}, 1), (std::vector<int32_t>{7}));
  EXPECT_TRUE(NgramDrafter::check({0, 2}).code() == StatusCode::kInvalidArgument);
  EXPECT_TRUE(NgramDrafter::check({3, 2}).code() == StatusCode::kInvalidArgument);
  EXPECT_TRUE(NgramDrafter::check({1, 64}).is_ok());
}

// Drafts from known continuations (a run without speculation): correct for
// `good` tokens, then one wrong token, so that every draft of more than
// `good` tokens is rejected partway. A sequence without a script gets none.
class ScriptedDrafter final : public Drafter {
 public:
  explicit ScriptedDrafter(int good) : good_(good) {}
  std::map<SequenceId, std::vector<int32_t>> scripts;  // prompt + output
  int64_t released = 0;

  Result<std::vector<int32_t>> draft(SequenceId id, std::span<const int32_t> tokens,
                                     const SpeculativeParams&, int64_t max_tokens) override {
    auto it = scripts.find(id);
    if (it == scripts.end()) return std::vector<int32_t>{};
    const std::vector<int32_t>& s = it->second;
    EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), s.begin()))
        << "the drafter sees only emitted tokens";
    std::vector<int32_t> d;
    for (size_t p = tokens.size(); p < s.size() && static_cast<int64_t>(d.size()) < max_tokens;
         ++p) {
      d.push_back(static_cast<int64_t>(d.size()) < good_ ? s[p] : (s[p] + 1) % 200 + 3);
    }
    return d;
  }
  void release(SequenceId) override { ++released; }

 private:
  int good_;
};

EngineOptions options() {
  EngineOptions o;
  o.n_slots = 4;
  o.n_ctx = 96;
  o.page_size = 8;
  o.n_threads = 2;
  o.gpu = false;
  return o;
}

struct Outcome {
  std::map<SequenceId, std::vector<int32_t>> tokens;
  std::map<SequenceId, std::vector<float>> logprobs;  // with top_logprobs >= 0
  std::map<SequenceId, FinishReason> ends;
  std::map<SequenceId, SequenceEvent> last;
  EngineStats stats;
};

// Adds requests[i] at step arrivals[i] and steps until idle. `check_pages`:
// after each step, one running sequence holds just the pages of its
// computed positions (nothing left over from rejected drafts).
Outcome run(const model::Model& m, const EngineOptions& o, const std::vector<Request>& requests,
            const std::vector<int>& arrivals, bool check_pages = false) {
  auto e = Engine::create(m, o);
  EXPECT_TRUE(e.is_ok()) << e.message();
  Outcome out;
  size_t next = 0;
  for (int step = 0; step < 2000 && (next < requests.size() || !(*e)->idle()); ++step) {
    while (next < requests.size() && arrivals[next] <= step) {
      auto id = (*e)->add(requests[next++]);
      EXPECT_TRUE(id.is_ok()) << id.message();
    }
    auto events = (*e)->step();
    EXPECT_TRUE(events.is_ok()) << events.message();
    if (!events) break;
    for (const SequenceEvent& ev : *events) {
      if (ev.has_token) {
        out.tokens[ev.id].push_back(ev.token);
        out.logprobs[ev.id].push_back(ev.logprob);
        for (const TokenLogprob& t : ev.top_logprobs) out.logprobs[ev.id].push_back(t.logprob);
      }
      if (ev.finished != FinishReason::kNone) out.ends[ev.id] = ev.finished;
      out.last[ev.id] = ev;
    }
    const EngineStats st = (*e)->stats();
    if (check_pages && st.running == 1 && !out.last.empty()) {
      const SequenceEvent& ev = out.last.rbegin()->second;
      const int64_t computed = ev.prompt_tokens + ev.generated - 1;
      EXPECT_EQ(st.pool.referenced, (computed + o.page_size - 1) / o.page_size)
          << "step " << step << ": pages past the computed positions";
    }
  }
  out.stats = (*e)->stats();
  return out;
}

std::vector<Request> requests_of(const std::vector<std::vector<int32_t>>& prompts, SamplerParams sp,
                                 int max_tokens, int n_max) {
  std::vector<Request> r;
  for (const auto& p : prompts) {
    r.emplace_back(p, sp, max_tokens);
    r.back().speculative.n_max = n_max;
    r.back().top_logprobs = 2;
  }
  return r;
}

// The reference (no speculation), then the same with scripted drafts that
// are right for `good` tokens: tokens, ends and log-probabilities equal.
void expect_speculation_changes_nothing(const model::Model& m, EngineOptions o,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        const std::vector<int>& arrivals, SamplerParams sp,
                                        int max_tokens, int good, int n_max) {
  const Outcome plain = run(m, o, requests_of(prompts, sp, max_tokens, 0), arrivals);
  EXPECT_EQ(plain.stats.drafted_tokens, 0);
  auto drafter = std::make_shared<ScriptedDrafter>(good);
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto& s = drafter->scripts[static_cast<SequenceId>(i)];
    s = prompts[i];
    const auto& out = plain.tokens.at(static_cast<SequenceId>(i));
    s.insert(s.end(), out.begin(), out.end());
  }
  o.drafter = drafter;
  const Outcome spec =
      run(m, o, requests_of(prompts, sp, max_tokens, n_max), arrivals, prompts.size() == 1);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_EQ(spec.ends, plain.ends);
  EXPECT_EQ(spec.logprobs, plain.logprobs) << "log-probabilities differ: not bit for bit";
  EXPECT_GT(spec.stats.drafted_tokens, 0);
  EXPECT_LE(spec.stats.accepted_tokens, spec.stats.drafted_tokens);
  if (good > 0) {
    EXPECT_GT(spec.stats.accepted_tokens, 0);
    EXPECT_LT(spec.stats.steps, plain.stats.steps) << "accepted drafts save steps";
  } else {
    EXPECT_EQ(spec.stats.accepted_tokens, 0);
  }
  EXPECT_EQ(drafter->released, static_cast<int64_t>(prompts.size()));
  int64_t drafted = 0, accepted = 0;
  for (const auto& [id, ev] : spec.last) {
    EXPECT_LE(ev.draft_accepted, ev.drafted);
    EXPECT_LE(ev.decode_steps, ev.generated);
    drafted += ev.drafted;
    accepted += ev.draft_accepted;
  }
  EXPECT_EQ(drafted, spec.stats.drafted_tokens);
  EXPECT_EQ(accepted, spec.stats.accepted_tokens);
}

TEST(EngineSpeculative, OneGreedySequenceIsBitExactAndRollsBack) {
  const model::Model& m = testing::tiny_model("tiny-qwen2", 9);
  for (int good : {0, 2, 5, 100}) {  // all rejected .. all accepted
    SCOPED_TRACE(good);
    expect_speculation_changes_nothing(m, options(), {prompt_tokens(11, 3)}, {0}, greedy(), 40,
                                       good, 4);
  }
}

TEST(EngineSpeculative, SampledWithASeedIsBitExact) {
  const model::Model& m = testing::tiny_model("tiny-gemma3", 9);
  SamplerParams sp;
  sp.temperature = 1.2f;
  sp.top_k = 20;
  sp.repeat_penalty = 1.1f;
  sp.seed = 1234;
  expect_speculation_changes_nothing(m, options(), {prompt_tokens(9, 4), prompt_tokens(20, 5)},
                                     {0, 3}, sp, 32, 3, 6);
}

TEST(EngineSpeculative, StaggeredSequencesInOneEngineAreBitExact) {
  const model::Model& m = testing::tiny_model("tiny-llama", 9, "Q4_K_M");
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 5; ++i) prompts.push_back(prompt_tokens(3 + 13 * i, 30 + i));
  EngineOptions o = options();
  o.max_batch = 24;  // drafts meet the step's limit beside prompt chunks
  expect_speculation_changes_nothing(m, o, prompts, {0, 2, 4, 6, 8}, greedy(), 30, 3, 8);
  o.decode_per_step = 2;  // the CPU's turn-taking decode
  expect_speculation_changes_nothing(m, o, prompts, {0, 1, 2, 3, 4}, greedy(), 30, 1, 16);
}

TEST(EngineSpeculative, DraftsStopAtTheBudgetAndTheContext) {
  const model::Model& m = testing::tiny_model("tiny-qwen2", 9);
  EngineOptions o = options();
  o.n_ctx = 24;  // a 16-token prompt: the context ends the sequence
  expect_speculation_changes_nothing(m, o, {prompt_tokens(16, 7)}, {0}, greedy(), 50, 100, 16);
  expect_speculation_changes_nothing(m, options(), {prompt_tokens(16, 7)}, {0}, greedy(), 7, 100,
                                     16);
}

TEST(EngineSpeculative, BadSettingsAreRefused) {
  const model::Model& m = testing::tiny_model("tiny-qwen2", 9);
  auto e = Engine::create(m, options());
  ASSERT_TRUE(e.is_ok());
  Request r(prompt_tokens(5, 1), greedy(), 4);
  r.speculative.n_max = -1;
  EXPECT_EQ((*e)->add(r).status().code(), StatusCode::kInvalidArgument);
  r.speculative.n_max = 4;
  r.speculative.p_min = 1.5f;
  EXPECT_EQ((*e)->add(r).status().code(), StatusCode::kInvalidArgument);
}

// Prompt lookup on the real model: a prompt that repeats a list, so that
// the continuation repeats it too and drafts are accepted.
TEST(EngineSpeculative, PromptLookupOnGemma3IsBitExact) {
  const std::string path = minfer::testing::gemma3_model_path();
  ASSERT_FALSE(path.empty()) << minfer::testing::kMissingGemma3;
  auto model = model::Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.message();
  const model::Model& m = **model;
  const char* text =
      "Repeat this list exactly three times: apple, banana, cherry, date, elderberry, fig, "
      "grape.\napple, banana, cherry, date, elderberry, fig, grape.\napple, banana,";
  auto prompt = m.tokenizer().encode(text, true, true);
  ASSERT_TRUE(prompt.is_ok());
  EngineOptions o = options();
  o.n_ctx = 256;
  const Outcome plain = run(m, o, requests_of({*prompt}, greedy(), 48, 0), {0});
  const Outcome spec = run(m, o, requests_of({*prompt}, greedy(), 48, 8), {0});
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_EQ(spec.logprobs, plain.logprobs);
  EXPECT_GT(spec.stats.accepted_tokens, 0);
  EXPECT_LE(spec.stats.accepted_tokens, spec.stats.drafted_tokens);
  EXPECT_LT(spec.stats.steps, plain.stats.steps);
}

}  // namespace
}  // namespace minfer::runtime
