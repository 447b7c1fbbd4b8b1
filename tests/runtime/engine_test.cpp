// The engine: many sequences in one batch over a paged KV pool. Each
// sequence's greedy tokens are checked against a Session running it alone
// (the single-sequence path the reference tests pin), alone in the engine,
// and in company.
#include "runtime/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "backend/cpu/cpu_options.h"
#include "backend/cpu/matmul_gemm_vnni.h"
#include "runtime/generate.h"
#include "runtime/paged_testutil.h"
#include "runtime/runtime_testutil.h"
#include "runtime/session.h"

namespace minfer::runtime {
namespace {

const model::Model& tiny(const std::string& shape) {
  return testing::tiny_model(shape, /*seed=*/9);
}

std::vector<int32_t> prompt_of(int n, int32_t seed) {
  return testing::prompt_tokens(n, seed);
}

// `count` prompts of lengths first, first + step, ..., seeds seed, seed + 1, ...
std::vector<std::vector<int32_t>> prompts_of(int count, int first, int step, int32_t seed) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < count; ++i) prompts.push_back(prompt_of(first + step * i, seed + i));
  return prompts;
}

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

// Runs every request to the end; returns each one's tokens and end.
struct Finished {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  int64_t reused = 0;
};
using Outcomes = std::map<SequenceId, Finished>;

// One step, its events recorded into `out`.
bool step_into(Engine& e, Outcomes& out) {
  auto events = e.step();
  EXPECT_TRUE(events.is_ok()) << events.message();
  if (!events) return false;
  for (const SequenceEvent& ev : *events) {
    if (ev.has_token) out[ev.id].tokens.push_back(ev.token);
    if (ev.finished != FinishReason::kNone) out[ev.id].reason = ev.finished;
    out[ev.id].reused = ev.reused_tokens;
  }
  return true;
}

Outcomes run_all(Engine& e, Outcomes out = {}) {
  for (int i = 0; i < 10000 && !e.idle(); ++i) {
    if (!step_into(e, out)) break;
  }
  EXPECT_TRUE(e.idle()) << "the engine did not drain";
  return out;
}

// Each prompt's greedy tokens, alone in an engine of options `o`.
std::vector<std::vector<int32_t>> solo_runs(const model::Model& m, const EngineOptions& o,
                                            const std::vector<std::vector<int32_t>>& prompts,
                                            int64_t max_tokens) {
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    auto e = Engine::create(m, o);
    EXPECT_TRUE(e.is_ok()) << e.message();
    if (!e) return alone;
    auto id = (*e)->add({p, greedy(), max_tokens});
    EXPECT_TRUE(id.is_ok()) << id.message();
    if (!id) return alone;
    alone.push_back(run_all(**e)[*id].tokens);
  }
  return alone;
}

// One sequence per prompt, started `gap` steps apart, all run to the end:
// each one's greedy tokens, in prompt order.
std::vector<std::vector<int32_t>> staggered_runs(Engine& e,
                                                 const std::vector<std::vector<int32_t>>& prompts,
                                                 int64_t max_tokens, int gap) {
  Outcomes got;
  std::vector<SequenceId> ids;
  for (const auto& p : prompts) {
    auto id = e.add({p, greedy(), max_tokens});
    EXPECT_TRUE(id.is_ok()) << id.message();
    if (!id) return {};
    ids.push_back(*id);
    for (int k = 0; k < gap; ++k) {
      if (!step_into(e, got)) return {};
    }
  }
  got = run_all(e, got);
  std::vector<std::vector<int32_t>> tokens;
  for (SequenceId id : ids) tokens.push_back(got[id].tokens);
  return tokens;
}

std::vector<int32_t> session_greedy(const model::Model& m, const std::vector<int32_t>& prompt,
                                    int64_t n) {
  SessionOptions so;
  so.n_ctx = 128;
  so.n_threads = 2;
  so.gpu = false;
  auto s = Session::create(m, so);
  EXPECT_TRUE(s.is_ok()) << s.message();
  auto sampler = Sampler::create(greedy());
  std::vector<int32_t> out;
  auto st = generate(**s, *sampler, prompt, n, [&](int32_t t) {
    out.push_back(t);
    return true;
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
  return out;
}

TEST(Engine, OneSequenceMatchesTheSession) {
  for (const char* shape : {"tiny-qwen2", "tiny-gemma3"}) {
    SCOPED_TRACE(shape);
    const model::Model& m = tiny(shape);
    auto e = Engine::create(m, engine_options());
    ASSERT_TRUE(e.is_ok()) << e.message();
    const auto prompt = prompt_of(21, 1);
    auto id = (*e)->add({prompt, greedy(), 12});
    ASSERT_TRUE(id.is_ok()) << id.message();
    auto done = run_all(**e);
    EXPECT_EQ(done[*id].tokens, session_greedy(m, prompt, 12));
  }
}

// generate() on an engine (what `minfer run` does): the Session's tokens,
// its counts, an early stop by the sink that leaves the engine idle, and a
// busy engine refused.
TEST(Engine, GenerateOnAnEngineMatchesTheSession) {
  const model::Model& m = tiny("tiny-qwen2");
  auto e = Engine::create(m, engine_options());
  ASSERT_TRUE(e.is_ok()) << e.message();
  const auto prompt = prompt_of(17, 3);
  std::vector<int32_t> got;
  auto st = generate(**e, {prompt, greedy(), 10}, [&](int32_t t) {
    got.push_back(t);
    return true;
  });
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(got, session_greedy(m, prompt, 10));
  EXPECT_EQ(st->prompt_tokens, 17);
  EXPECT_EQ(st->generated, static_cast<int64_t>(got.size()));
  EXPECT_EQ(st->stopped_at_eog, got.size() < 10);
  EXPECT_GT(st->prompt_seconds, 0.0);

  int calls = 0;
  st = generate(**e, {prompt, greedy(), 10}, [&](int32_t) { return ++calls < 3; });
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(st->generated, 3);
  EXPECT_TRUE((*e)->idle());
  EXPECT_EQ((*e)->stats().running, 0);

  ASSERT_TRUE((*e)->add({prompt, greedy(), 4}).is_ok());
  st = generate(**e, {prompt, greedy(), 4}, nullptr);
  EXPECT_FALSE(st.is_ok());
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);
}

// A conversation on one engine (what `minfer chat` does): each turn is the
// whole conversation again; the next turn reuses the pages the last one left
// (its prompt and reply), and gets the tokens a fresh engine gives it.
TEST(Engine, AConversationReusesItsLastTurn) {
  const model::Model& m = tiny("tiny-qwen2");
  EngineOptions o = engine_options();
  o.n_slots = 1;
  auto e = Engine::create(m, o);
  ASSERT_TRUE(e.is_ok()) << e.message();
  auto collect = [](std::vector<int32_t>& out) {
    return [&out](int32_t t) {
      out.push_back(t);
      return true;
    };
  };
  std::vector<int32_t> turn = prompt_of(19, 4), reply;
  auto st = generate(**e, {turn, greedy(), 9}, collect(reply));
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(st->reused_tokens, 0);
  ASSERT_FALSE(reply.empty());
  turn.insert(turn.end(), reply.begin(), reply.end());
  for (int32_t t : prompt_of(6, 5)) turn.push_back(t);
  std::vector<int32_t> second, fresh;
  st = generate(**e, {turn, greedy(), 9}, collect(second));
  ASSERT_TRUE(st.is_ok()) << st.message();
  // Every whole page of the first turn's 19 + reply - 1 computed tokens.
  EXPECT_EQ(st->reused_tokens, (19 + static_cast<int64_t>(reply.size()) - 1) / 8 * 8);
  auto other = Engine::create(m, o);
  ASSERT_TRUE(other.is_ok());
  ASSERT_TRUE(generate(**other, {turn, greedy(), 9}, collect(fresh)).is_ok());
  EXPECT_EQ(second, fresh);
}

// Bit for bit on the CPU: a sequence's logits rows alone equal its rows
// beside another sequence's 150-token chunk and decode token (the tiled
// kernels at every batch size). Without batch invariance the big batch takes
// the VNNI GEMM, whose sums differ from the file-row kernels' (the row tiles
// and the VNNI GEMV that few tokens take when weights are not repacked): the
// same check then fails (shown on one model, where that kernel exists: the
// two agree up to FMA contraction, so only some prompts show it). The packed
// kernels (matmul_packed.h) add the same integer block sums block by block
// with one FMA each, as the VNNI GEMM does for this model's Q8_0 weights: none
// of the eight prompt pairs differs with them, so the check runs without
// repacking.
TEST(Engine, LogitsRowsAreBatchInvariantBitForBit) {
  struct Case {
    const char* shape;
    const char* quant;
  };
  for (const Case& c : {Case{"tiny-qwen2", "Q8_0"}, Case{"tiny-gemma3", "Q8_0"},
                        Case{"tiny-llama", "Q4_K_M"}, Case{"tiny-qwen3", "Q4_0"}}) {
    SCOPED_TRACE(std::string(c.shape) + " " + c.quant);
    const model::Model& m = testing::tiny_model(c.shape, 9, c.quant);
    EXPECT_EQ(testing::differences(m, true, false), 0);
    EXPECT_EQ(testing::differences(m, true, false, 5), 0);
    if (cpu::vnni_gemm_available() && std::string(c.shape) == "tiny-qwen2") {
      // The VNNI GEMM agrees with the tiled kernels up to FMA contraction,
      // so a difference needs the right data: some of eight prompt pairs.
      Options file_rows;
      file_rows.section<cpu::CpuOptions>().cpu_no_repack = true;
      int differing = 0;
      for (int32_t seed = 1; seed <= 8; ++seed) {
        differing += testing::differences(m, false, false, seed, file_rows) > 0;
      }
      EXPECT_GT(differing, 0) << "the check cannot fail";
    }
  }
}

TEST(Engine, BatchedSequencesGiveTheirTokensAlone) {
  const model::Model& m = tiny("tiny-qwen2");
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(5, 2), prompt_of(30, 3),
                                                     prompt_of(17, 4), prompt_of(9, 5)};
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    auto e = Engine::create(m, engine_options());
    ASSERT_TRUE(e.is_ok());
    auto id = (*e)->add({p, greedy(), 16});
    ASSERT_TRUE(id.is_ok());
    alone.push_back(run_all(**e)[*id].tokens);
  }
  // Together, with chunks of 12 tokens so prompts and decodes share steps.
  EngineOptions o = engine_options();
  o.max_batch = 12;
  auto e = Engine::create(m, o);
  ASSERT_TRUE(e.is_ok());
  std::vector<SequenceId> ids;
  for (const auto& p : prompts) ids.push_back(*(*e)->add({p, greedy(), 16}));
  auto done = run_all(**e);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(done[ids[i]].tokens, alone[i]) << "sequence " << i;
    EXPECT_EQ(done[ids[i]].reason, FinishReason::kLength);
  }
  EXPECT_GT((*e)->stats().steps, 16) << "prompts were chunked";
}

// Eight sequences of different prompt lengths, started at different steps,
// in chunks of 16 tokens: each one's greedy tokens equal its solo run, with
// f16 and q8_0 caches (the per-row attention path at every batch size).
TEST(Engine, StaggeredSequencesGiveTheirTokensAloneForEveryCacheType) {
  const model::Model& m = tiny("tiny-qwen3");
  for (quant::TensorType kv : {quant::TensorType::F16, quant::TensorType::Q8_0}) {
    SCOPED_TRACE(quant::type_name(kv));
    EngineOptions o = engine_options();
    o.k_type = o.v_type = kv;
    o.n_slots = 8;
    o.max_batch = 16;
    const auto prompts = prompts_of(8, 3, 7, 20);
    const auto alone = solo_runs(m, o, prompts, 10);
    ASSERT_EQ(alone.size(), prompts.size());
    auto e = Engine::create(m, o);
    ASSERT_TRUE(e.is_ok());
    EXPECT_EQ(staggered_runs(**e, prompts, 10, 2), alone);  // a new sequence every other step
  }
}

// The ids that got a token in one step.
std::vector<SequenceId> step_ids(Engine& e) {
  std::vector<SequenceId> ids;
  auto events = e.step();
  EXPECT_TRUE(events.is_ok()) << events.message();
  if (!events) return ids;
  for (const SequenceEvent& ev : *events) {
    EXPECT_EQ(ev.finished, FinishReason::kNone) << "sequence " << ev.id << " ended early";
    if (ev.has_token) ids.push_back(ev.id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// decode_per_step = 2: the decoders take turns two a step; a step with
// prompt tokens decodes two fewer per token (none for a prompt of 2 or
// more), and the step after one that decoded none decodes two again.
TEST(Engine, DecodePerStepTakesTurnsAndPutsPromptsFirst) {
  const model::Model& m = tiny("tiny-qwen2");
  EngineOptions o = engine_options();
  o.n_slots = 8;
  o.decode_per_step = 2;
  auto e = Engine::create(m, o);
  ASSERT_TRUE(e.is_ok()) << e.message();
  Engine& en = **e;
  EXPECT_EQ(en.options().decode_per_step, 2);
  auto add = [&](int n, int32_t seed) { return *en.add({prompt_of(n, seed), greedy(), 100}); };
  const SequenceId a = add(4, 1), b = add(4, 2), c = add(4, 3);
  using Ids = std::vector<SequenceId>;
  EXPECT_EQ(step_ids(en), (Ids{a, b, c})) << "three prompts, each its first token";
  EXPECT_EQ(step_ids(en), (Ids{a, b}));
  EXPECT_EQ(step_ids(en), (Ids{a, c}));
  EXPECT_EQ(step_ids(en), (Ids{b, c}));
  const SequenceId d = add(5, 4);
  EXPECT_EQ(step_ids(en), (Ids{d})) << "a 5-token prompt leaves no room for decodes";
  EXPECT_EQ(step_ids(en), (Ids{a, d})) << "after a step without decodes, two; the turn goes on";
  EXPECT_EQ(step_ids(en), (Ids{b, c}));
  const SequenceId f = add(1, 5);
  EXPECT_EQ(step_ids(en), (Ids{d, f})) << "a 1-token prompt leaves room for one decode";
  EXPECT_EQ(en.stats().running, 5);
  // Every slot decoded each step (the default) takes all of them at once.
  EngineOptions all = engine_options();
  all.n_slots = 8;
  auto e2 = Engine::create(m, all);
  ASSERT_TRUE(e2.is_ok());
  EXPECT_EQ((*e2)->options().decode_per_step, 0);
  const SequenceId x = *(*e2)->add({prompt_of(4, 1), greedy(), 100});
  const SequenceId y = *(*e2)->add({prompt_of(4, 2), greedy(), 100});
  EXPECT_EQ(step_ids(**e2), (Ids{x, y}));
  const SequenceId z = *(*e2)->add({prompt_of(5, 4), greedy(), 100});
  EXPECT_EQ(step_ids(**e2), (Ids{x, y, z}));
  // -1 resolves to the CPU's number here (no GPU takes part).
  EngineOptions autod = engine_options();
  autod.decode_per_step = -1;
  auto e3 = Engine::create(m, autod);
  ASSERT_TRUE(e3.is_ok());
  EXPECT_EQ((*e3)->options().decode_per_step, EngineOptions::kCpuDecodePerStep);
  autod.decode_per_step = -2;
  EXPECT_FALSE(Engine::create(m, autod).is_ok());
}

TEST(Engine, GraphBucketSizes) {
  const std::map<int64_t, int64_t> want = {
      {1, 1},     {2, 2},     {3, 3},     {4, 4},     {5, 6},    {6, 6},   {7, 8},
      {9, 12},    {13, 16},   {17, 24},   {25, 32},   {33, 48},  {49, 64}, {65, 96},
      {100, 128}, {129, 192}, {257, 384}, {385, 512}, {513, 768}};
  for (const auto& [n, b] : want) EXPECT_EQ(graph_bucket(n), b) << n;
  for (int64_t n = 5; n < 5000; ++n) {  // never more than half again, never below n
    ASSERT_GE(graph_bucket(n), n);
    ASSERT_LE(2 * graph_bucket(n), 3 * n);
  }
}

// Sequences started at different steps, with prompts of many lengths: the
// steps' shapes vary all the time (decodes, chunks, ends). Padded up to
// buckets they need fewer graphs, and no sequence's tokens change.
TEST(Engine, GraphBucketsTakeFewerGraphsAndKeepEachSequencesTokens) {
  const model::Model& m = tiny("tiny-qwen2");
  EngineOptions o = engine_options();
  o.n_slots = 8;
  o.max_batch = 20;
  o.graph_buckets = 0;
  const auto prompts = prompts_of(7, 2, 5, 60);
  const auto alone = solo_runs(m, o, prompts, 9);
  ASSERT_EQ(alone.size(), prompts.size());
  int64_t builds[2] = {0, 0};
  for (int buckets : {0, 1}) {
    SCOPED_TRACE(buckets ? "buckets" : "exact shapes");
    o.graph_buckets = buckets;
    auto e = Engine::create(m, o);
    ASSERT_TRUE(e.is_ok()) << e.message();
    EXPECT_EQ((*e)->options().graph_buckets, buckets);
    EXPECT_EQ(staggered_runs(**e, prompts, 9, 2), alone);
    EXPECT_EQ((*e)->stats().padding_tokens > 0, buckets == 1);
    builds[buckets] = (*e)->runner().graph_builds();
  }
  EXPECT_LT(builds[1], builds[0]);
  // -1 resolves to off on the CPU; other values are refused.
  o.graph_buckets = -1;
  auto autob = Engine::create(m, o);
  ASSERT_TRUE(autob.is_ok());
  EXPECT_EQ((*autob)->options().graph_buckets, 0);
  o.graph_buckets = 2;
  EXPECT_FALSE(Engine::create(m, o).is_ok());
}

// Taking turns changes when a sequence's tokens come, not what they are.
TEST(Engine, DecodePerStepKeepsEachSequencesTokens) {
  const model::Model& m = tiny("tiny-gemma3");
  EngineOptions o = engine_options();
  o.n_slots = 8;
  o.max_batch = 16;
  const auto prompts = prompts_of(6, 2, 9, 40);
  const auto alone = solo_runs(m, o, prompts, 12);
  ASSERT_EQ(alone.size(), prompts.size());
  o.decode_per_step = 3;
  auto e = Engine::create(m, o);
  ASSERT_TRUE(e.is_ok());
  Outcomes got;
  std::vector<SequenceId> ids;
  for (const auto& p : prompts) {  // one new sequence every third step
    ids.push_back(*(*e)->add({p, greedy(), 12}));
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(step_into(**e, got));
  }
  got = run_all(**e, got);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[ids[i]].tokens, alone[i]) << "sequence " << i;
    EXPECT_EQ(got[ids[i]].reason, FinishReason::kLength);
  }
  EXPECT_GT((*e)->stats().steps, 6 * 12 / 3) << "three decoded a step at most";
}

TEST(Engine, CancelMidPrefillLeavesTheOthersAlone) {
  const model::Model& m = tiny("tiny-qwen2");
  EngineOptions o = engine_options();
  o.max_batch = 8;  // a 40-token prompt takes five steps
  auto e = Engine::create(m, o);
  ASSERT_TRUE(e.is_ok());
  const auto keep = prompt_of(12, 30), drop = prompt_of(40, 31);
  const SequenceId a = *(*e)->add({keep, greedy(), 8});
  const SequenceId b = *(*e)->add({drop, greedy(), 8});
  Outcomes got;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(step_into(**e, got));
  EXPECT_TRUE(got[b].tokens.empty()) << "still in its prompt";
  (*e)->cancel(b);
  got = run_all(**e, got);
  EXPECT_EQ(got[b].reason, FinishReason::kCancelled);
  EXPECT_EQ(got[a].tokens, session_greedy(m, keep, 8));
  EXPECT_EQ((*e)->stats().pool.referenced, 0);
}

TEST(Engine, SharedPrefixIsReusedAndGivesTheSameTokens) {
  const model::Model& m = tiny("tiny-llama");
  auto e = Engine::create(m, engine_options());
  ASSERT_TRUE(e.is_ok());
  const auto prompt = prompt_of(40, 6);  // five pages of 8
  const SequenceId first = *(*e)->add({prompt, greedy(), 6});
  auto a = run_all(**e);
  const SequenceId second = *(*e)->add({prompt, greedy(), 6});
  auto b = run_all(**e);
  EXPECT_EQ(a[first].reused, 0);
  EXPECT_EQ(b[second].reused, 32) << "four whole pages; the last prompt token is recomputed";
  EXPECT_EQ(b[second].tokens, a[first].tokens);
  // A prompt that shares only its first 20 tokens reuses two pages.
  auto other = prompt;
  other[20] = 7;
  const SequenceId third = *(*e)->add({other, greedy(), 6});
  auto c = run_all(**e);
  EXPECT_EQ(c[third].reused, 16);
  EXPECT_EQ(c[third].tokens, session_greedy(m, other, 6));
  EXPECT_EQ((*e)->stats().reused_tokens, 48);
}

// Prompts that share a prefix, added together: the later ones wait for the
// first one's prefill and reuse its pages instead of computing them too
// (each one's tokens still its solo run's); with the wait off each computes
// the prefix itself.
TEST(Engine, PromptsAddedTogetherComputeTheirSharedPrefixOnce) {
  const model::Model& m = tiny("tiny-qwen2");
  const auto system = prompt_of(36, 12);  // four whole pages of 8, and 4 tokens
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 3; ++i) {
    auto p = system;
    const auto own = prompt_of(6 + i, 40 + i);
    p.insert(p.end(), own.begin(), own.end());
    prompts.push_back(p);
  }
  EngineOptions o = engine_options();
  o.max_batch = 16;  // the first prompt takes three steps
  const auto alone = solo_runs(m, o, prompts, 5);
  for (const bool wait : {true, false}) {
    o.await_shared_prefill = wait;
    auto e = Engine::create(m, o);
    ASSERT_TRUE(e.is_ok()) << e.message();
    std::vector<SequenceId> ids;
    for (const auto& p : prompts) ids.push_back(*(*e)->add({p, greedy(), 5}));
    Outcomes got = run_all(**e);
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(got[ids[i]].tokens, alone[i]) << "prompt " << i << " wait " << wait;
      EXPECT_EQ(got[ids[i]].reused, wait && i > 0 ? 32 : 0) << "prompt " << i << " wait " << wait;
    }
    // 42 + 43 + 44 prompt tokens; waiting, the later two compute all but 32.
    EXPECT_EQ((*e)->stats().prompt_tokens, wait ? 42 + 11 + 12 : 42 + 43 + 44);
    EXPECT_EQ((*e)->stats().pool.referenced, 0);
  }
}

TEST(Engine, WorkWaitsForAFullPoolAndFinishesLater) {
  const model::Model& m = tiny("tiny-qwen2");
  EngineOptions o = engine_options();
  o.n_pages = 5;  // room for one sequence of 20 + 16 tokens at a time
  auto e = Engine::create(m, o);
  ASSERT_TRUE(e.is_ok());
  const auto p1 = prompt_of(20, 7), p2 = prompt_of(20, 8);
  const SequenceId a = *(*e)->add({p1, greedy(), 16});
  const SequenceId b = *(*e)->add({p2, greedy(), 16});
  Outcomes first;
  ASSERT_TRUE(step_into(**e, first));
  EXPECT_EQ((*e)->stats().running, 1);
  EXPECT_EQ((*e)->stats().waiting, 1) << "the second waits for pages";
  auto done = run_all(**e, first);
  EXPECT_EQ(done[a].tokens, session_greedy(m, p1, 16));
  EXPECT_EQ(done[b].tokens, session_greedy(m, p2, 16));
  EXPECT_EQ((*e)->stats().pool.referenced, 0);
  // A request no empty pool could hold is refused at once.
  auto too_big = (*e)->add({prompt_of(30, 9), greedy(), 30});
  ASSERT_FALSE(too_big.is_ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted);
}

TEST(Engine, EndsAtLengthContextAndCancel) {
  const model::Model& m = tiny("tiny-qwen3");
  EngineOptions o = engine_options();
  o.n_ctx = 24;
  auto e = Engine::create(m, o);
  ASSERT_TRUE(e.is_ok());
  const SequenceId ctx = *(*e)->add({prompt_of(20, 10), greedy(), 100});
  const SequenceId len = *(*e)->add({prompt_of(4, 11), greedy(), 3});
  const SequenceId gone = *(*e)->add({prompt_of(6, 12), greedy(), 50});
  Outcomes first;
  ASSERT_TRUE(step_into(**e, first));
  (*e)->cancel(gone);
  auto done = run_all(**e, first);
  EXPECT_EQ(done[ctx].reason, FinishReason::kContext);
  EXPECT_EQ(done[ctx].tokens.size(), 5u) << "positions 20..23 computed, the 5th token sampled";
  EXPECT_EQ(done[len].reason, FinishReason::kLength);
  EXPECT_EQ(done[len].tokens.size(), 3u);
  EXPECT_EQ(done[gone].reason, FinishReason::kCancelled);
  EXPECT_EQ((*e)->stats().pool.referenced, 0);
}

TEST(Engine, BadRequestsAreRefused) {
  const model::Model& m = tiny("tiny-qwen2");
  EngineOptions o = engine_options();
  auto e = Engine::create(m, o);
  ASSERT_TRUE(e.is_ok());
  EXPECT_EQ((*e)->add({{}, greedy(), 4}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*e)->add({{1, -3}, greedy(), 4}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*e)->add({prompt_of(128, 1), greedy(), 4}).status().code(), StatusCode::kOutOfRange);
  SamplerParams bad = greedy();
  bad.top_p = 0.0f;
  EXPECT_EQ((*e)->add({{1, 2}, bad, 4}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*e)->idle());
  o.n_slots = 0;
  EXPECT_EQ(Engine::create(m, o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace minfer::runtime
