// Embedding requests on the engine (Request::on_prompt_hidden): every
// prompt position's final hidden state comes once, in order; a sequence's
// rows are the same bits alone and beside other embeddings and generations,
// whatever the step size; generations beside embeddings keep their tokens;
// the pooling and normalization of runtime/pooling.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "runtime/engine.h"
#include "runtime/pooling.h"
#include "runtime/runtime_testutil.h"

namespace minfer::runtime {
namespace {

EngineOptions options(int64_t max_batch) {
  EngineOptions o;
  o.n_slots = 4;
  o.n_ctx = 64;
  o.page_size = 8;
  o.max_batch = max_batch;
  o.n_threads = 2;
  o.gpu = false;
  return o;
}

// An embedding request's rows, by position.
struct Embedded {
  std::vector<float> rows;
  int64_t next = 0;  // the position the next row must be
  bool in_order = true;
  FinishReason reason = FinishReason::kNone;
};

Request embedding(const model::Model& m, const std::vector<int32_t>& prompt, Embedded& out) {
  Request r(prompt, testing::greedy(), 0);
  r.on_prompt_hidden = [&out, n_embd = m.hparams().n_embd](int64_t pos,
                                                           std::span<const float> rows) {
    out.in_order = out.in_order && pos == out.next;
    out.next = pos + static_cast<int64_t>(rows.size()) / n_embd;
    out.rows.insert(out.rows.end(), rows.begin(), rows.end());
    return Status::ok();
  };
  return r;
}

// Runs the engine dry; each embedding's end and each generation's tokens.
void run(Engine& e, std::map<SequenceId, Embedded*> embeds,
         std::map<SequenceId, std::vector<int32_t>>* tokens = nullptr) {
  for (int i = 0; i < 1000 && !e.idle(); ++i) {
    auto events = e.step();
    ASSERT_TRUE(events.is_ok()) << events.message();
    for (const SequenceEvent& ev : *events) {
      if (ev.has_token && tokens != nullptr) (*tokens)[ev.id].push_back(ev.token);
      if (ev.finished != FinishReason::kNone && embeds.count(ev.id) > 0) {
        embeds[ev.id]->reason = ev.finished;
      }
    }
  }
  ASSERT_TRUE(e.idle());
}

Embedded alone(const model::Model& m, const std::vector<int32_t>& prompt) {
  Embedded out;
  auto e = Engine::create(m, options(512));
  EXPECT_TRUE(e.is_ok()) << e.message();
  if (!e) return out;
  auto id = (*e)->add(embedding(m, prompt, out));
  EXPECT_TRUE(id.is_ok()) << id.message();
  run(**e, {{*id, &out}});
  return out;
}

TEST(EngineEmbedding, EveryPositionComesOnceInOrderAndTheRequestEnds) {
  const model::Model& m = testing::tiny_model("tiny-qwen2", 9);
  const std::vector<int32_t> prompt = testing::prompt_tokens(29, 3);
  Embedded out;
  auto e = Engine::create(m, options(8));  // four steps of chunks
  ASSERT_TRUE(e.is_ok()) << e.message();
  auto id = (*e)->add(embedding(m, prompt, out));
  ASSERT_TRUE(id.is_ok()) << id.message();
  run(**e, {{*id, &out}});
  EXPECT_TRUE(out.in_order);
  EXPECT_EQ(out.next, 29);
  EXPECT_EQ(out.rows.size(), static_cast<size_t>(29 * m.hparams().n_embd));
  EXPECT_EQ(out.reason, FinishReason::kLength);
  EXPECT_EQ((*e)->stats().generated_tokens, 0);
  for (float x : out.rows) ASSERT_TRUE(std::isfinite(x));
}

// The rows of a sequence alone in one step, then chunked beside two other
// embeddings and a generation: equal bit for bit.
TEST(EngineEmbedding, RowsAreBatchInvariantBitForBit) {
  for (const char* shape : {"tiny-qwen2", "tiny-gemma3"}) {
    SCOPED_TRACE(shape);
    const model::Model& m = testing::tiny_model(shape, 9, "Q8_0");
    const std::vector<int32_t> a = testing::prompt_tokens(23, 1), b = testing::prompt_tokens(40, 2),
                               c = testing::prompt_tokens(7, 3);
    const Embedded a_alone = alone(m, a);
    auto e = Engine::create(m, options(12));
    ASSERT_TRUE(e.is_ok()) << e.message();
    Embedded ea, eb, ec;
    auto gen = (*e)->add({testing::prompt_tokens(11, 4), testing::greedy(), 6});
    auto ib = (*e)->add(embedding(m, b, eb));
    auto ia = (*e)->add(embedding(m, a, ea));
    auto ic = (*e)->add(embedding(m, c, ec));
    ASSERT_TRUE(gen.is_ok() && ia.is_ok() && ib.is_ok() && ic.is_ok());
    run(**e, {{*ia, &ea}, {*ib, &eb}, {*ic, &ec}});
    EXPECT_TRUE(ea.in_order && eb.in_order && ec.in_order);
    ASSERT_EQ(ea.rows.size(), a_alone.rows.size());
    EXPECT_EQ(std::memcmp(ea.rows.data(), a_alone.rows.data(), ea.rows.size() * sizeof(float)), 0)
        << "the rows differ in company";
    const Embedded c_alone = alone(m, c);
    EXPECT_EQ(ec.rows, c_alone.rows);
  }
}

// A generation's greedy tokens are the same with embeddings taking every
// other step.
TEST(EngineEmbedding, GenerationsBesideEmbeddingsKeepTheirTokens) {
  const model::Model& m = testing::tiny_model("tiny-qwen2", 9);
  const std::vector<int32_t> prompt = testing::prompt_tokens(13, 5);
  std::map<SequenceId, std::vector<int32_t>> solo_tokens, tokens;
  auto solo = Engine::create(m, options(8));
  ASSERT_TRUE(solo.is_ok());
  const SequenceId s = *(*solo)->add({prompt, testing::greedy(), 12});
  run(**solo, {}, &solo_tokens);
  auto e = Engine::create(m, options(8));
  ASSERT_TRUE(e.is_ok());
  const SequenceId g = *(*e)->add({prompt, testing::greedy(), 12});
  Embedded x, y;
  const SequenceId ix = *(*e)->add(embedding(m, testing::prompt_tokens(30, 6), x));
  const SequenceId iy = *(*e)->add(embedding(m, testing::prompt_tokens(20, 7), y));
  run(**e, {{ix, &x}, {iy, &y}}, &tokens);
  EXPECT_EQ(tokens[g], solo_tokens[s]);
  EXPECT_EQ(x.reason, FinishReason::kLength);
  EXPECT_EQ(y.reason, FinishReason::kLength);
}

TEST(EngineEmbedding, RequestsAreChecked) {
  const model::Model& m = testing::tiny_model("tiny-qwen2", 9);
  auto e = Engine::create(m, options(16));
  ASSERT_TRUE(e.is_ok());
  Embedded out;
  Request generating = embedding(m, testing::prompt_tokens(5, 1), out);
  generating.max_tokens = 4;
  EXPECT_EQ((*e)->add(generating).status().code(), StatusCode::kInvalidArgument);
  // The whole context may be embedded; one more token may not.
  EXPECT_TRUE((*e)->add(embedding(m, testing::prompt_tokens(64, 1), out)).is_ok());
  EXPECT_EQ((*e)->add(embedding(m, testing::prompt_tokens(65, 1), out)).status().code(),
            StatusCode::kOutOfRange);
}

TEST(Pooling, PoolsRowsAsLlamaCppDoes) {
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6};  // three positions of two
  auto pooled = [&](Pooling p, std::vector<size_t> cuts) {
    Pooler pooler(p, 2, 3);
    size_t at = 0;
    for (size_t n : cuts) {
      EXPECT_TRUE(pooler.add(static_cast<int64_t>(at), std::span(rows).subspan(2 * at, 2 * n)));
      at += n;
    }
    return pooler.result();
  };
  using V = std::vector<std::vector<float>>;
  EXPECT_EQ(pooled(Pooling::kMean, {3}), (V{{3, 4}}));
  EXPECT_EQ(pooled(Pooling::kMean, {1, 2}), (V{{3, 4}}));
  EXPECT_EQ(pooled(Pooling::kCls, {2, 1}), (V{{1, 2}}));
  EXPECT_EQ(pooled(Pooling::kLast, {1, 1, 1}), (V{{5, 6}}));
  EXPECT_EQ(pooled(Pooling::kNone, {3}), (V{{1, 2}, {3, 4}, {5, 6}}));
  EXPECT_TRUE(pooled(Pooling::kMean, {2}).empty()) << "incomplete";
  Pooler pooler(Pooling::kMean, 2, 3);
  EXPECT_FALSE(pooler.add(1, std::span(rows).first(2))) << "out of order";
}

TEST(Pooling, NormalizesAsLlamaServerDoes) {
  std::vector<float> v = {3, -4};
  normalize_embedding(v, 2);
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], -0.8f);
  v = {3, -4};
  normalize_embedding(v, 1);
  EXPECT_FLOAT_EQ(v[1], -4.0f / 7);
  v = {3, -4};
  normalize_embedding(v, 0);
  EXPECT_FLOAT_EQ(v[1], -32760.0f);
  v = {3, -4};
  normalize_embedding(v, -1);
  EXPECT_EQ(v, (std::vector<float>{3, -4}));
  v = {0, 0};
  normalize_embedding(v, 2);
  EXPECT_EQ(v, (std::vector<float>{0, 0}));
  EXPECT_EQ(*parse_pooling("mean"), Pooling::kMean);
  EXPECT_FALSE(parse_pooling("rank"));
  EXPECT_EQ(*pooling_from_gguf(3), Pooling::kLast);
  EXPECT_EQ(pooling_from_gguf(4).status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace minfer::runtime
