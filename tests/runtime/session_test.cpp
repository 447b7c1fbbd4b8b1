// Session: the graph cache, the context limit, truncate, batch splitting,
// token-id validation and the KV cache type, on tiny synthetic models.
#include "runtime/session.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/runtime_testutil.h"

namespace minfer::runtime {
namespace {

using testing::tiny_model;

std::unique_ptr<Session> make_session(const model::Model& m, SessionOptions o = {}) {
  if (o.n_threads == 0) o.n_threads = 2;
  o.gpu = false;  // these tests pin the CPU path
  if (o.n_ctx == SessionOptions{}.n_ctx) o.n_ctx = 128;
  auto s = Session::create(m, o);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return s ? std::move(*s) : nullptr;
}

std::vector<float> eval(Session& s, const std::vector<int32_t>& tokens, int64_t n_outputs = 1) {
  auto r = s.eval(tokens, n_outputs);
  EXPECT_TRUE(r.is_ok()) << r.message();
  return r ? std::vector<float>(r->begin(), r->end()) : std::vector<float>{};
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

float max_abs(const std::vector<float>& a) {
  float m = 0;
  for (float x : a) m = std::max(m, std::abs(x));
  return m;
}

const std::vector<int32_t> kPrompt = {1, 45, 300, 12, 7, 480, 99, 23, 256, 3, 77};

TEST(SessionTest, GraphCacheReusedAcrossDecodeSteps) {
  const model::Model& m = tiny_model("tiny-qwen2");
  auto s = make_session(m);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->graph_builds(), 1) << "the decode graph, built to place the KV cache";
  eval(*s, kPrompt);
  EXPECT_EQ(s->graph_builds(), 2);
  eval(*s, {5});  // the first decode step: the graph built at creation
  EXPECT_EQ(s->graph_builds(), 2);
  for (int32_t t : {6, 7, 8, 9, 10}) {
    eval(*s, {t});
    EXPECT_EQ(s->graph_builds(), 2) << "decode steps reuse the graph";
  }
  eval(*s, {1, 2, 3});  // n_tokens changes
  EXPECT_EQ(s->graph_builds(), 3);
  eval(*s, {4, 5, 6});  // same shape again
  EXPECT_EQ(s->graph_builds(), 3);
  eval(*s, {4, 5, 6}, 3);  // n_outputs changes
  EXPECT_EQ(s->graph_builds(), 4);
  eval(*s, {7});  // decode again: still cached beside the batch graph
  EXPECT_EQ(s->graph_builds(), 4);
  EXPECT_EQ(s->n_past(), static_cast<int64_t>(kPrompt.size()) + 6 + 9 + 1);
}

TEST(SessionTest, ContextLimitNamesTheNumbers) {
  const model::Model& m = tiny_model("tiny-llama");
  SessionOptions o;
  o.n_ctx = 8;
  auto s = make_session(m, o);
  ASSERT_NE(s, nullptr);
  eval(*s, {1, 2, 3, 4, 5, 6});
  auto r = s->eval(std::vector<int32_t>{7, 8, 9});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.message(),
            "context full: 6 tokens in the context + 3 new exceed the context size 8 "
            "(raise it with -c)");
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s->n_past(), 6) << "a refused batch leaves the sequence as it was";
  // Exactly filling the context is fine; one more is not.
  eval(*s, {7, 8});
  EXPECT_EQ(s->n_past(), 8);
  r = s->eval(std::vector<int32_t>{9});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("8 tokens in the context + 1 new exceed the context size 8"),
            std::string::npos)
      << r.message();
  // A batch larger than the whole context, from empty.
  s->reset();
  r = s->eval(std::vector<int32_t>(9, 1));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("0 tokens in the context + 9 new exceed the context size 8"),
            std::string::npos)
      << r.message();
}

TEST(SessionTest, InvalidOptionsAndArguments) {
  const model::Model& m = tiny_model("tiny-llama");
  SessionOptions o;
  o.n_ctx = 0;
  auto bad = Session::create(m, o);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("context size 0"), std::string::npos) << bad.message();
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.max_batch = 0;
  bad = Session::create(m, o);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("batch size"), std::string::npos) << bad.message();

  auto s = make_session(m);
  ASSERT_NE(s, nullptr);
  auto r = s->eval(std::vector<int32_t>{});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("at least one token"), std::string::npos) << r.message();
  r = s->eval(std::vector<int32_t>{1, 2}, 3);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.message(), "asked for 3 outputs from 2 tokens");
  r = s->eval(std::vector<int32_t>{1, 2}, 0);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(s->n_past(), 0);
}

TEST(SessionTest, TruncateRewindsTheSequence) {
  const model::Model& m = tiny_model("tiny-qwen3");
  // Reference: only the first 4 prompt tokens, then token 200.
  auto ref = make_session(m);
  ASSERT_NE(ref, nullptr);
  eval(*ref, {kPrompt.begin(), kPrompt.begin() + 4});
  const std::vector<float> want = eval(*ref, {200});

  auto s = make_session(m);
  ASSERT_NE(s, nullptr);
  eval(*s, kPrompt);
  s->truncate(4);
  EXPECT_EQ(s->n_past(), 4);
  const std::vector<float> got = eval(*s, {200});
  ASSERT_EQ(got.size(), want.size());
  // The cached rows 0..3 were computed in a batch of 11 instead of 4; row by
  // row the arithmetic is the same.
  EXPECT_LE(max_abs_diff(got, want), 1e-5f);
  EXPECT_EQ(s->n_past(), 5);

  // Past the end: no change. Below zero: an empty sequence, never a negative position.
  s->truncate(100);
  EXPECT_EQ(s->n_past(), 5);
  s->truncate(-3);
  EXPECT_EQ(s->n_past(), 0);
  eval(*s, {kPrompt.begin(), kPrompt.begin() + 4});
  EXPECT_LE(max_abs_diff(eval(*s, {200}), want), 1e-5f);
}

TEST(SessionTest, BatchSplittingMatchesOneBatch) {
  for (const char* shape : {"tiny-qwen2", "tiny-gemma3"}) {
    SCOPED_TRACE(shape);
    const model::Model& m = tiny_model(shape);
    const int64_t n = static_cast<int64_t>(kPrompt.size());
    const int64_t n_vocab = m.hparams().n_vocab;
    for (int64_t n_outputs : {int64_t{1}, int64_t{5}, n}) {
      SCOPED_TRACE(n_outputs);
      auto whole = make_session(m);
      ASSERT_NE(whole, nullptr);
      const std::vector<float> want = eval(*whole, kPrompt, n_outputs);
      ASSERT_EQ(static_cast<int64_t>(want.size()), n_outputs * n_vocab);
      const std::vector<float> want_next = eval(*whole, {42});
      for (int64_t max_batch : {int64_t{1}, int64_t{3}, int64_t{4}, n - 1}) {
        SCOPED_TRACE(max_batch);
        SessionOptions o;
        o.max_batch = max_batch;
        auto split = make_session(m, o);
        ASSERT_NE(split, nullptr);
        const std::vector<float> got = eval(*split, kPrompt, n_outputs);
        EXPECT_LE(max_abs_diff(got, want), 1e-4f);
        EXPECT_EQ(split->n_past(), n);
        // And the cache it built serves the next step the same way.
        EXPECT_LE(max_abs_diff(eval(*split, {42}), want_next), 1e-4f);
      }
    }
  }
}

TEST(SessionTest, OutOfVocabularyTokenIsAnError) {
  const model::Model& m = tiny_model("tiny-llama");
  const int64_t n_vocab = m.hparams().n_vocab;
  auto s = make_session(m);
  ASSERT_NE(s, nullptr);
  for (int32_t bad : {static_cast<int32_t>(n_vocab), int32_t{-1}, int32_t{1} << 30}) {
    auto r = s->eval(std::vector<int32_t>{1, bad, 2});
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.message(), "token id " + std::to_string(bad) + " is outside the vocabulary [0, " +
                               std::to_string(n_vocab) + ")");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s->n_past(), 0);
  }
  // The bad id in a later batch than the first: nothing is evaluated either.
  SessionOptions o;
  o.max_batch = 2;
  auto split = make_session(m, o);
  ASSERT_NE(split, nullptr);
  auto r = split->eval(std::vector<int32_t>{1, 2, 3, static_cast<int32_t>(n_vocab) + 7});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("token id " + std::to_string(n_vocab + 7)), std::string::npos)
      << r.message();
  EXPECT_EQ(split->n_past(), 0) << "a refused eval leaves the sequence as it was";
  // And the session still works.
  eval(*split, {1, 2, 3});
  EXPECT_EQ(split->n_past(), 3);
}

TEST(SessionTest, F16CacheCloseToF32) {
  for (const char* shape : {"tiny-qwen2", "tiny-qwen3", "tiny-llama", "tiny-gemma3"}) {
    SCOPED_TRACE(shape);
    const model::Model& m = tiny_model(shape);
    SessionOptions o32, o16;
    o32.k_type = o32.v_type = quant::TensorType::F32;
    o16.k_type = o16.v_type = quant::TensorType::F16;
    auto a = make_session(m, o32);
    auto b = make_session(m, o16);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    // A prompt of 64 tokens or more attends to its own keys at full precision
    // (the tiled path): identical with either cache type.
    std::vector<int32_t> prompt;
    for (int i = 0; i < 70; ++i) prompt.push_back(kPrompt[static_cast<size_t>(i) % kPrompt.size()]);
    std::vector<float> la = eval(*a, prompt), lb = eval(*b, prompt);
    EXPECT_LE(max_abs_diff(la, lb), 1e-6f);
    // Decode steps take the half-precision row path over the cache: f16
    // rounding, amplified by the Q8_0 quantization of activations to a few
    // percent of the largest logit on these random models.
    float worst = 0;
    for (int32_t t : {17, 230, 4, 501, 66}) {
      la = eval(*a, {t});
      lb = eval(*b, {t});
      const float rel = max_abs_diff(la, lb) / std::max(max_abs(la), 1e-6f);
      worst = std::max(worst, rel);
      EXPECT_LT(rel, 5e-2f) << "token " << t;
    }
    EXPECT_GT(worst, 0.0f) << "the f16 cache was not used";
    std::printf("  %-12s f16 vs f32 cache: max relative logit difference %.2e\n", shape, worst);
  }
}

}  // namespace
}  // namespace minfer::runtime
