#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace minfer::runtime {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// A sampler with every filter off unless a test turns it on.
SamplerParams plain(float temperature = 1.0f) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.seed = 1234;
  return p;
}

Sampler make(const SamplerParams& p) {
  auto s = Sampler::create(p);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return std::move(s).value();
}

// Logits whose softmax at temperature 1 is proportional to `weights`.
std::vector<float> log_of(std::vector<double> weights) {
  std::vector<float> out;
  for (double w : weights) out.push_back(static_cast<float>(std::log(w)));
  return out;
}

std::map<int32_t, double> dist(const Sampler& s, const std::vector<float>& logits) {
  auto d = s.distribution(logits);
  EXPECT_TRUE(d.is_ok()) << d.message();
  std::map<int32_t, double> out;
  if (!d.is_ok()) return out;
  for (const auto& tp : *d) out[tp.id] = tp.p;
  return out;
}

void expect_dist(const std::map<int32_t, double>& got, const std::map<int32_t, double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [id, p] : want) {
    ASSERT_TRUE(got.count(id)) << "token " << id << " missing";
    EXPECT_NEAR(got.at(id), p, 1e-6) << "token " << id;
  }
}

// Probabilities 0.1, 0.2, 0.3, 0.4 for ids 0..3 at temperature 1.
const std::vector<float> kFour = log_of({1, 2, 3, 4});

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  for (float t : {0.0f, -1.0f}) {
    Sampler s = make(plain(t));
    // Ids 1 and 3 tie at 3.0; the lower id wins.
    auto r = s.sample(std::vector<float>{1.0f, 3.0f, 2.0f, 3.0f});
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(*r, 1);
    expect_dist(dist(s, {1.0f, 3.0f, 2.0f, 3.0f}), {{1, 1.0}});
  }
}

TEST(Sampler, GreedyIgnoresNaNAndFilters) {
  SamplerParams p;  // default filters on
  p.temperature = 0.0f;
  Sampler s = make(p);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto r = s.sample(std::vector<float>{nan, -5.0f, nan, -4.0f});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, 3);
}

TEST(Sampler, AllMinusInfOrNaNIsAnError) {
  Sampler s = make(plain());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto r = s.sample(std::vector<float>{-kInf, nan, -kInf});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("all 3 logits are -inf or NaN"), std::string::npos) << r.message();
  auto e = s.sample(std::vector<float>{});
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.message().find("empty"), std::string::npos) << e.message();
  EXPECT_FALSE(s.distribution(std::vector<float>{nan}).is_ok());
}

TEST(Sampler, NaNAndMinusInfAreNeverDrawn) {
  Sampler s = make(plain());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {nan, 0.0f, -kInf, 0.0f};
  // Ids 1 and 3 have equal logits: 1/2 each.
  expect_dist(dist(s, logits), {{1, 0.5}, {3, 0.5}});
  for (int i = 0; i < 200; ++i) {
    auto r = s.sample(logits);
    ASSERT_TRUE(r.is_ok());
    EXPECT_TRUE(*r == 1 || *r == 3) << *r;
  }
}

TEST(Sampler, PlusInfTokensShareAllProbability) {
  Sampler s = make(plain());
  // Ids 0 and 2 are +inf: each gets 1/2, id 1 nothing.
  expect_dist(dist(s, {kInf, 100.0f, kInf}), {{0, 0.5}, {2, 0.5}});
}

TEST(Sampler, NoFiltersIsPlainSoftmax) {
  Sampler s = make(plain());
  expect_dist(dist(s, kFour), {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
}

TEST(Sampler, TopKAlone) {
  SamplerParams p = plain();
  p.top_k = 2;
  // Keep ids 3 and 2 (0.4, 0.3), renormalized by 0.7: 4/7 and 3/7.
  expect_dist(dist(make(p), kFour), {{3, 4.0 / 7}, {2, 3.0 / 7}});
  p.top_k = 4;  // k >= vocabulary: nothing removed
  expect_dist(dist(make(p), kFour), {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
}

TEST(Sampler, TopKTiesGoToLowerIds) {
  SamplerParams p = plain();
  p.top_k = 2;
  // Four equal logits: ids 0 and 1 survive, 1/2 each.
  expect_dist(dist(make(p), {0.5f, 0.5f, 0.5f, 0.5f}), {{0, 0.5}, {1, 0.5}});
}

TEST(Sampler, TopPAlone) {
  SamplerParams p = plain();
  p.top_p = 0.65f;
  // Sorted: 0.4 (sum 0.4 < 0.65), 0.3 (sum 0.7 >= 0.65, kept, stop): ids 3, 2 -> 4/7, 3/7.
  expect_dist(dist(make(p), kFour), {{3, 4.0 / 7}, {2, 3.0 / 7}});
  p.top_p = 0.75f;
  // 0.4, 0.7 < 0.75, 0.9 >= 0.75: ids 3, 2, 1 -> 4/9, 3/9, 2/9.
  expect_dist(dist(make(p), kFour), {{3, 4.0 / 9}, {2, 3.0 / 9}, {1, 2.0 / 9}});
  p.top_p = 0.01f;
  // The first token already crosses: only id 3.
  expect_dist(dist(make(p), kFour), {{3, 1.0}});
}

TEST(Sampler, MinPAlone) {
  SamplerParams p = plain();
  p.min_p = 0.6f;
  // p_max = 0.4, threshold 0.24: 0.4 and 0.3 stay -> 4/7, 3/7.
  expect_dist(dist(make(p), kFour), {{3, 4.0 / 7}, {2, 3.0 / 7}});
  p.min_p = 0.45f;
  // Threshold 0.18: 0.4, 0.3, 0.2 stay -> 4/9, 3/9, 2/9.
  expect_dist(dist(make(p), kFour), {{3, 4.0 / 9}, {2, 3.0 / 9}, {1, 2.0 / 9}});
  p.min_p = 1.0f;
  // Only the maximum itself.
  expect_dist(dist(make(p), kFour), {{3, 1.0}});
}

TEST(Sampler, TemperatureAlone) {
  // Weights 1 and 2 at temperature 1.
  const std::vector<float> two = log_of({1, 2});
  // T = 0.5 squares the weights: 1 and 4 -> 1/5, 4/5.
  expect_dist(dist(make(plain(0.5f)), two), {{0, 0.2}, {1, 0.8}});
  // T = 2 takes square roots: 1 and sqrt(2) -> 1/(1+sqrt2) = 0.414214, 0.585786.
  expect_dist(dist(make(plain(2.0f)), two), {{0, 0.41421356}, {1, 0.58578644}});
}

TEST(Sampler, TopKRunsBeforeTopP) {
  SamplerParams p = plain();
  p.top_k = 3;
  p.top_p = 0.75f;
  // After top-k: 4/9 = 0.444, 3/9 (sum 0.778 >= 0.75, stop): ids 3, 2 -> 4/7, 3/7.
  // (Top-p on the full row would have kept id 1 too: 0.4, 0.7, 0.9.)
  expect_dist(dist(make(p), kFour), {{3, 4.0 / 7}, {2, 3.0 / 7}});
}

TEST(Sampler, TopPRunsBeforeMinP) {
  SamplerParams p = plain();
  p.top_p = 0.75f;
  p.min_p = 0.45f;
  // Top-p keeps ids 3, 2, 1 (0.4, 0.7, 0.9); min-p threshold 0.45 * 0.4 = 0.18 keeps
  // all three -> 4/9, 3/9, 2/9. (Min-p first, then top-p on 4/9, 3/9, 2/9 would stop
  // at 0.778 and drop id 1.)
  expect_dist(dist(make(p), kFour), {{3, 4.0 / 9}, {2, 3.0 / 9}, {1, 2.0 / 9}});
}

TEST(Sampler, TopPAndMinPSeeProbabilitiesBeforeTemperature) {
  SamplerParams p = plain(0.5f);
  p.top_p = 0.5f;
  // At T = 1: 0.4 < 0.5, 0.7 >= 0.5 -> ids 3, 2. Then T = 0.5 squares the weights:
  // 16 and 9 -> 16/25, 9/25. (At T = 0.5 first, 16/30 = 0.533 alone would reach 0.5.)
  expect_dist(dist(make(p), kFour), {{3, 16.0 / 25}, {2, 9.0 / 25}});

  SamplerParams q = plain(0.5f);
  q.min_p = 0.6f;
  // At T = 1: 0.3 / 0.4 = 0.75 >= 0.6 keeps id 2; at T = 0.5 first, 9/16 = 0.5625 would not.
  expect_dist(dist(make(q), kFour), {{3, 16.0 / 25}, {2, 9.0 / 25}});
}

TEST(Sampler, RepetitionPenaltySignRule) {
  SamplerParams p = plain();
  p.repeat_penalty = 2.0f;
  Sampler s = make(p);
  s.accept(0);
  s.accept(1);
  s.accept(3);
  s.accept(0);  // repeated: still penalized once
  // id 0: 2.0 > 0 -> 2.0 / 2 = 1.0; id 1: -1.0 -> -1.0 * 2 = -2.0;
  // id 2 untouched 0.5; id 3: 0.0 -> 0.0 * 2 = 0.0.
  // Weights e^1, e^-2, e^0.5, e^0 over their sum.
  const double w[] = {std::exp(1.0), std::exp(-2.0), std::exp(0.5), 1.0};
  const double sum = w[0] + w[1] + w[2] + w[3];
  expect_dist(dist(s, {2.0f, -1.0f, 0.5f, 0.0f}),
              {{0, w[0] / sum}, {1, w[1] / sum}, {2, w[2] / sum}, {3, w[3] / sum}});
}

TEST(Sampler, FrequencyAndPresencePenaltiesFollowTheCounts) {
  SamplerParams p = plain();
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s = make(p);
  for (int32_t t : {0, 0, 0, 2}) s.accept(t);
  // id 0 seen 3 times: 1.0 - 3 * 0.5 - 0.25 = -0.75; id 1 unseen: 0.0;
  // id 2 once: 0.5 - 0.5 - 0.25 = -0.25.
  const double w[] = {std::exp(-0.75), 1.0, std::exp(-0.25)};
  const double sum = w[0] + w[1] + w[2];
  expect_dist(dist(s, {1.0f, 0.0f, 0.5f}), {{1, w[1] / sum}, {2, w[2] / sum}, {0, w[0] / sum}});
}

TEST(Sampler, PenaltiesComposeRepetitionFirstAndMakeGreedyNotArgmax) {
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.presence_penalty = -1.0f;  // negative: favours what was said
  Sampler s = make(p);
  EXPECT_FALSE(s.is_argmax());
  s.accept(1);
  // id 1: 1.0 / 2 = 0.5, then + 1.0 = 1.5 > 1.2 -> 1. (Subtracting first and
  // then dividing would give 1.0.)
  EXPECT_EQ(*s.sample(std::vector<float>{1.2f, 1.0f}), 1);
  p.repeat_penalty = 1.0f;
  p.presence_penalty = 0.0f;
  EXPECT_TRUE(make(p).is_argmax());
  p.frequency_penalty = 0.1f;
  EXPECT_FALSE(make(p).is_argmax());
  p.repeat_last_n = 0;  // no window: no penalty at all
  EXPECT_TRUE(make(p).is_argmax());
  p.presence_penalty = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(Sampler::create(p).is_ok());
}

TEST(Sampler, RepetitionPenaltyChangesGreedyChoice) {
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 1.5f;
  Sampler s = make(p);
  s.accept(0);
  // Positive: 1.0 / 1.5 = 0.667 < 0.9 -> id 1.
  EXPECT_EQ(*s.sample(std::vector<float>{1.0f, 0.9f}), 1);
  // Negative: -1.0 * 1.5 = -1.5 < -1.2 -> id 1. (Dividing would give -0.667 and keep id 0.)
  EXPECT_EQ(*s.sample(std::vector<float>{-1.0f, -1.2f}), 1);
  s.reset();  // history gone
  EXPECT_EQ(*s.sample(std::vector<float>{1.0f, 0.9f}), 0);
}

TEST(Sampler, RepetitionPenaltyWindow) {
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 4.0f;
  p.repeat_last_n = 2;
  Sampler s = make(p);
  s.accept(0);
  s.accept(2);
  s.accept(3);  // window is now {2, 3}: id 0 has left it
  // id 0 keeps 1.0 > 0.9 -> 0.
  EXPECT_EQ(*s.sample(std::vector<float>{1.0f, 0.9f, 0.0f, 0.0f}), 0);
  s.accept(0);  // window {3, 0}: 1.0 / 4 = 0.25 < 0.9 -> 1
  EXPECT_EQ(*s.sample(std::vector<float>{1.0f, 0.9f, 0.0f, 0.0f}), 1);
  // Ids outside the row are ignored.
  s.accept(1000);
  s.accept(-7);
  EXPECT_TRUE(s.sample(std::vector<float>{1.0f, 0.9f}).is_ok());

  p.repeat_last_n = 0;  // off
  Sampler off = make(p);
  off.accept(0);
  EXPECT_EQ(*off.sample(std::vector<float>{1.0f, 0.9f}), 0);

  p.repeat_last_n = -1;  // whole history
  Sampler all = make(p);
  all.accept(0);
  for (int i = 0; i < 500; ++i) all.accept(5);
  EXPECT_EQ(*all.sample(std::vector<float>{1.0f, 0.9f}), 1);
}

// Pearson's chi-square statistic of `counts` against probabilities `want`.
double chi_square(const std::map<int32_t, int>& counts, const std::map<int32_t, double>& want,
                  int n) {
  double chi = 0.0;
  for (const auto& [id, p] : want) {
    const double expected = p * n;
    const int got = counts.count(id) ? counts.at(id) : 0;
    chi += (got - expected) * (got - expected) / expected;
  }
  return chi;
}

TEST(Sampler, DrawsMatchSoftmax) {
  Sampler s = make(plain());
  const int n = 40000;
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[*s.sample(kFour)];
  // 3 degrees of freedom: 16.27 is the 0.1% critical value.
  EXPECT_LT(chi_square(counts, {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}}, n), 16.27);
}

TEST(Sampler, DrawsMatchFilteredSoftmax) {
  SamplerParams p = plain(0.5f);
  p.top_k = 3;
  Sampler s = make(p);
  const int n = 40000;
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[*s.sample(kFour)];
  // Top-3 keeps ids 3, 2, 1; T = 0.5 squares weights 4, 3, 2 -> 16, 9, 4 over 29.
  EXPECT_EQ(counts.count(0), 0u);
  // 2 degrees of freedom: 13.82 is the 0.1% critical value.
  EXPECT_LT(chi_square(counts, {{3, 16.0 / 29}, {2, 9.0 / 29}, {1, 4.0 / 29}}, n), 13.82);
}

// A varying sequence of logit rows.
std::vector<float> row(int step, int vocab) {
  std::vector<float> l(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i)
    l[static_cast<size_t>(i)] = static_cast<float>((i * 7 + step * 13) % 17) * 0.25f;
  return l;
}

std::vector<int32_t> run(Sampler& s, int steps) {
  std::vector<int32_t> out;
  for (int i = 0; i < steps; ++i) {
    auto r = s.sample(row(i, 50));
    EXPECT_TRUE(r.is_ok());
    out.push_back(*r);
    s.accept(*r);
  }
  return out;
}

TEST(Sampler, SameSeedSameTokensOtherSeedDifferent) {
  SamplerParams p;  // the defaults: every stage active
  p.repeat_penalty = 1.1f;
  p.seed = 42;
  Sampler a = make(p), b = make(p);
  const auto ta = run(a, 200);
  EXPECT_EQ(ta, run(b, 200));
  a.reset();
  EXPECT_EQ(ta, run(a, 200));  // reset() restarts the generator and the history
  p.seed = 43;
  Sampler c = make(p);
  EXPECT_NE(ta, run(c, 200));
}

TEST(Sampler, LargeVocabularyTopPWithoutTopK) {
  const int vocab = 262144;
  std::vector<float> l(vocab, 0.0f);
  l[100000] = 20.0f;
  l[7] = 20.0f;
  SamplerParams p = plain();
  p.top_p = 0.95f;
  // Each of the two peaks has e^20 / (2 e^20 + 262142) = 0.49986 > 0.475: the first
  // (id 7, lower id on the tie) stays below 0.95, the second crosses it. Both stay, 1/2 each.
  Sampler s = make(p);
  expect_dist(dist(s, l), {{7, 0.5}, {100000, 0.5}});
  for (int i = 0; i < 20; ++i) {
    const int32_t t = *s.sample(l);
    EXPECT_TRUE(t == 7 || t == 100000) << t;
  }
}

TEST(Sampler, LargeVocabularyTopK) {
  const int vocab = 262144;
  std::vector<float> l(vocab);
  for (int i = 0; i < vocab; ++i) l[static_cast<size_t>(i)] = static_cast<float>(i % 1000) * 0.01f;
  SamplerParams p;  // defaults: top_k 40
  Sampler s = make(p);
  auto d = s.distribution(l);
  ASSERT_TRUE(d.is_ok());
  EXPECT_LE(d->size(), 40u);
  // Logit 9.99 (i % 1000 == 999) occurs 262 times; the top 40 are its 40 lowest ids.
  for (const auto& tp : *d) EXPECT_EQ(tp.id % 1000, 999);
  const int32_t t = *s.sample(l);
  EXPECT_EQ(t % 1000, 999);
  EXPECT_LT(t, 40 * 1000);
}

TEST(Sampler, SortedAndUnsortedPathsAgree) {
  // Top-p over the whole row (prefix sorting) and after a top-k that removes nothing
  // but one token far below (full sort) must keep the same set.
  std::vector<float> l = row(3, 600);
  l.push_back(-100.0f);
  SamplerParams p = plain(0.7f);
  p.top_p = 0.8f;
  p.min_p = 0.1f;
  const auto unsorted = dist(make(p), l);
  p.top_k = 600;
  const auto sorted = dist(make(p), l);
  expect_dist(unsorted, sorted);
}

TEST(Sampler, ValidatesParameters) {
  auto expect_error = [](SamplerParams p, const std::string& needle) {
    auto s = Sampler::create(p);
    ASSERT_FALSE(s.is_ok()) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SamplerParams p;
  p.top_p = 0.0f;
  expect_error(p, "top_p = 0");
  p.top_p = 1.5f;
  expect_error(p, "top_p = 1.5");
  p.top_p = nan;
  expect_error(p, "top_p = nan");
  p = {};
  p.min_p = -0.1f;
  expect_error(p, "min_p = -0.1");
  p.min_p = 1.25f;
  expect_error(p, "min_p = 1.25");
  p = {};
  p.top_k = -1;
  expect_error(p, "top_k = -1");
  p = {};
  p.repeat_penalty = 0.0f;
  expect_error(p, "repeat_penalty = 0");
  p.repeat_penalty = -1.0f;
  expect_error(p, "repeat_penalty = -1");
  p = {};
  p.repeat_last_n = -2;
  expect_error(p, "repeat_last_n = -2");
  p = {};
  p.temperature = nan;
  expect_error(p, "temperature = nan");
  p.temperature = kInf;
  expect_error(p, "temperature = inf");
  // Boundaries that are allowed.
  p = {};
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.top_k = 0;
  p.repeat_last_n = -1;
  p.temperature = -0.5f;
  EXPECT_TRUE(Sampler::create(p).is_ok());
  p.min_p = 1.0f;
  EXPECT_TRUE(Sampler::create(p).is_ok());
}

// Stage 0: logit_bias moves a token's logit before anything else looks at it.
TEST(Sampler, LogitBiasPlusHundredMakesGreedyPickTheToken) {
  SamplerParams p = plain(0.0f);
  const std::vector<float> logits = {5.0f, 1.0f, 3.0f, 0.0f};
  EXPECT_EQ(*make(p).sample(logits), 0);
  p.logit_bias = {{3, 100.0f}};
  Sampler s = make(p);
  EXPECT_FALSE(s.is_argmax());  // the device's argmax would not see the bias
  EXPECT_EQ(*s.sample(logits), 3);
  auto d = s.distribution(logits);
  ASSERT_TRUE(d.is_ok());
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ((*d)[0].id, 3);
}

TEST(Sampler, LogitBiasBansATokenUnderEveryFilter) {
  const std::vector<float> logits = {5.0f, 4.0f, 4.0f, 0.0f};
  for (const float ban : {-100.0f, -kInf}) {
    SamplerParams p = plain(1.0f);
    p.top_k = 1;  // top-k sees the biased logits: token 1 (then 2) is the best left
    p.logit_bias = {{0, ban}};
    EXPECT_EQ(*make(p).sample(logits), 1) << ban;
    p = plain(0.0f);
    p.logit_bias = {{0, ban}, {1, ban}};
    EXPECT_EQ(*make(p).sample(logits), 2) << ban;
    if (ban != -kInf) continue;  // -100 only makes it unlikely; the server maps -100 to -inf
    p = plain(1.0f);
    p.logit_bias = {{0, ban}};
    Sampler s = make(p);
    auto d = s.distribution(logits);
    ASSERT_TRUE(d.is_ok());
    for (const TokenProb& t : *d) EXPECT_NE(t.id, 0) << ban;
    for (int i = 0; i < 200; ++i) EXPECT_NE(*s.sample(logits), 0) << ban;
  }
}

TEST(Sampler, LogitBiasComesBeforeThePenalties) {
  // Token 0 was just emitted. Biased first, 1 - 3 = -2 is multiplied by the
  // repetition penalty: -4 < -3, token 1 wins. Biased after the penalty
  // (1 / 2 - 3 = -2.5) or not at all (0.5), token 0 would.
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.logit_bias = {{0, -3.0f}};
  Sampler s = make(p);
  s.accept(0);
  EXPECT_EQ(*s.sample(std::vector<float>{1.0f, -3.0f}), 1);
}

TEST(Sampler, LogitBiasIsDeterministicAndPerSampler) {
  SamplerParams p = plain(1.0f);
  p.logit_bias = {{2, 3.0f}, {2, 1.0f}, {99, 100.0f}};  // twice adds; past the row: ignored
  const std::vector<float> logits = log_of({1, 1, 1, 1});
  Sampler a = make(p), b = make(p), unbiased = make(plain(1.0f));
  int twos = 0;
  for (int i = 0; i < 400; ++i) {
    const int32_t x = *a.sample(logits);
    EXPECT_EQ(x, *b.sample(logits));
    twos += x == 2;
    (void)unbiased.sample(logits);
  }
  // e^4 / (e^4 + 3): about 95% of draws.
  EXPECT_GT(twos, 340);
  auto d = unbiased.distribution(logits);
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->size(), 4u);  // another sampler's bias leaves this one alone
}

TEST(Sampler, LogitBiasRefusesNanPlusInfAndNegativeIds) {
  SamplerParams p = plain();
  p.logit_bias = {{1, std::nanf("")}};
  EXPECT_FALSE(Sampler::create(p).is_ok());
  p.logit_bias = {{1, kInf}};
  EXPECT_FALSE(Sampler::create(p).is_ok());
  p.logit_bias = {{-1, 1.0f}};
  auto s = Sampler::create(p);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("logit_bias"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace minfer::runtime
