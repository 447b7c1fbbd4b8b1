// Scoring prompts on the engine (Request::on_prompt_logits) and perplexity
// on it: the rows handed out are the Session's rows for the same positions,
// whatever the step size; cached pages never stand for a scored position; a
// score-only request generates nothing, ends with kLength and may fill the
// whole context; a failing sink ends its sequence alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "runtime/engine.h"
#include "runtime/perplexity.h"
#include "runtime/runtime_testutil.h"
#include "runtime/session.h"

namespace minfer::runtime {
namespace {

const model::Model& tiny() {
  return testing::tiny_model("tiny-qwen2", /*seed=*/9);
}

EngineOptions options(int64_t max_batch) {
  EngineOptions o;
  o.n_slots = 2;
  o.n_ctx = 64;
  o.page_size = 8;
  o.max_batch = max_batch;
  o.n_threads = 2;
  o.gpu = false;
  return o;
}

using testing::greedy;

// What a scoring request got: rows by position (from `from` on), its end.
struct Scored {
  std::vector<float> rows;
  std::vector<int64_t> positions;
  FinishReason reason = FinishReason::kNone;
  std::vector<int32_t> tokens;
  int64_t reused = 0;
};

Request scoring(const std::vector<int32_t>& prompt, int64_t from, int64_t max_tokens, Scored& out) {
  Request r(prompt, greedy(), max_tokens);
  r.prompt_logits_from = from;
  r.on_prompt_logits = [&out, n_vocab = tiny().hparams().n_vocab](int64_t pos,
                                                                  std::span<const float> rows) {
    for (int64_t i = 0; i < static_cast<int64_t>(rows.size()) / n_vocab; ++i) {
      out.positions.push_back(pos + i);
    }
    out.rows.insert(out.rows.end(), rows.begin(), rows.end());
    return Status::ok();
  };
  return r;
}

void run(Engine& e, std::map<SequenceId, Scored*> who) {
  for (int i = 0; i < 1000 && !e.idle(); ++i) {
    auto events = e.step();
    ASSERT_TRUE(events.is_ok()) << events.message();
    for (const SequenceEvent& ev : *events) {
      Scored& s = *who.at(ev.id);
      if (ev.has_token) s.tokens.push_back(ev.token);
      if (ev.finished != FinishReason::kNone) s.reason = ev.finished;
      s.reused = ev.reused_tokens;
    }
  }
  ASSERT_TRUE(e.idle());
}

Scored score(const std::vector<int32_t>& prompt, int64_t from, int64_t max_tokens,
             int64_t max_batch) {
  Scored out;
  auto e = Engine::create(tiny(), options(max_batch));
  EXPECT_TRUE(e.is_ok()) << e.message();
  if (!e) return out;
  auto id = (*e)->add(scoring(prompt, from, max_tokens, out));
  EXPECT_TRUE(id.is_ok()) << id.message();
  if (id) run(**e, {{*id, &out}});
  return out;
}

// The Session's rows for positions from .. n-1 of `prompt`.
std::vector<float> session_rows(const std::vector<int32_t>& prompt, int64_t from) {
  SessionOptions so;  // the cache type is the engine's: one default (RunOptions)
  so.n_ctx = 64;
  so.n_threads = 2;
  so.gpu = false;
  auto s = Session::create(tiny(), so);
  EXPECT_TRUE(s.is_ok()) << s.message();
  if (!s) return {};
  auto rows = (*s)->eval(prompt, static_cast<int64_t>(prompt.size()) - from);
  EXPECT_TRUE(rows.is_ok()) << rows.message();
  return rows ? std::vector<float>(rows->begin(), rows->end()) : std::vector<float>{};
}

float max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(EngineScoring, PromptRowsAreTheSessionsWhateverTheStepSize) {
  const auto prompt = testing::prompt_tokens(40, 5);
  const Scored whole = score(prompt, 13, 0, 512);
  EXPECT_EQ(whole.reason, FinishReason::kLength);
  EXPECT_TRUE(whole.tokens.empty()) << "a score-only request generates nothing";
  std::vector<int64_t> want_positions(27);
  for (int64_t i = 0; i < 27; ++i) want_positions[static_cast<size_t>(i)] = 13 + i;
  EXPECT_EQ(whole.positions, want_positions);
  const std::vector<float> ref = session_rows(prompt, 13);
  ASSERT_EQ(whole.rows.size(), ref.size());
  EXPECT_LT(max_difference(whole.rows, ref), 1e-3f);

  // Seven tokens a step: rows arrive a step at a time, in order, the same
  // bits (batch invariance).
  const Scored chunked = score(prompt, 13, 0, 7);
  EXPECT_EQ(chunked.positions, want_positions);
  EXPECT_EQ(chunked.rows, whole.rows);

  // With a budget to generate, the last row is also drawn from: the same
  // tokens as a plain request.
  const Scored generating = score(prompt, 13, 5, 7);
  EXPECT_EQ(generating.rows, whole.rows);
  auto e = Engine::create(tiny(), options(7));
  ASSERT_TRUE(e.is_ok());
  Scored plain;
  auto id = (*e)->add(Request(prompt, greedy(), 5));
  ASSERT_TRUE(id.is_ok());
  run(**e, {{*id, &plain}});
  EXPECT_EQ(generating.tokens, plain.tokens);
  EXPECT_EQ(generating.tokens.size(), 5u);
}

// Past 64 queries a one-slot engine that need not be batch-invariant hands
// attention the batch's own k and v (GraphParams::paged_batch_kv): its
// prompt rows are then the Session's bit for bit, the same tiled path.
TEST(EngineScoring, LongPromptRowsAreTheSessionsBitForBit) {
  const auto prompt = testing::prompt_tokens(100, 12);
  EngineOptions o = options(512);
  o.n_slots = 1;
  o.n_ctx = 128;
  o.options.batch_invariant = false;
  auto e = Engine::create(tiny(), o);
  ASSERT_TRUE(e.is_ok()) << e.message();
  Scored got;
  auto id = (*e)->add(scoring(prompt, 30, 0, got));
  ASSERT_TRUE(id.is_ok()) << id.message();
  run(**e, {{*id, &got}});
  SessionOptions so;
  so.n_ctx = 128;
  so.n_threads = 2;
  so.gpu = false;
  so.options.batch_invariant = false;
  auto s = Session::create(tiny(), so);
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto rows = (*s)->eval(prompt, 70);
  ASSERT_TRUE(rows.is_ok()) << rows.message();
  EXPECT_EQ(got.rows, std::vector<float>(rows->begin(), rows->end()));
}

TEST(EngineScoring, CachedPagesNeverStandForScoredPositions) {
  const auto prompt = testing::prompt_tokens(40, 6);
  auto e = Engine::create(tiny(), options(512));
  ASSERT_TRUE(e.is_ok());
  Scored first, again, plain;
  auto id = (*e)->add(scoring(prompt, 20, 0, first));
  ASSERT_TRUE(id.is_ok());
  run(**e, {{*id, &first}});
  id = (*e)->add(scoring(prompt, 20, 0, again));
  ASSERT_TRUE(id.is_ok());
  run(**e, {{*id, &again}});
  EXPECT_EQ(again.reused, 16) << "the whole pages before position 20 are reused";
  EXPECT_EQ(again.rows, first.rows);
  // A plain request takes every cached page its prompt allows.
  id = (*e)->add(Request(prompt, greedy(), 2));
  ASSERT_TRUE(id.is_ok());
  run(**e, {{*id, &plain}});
  EXPECT_EQ(plain.reused, 32);
}

TEST(EngineScoring, ScoreOnlyLimitsAndAFailingSink) {
  auto e = Engine::create(tiny(), options(16));
  ASSERT_TRUE(e.is_ok());
  Scored full;
  // A score-only prompt may fill the context; a generating one may not.
  const auto prompt = testing::prompt_tokens(64, 7);
  auto full_id = (*e)->add(scoring(prompt, 60, 0, full));
  ASSERT_TRUE(full_id.is_ok()) << full_id.message();
  EXPECT_EQ((*e)->add(Request(prompt, greedy(), 1)).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ((*e)->add(Request(testing::prompt_tokens(8, 1), greedy(), 0)).status().code(),
            StatusCode::kInvalidArgument)
      << "max_tokens 0 needs a sink";
  Scored neg;
  EXPECT_EQ((*e)->add(scoring(prompt, -1, 0, neg)).status().code(), StatusCode::kInvalidArgument);
  run(**e, {{*full_id, &full}});
  EXPECT_EQ(full.positions.size(), 4u);
  EXPECT_EQ(full.reason, FinishReason::kLength);

  // A sink that fails ends its own sequence; the one beside it goes on.
  const auto other = testing::prompt_tokens(20, 8);
  Scored alone, beside, failing;
  auto id = (*e)->add(Request(other, greedy(), 6));
  ASSERT_TRUE(id.is_ok());
  run(**e, {{*id, &alone}});
  Request bad = scoring(testing::prompt_tokens(30, 9), 0, 4, failing);
  bad.on_prompt_logits = [](int64_t, std::span<const float>) {
    return Status::io_error("the reader has gone");
  };
  auto bad_id = (*e)->add(std::move(bad));
  id = (*e)->add(Request(other, greedy(), 6));
  ASSERT_TRUE(bad_id.is_ok() && id.is_ok());
  run(**e, {{*bad_id, &failing}, {*id, &beside}});
  EXPECT_EQ(failing.reason, FinishReason::kError);
  EXPECT_TRUE(failing.tokens.empty());
  EXPECT_EQ(beside.tokens, alone.tokens);
  EXPECT_EQ((*e)->stats().pool.referenced, 0) << "every page went back";
}

// Perplexity on the engine: each chunk's scored rows are the Session's, and
// the result is their mean negative log-likelihood.
TEST(EngineScoring, PerplexityScoresEachChunksSecondHalf) {
  const model::Model& m = tiny();
  const auto tokens = testing::prompt_tokens(100, 11);  // three chunks of 32
  auto e = Engine::create(m, options(512));
  ASSERT_TRUE(e.is_ok());
  PerplexityOptions po;
  po.n_ctx = 32;
  po.with_logits = true;
  std::vector<std::vector<float>> kept;
  po.progress = [&](int64_t, double, std::span<const float> rows) {
    kept.emplace_back(rows.begin(), rows.end());
    return Status::ok();
  };
  auto r = perplexity(**e, tokens, po);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->chunks, 3);
  EXPECT_EQ(r->scored, 3 * 15);
  ASSERT_EQ(kept.size(), 3u);
  const auto n_vocab = static_cast<size_t>(m.hparams().n_vocab);
  const bool bos = m.tokenizer().vocab().add_bos && m.tokenizer().bos() >= 0;
  double nll = 0;
  for (size_t c = 0; c < 3; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + 32 * c, tokens.begin() + 32 * (c + 1));
    if (bos) chunk[0] = m.tokenizer().bos();
    std::vector<float> ref = session_rows(chunk, 16);
    ref.resize(15 * n_vocab);  // the last row predicts past the chunk
    ASSERT_EQ(kept[c].size(), ref.size());
    EXPECT_LT(max_difference(kept[c], ref), 1e-3f);
    for (size_t j = 0; j < 15; ++j) {
      const float* row = kept[c].data() + j * n_vocab;
      const float mx = *std::max_element(row, row + n_vocab);
      double sum = 0;
      for (size_t v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
      nll += std::log(sum) - (row[tokens[32 * c + 16 + j + 1]] - mx);
    }
  }
  EXPECT_NEAR(r->mean_nll, nll / 45, 1e-9);

  po.n_ctx = 65;  // longer than the engine's sequences
  EXPECT_EQ(perplexity(**e, tokens, po).status().code(), StatusCode::kOutOfRange);
  po.n_ctx = 32;
  ASSERT_TRUE((*e)->add(Request(testing::prompt_tokens(5, 1), greedy(), 1)).is_ok());
  EXPECT_EQ(perplexity(**e, tokens, po).status().code(), StatusCode::kInvalidArgument)
      << "a busy engine";
}

}  // namespace
}  // namespace minfer::runtime
