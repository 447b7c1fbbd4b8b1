// `minfer run` with speculative decoding: its output is byte-identical to
// decoding one token per step on the same kernels (`--draft-max 0`),
// greedy and seeded sampling, on a synthetic model and on Gemma 3 270M;
// the stderr summary reports the drafts; bad flags are refused by name.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "cli/cli_testutil.h"
#include "test_models.h"

namespace minfer::cli {
namespace {

// "speculative: D drafted, A accepted (...)" from stderr; -1s when absent.
std::pair<long, long> drafts_of(const std::string& err) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex(R"(speculative: (\d+) drafted, (\d+) accepted)"))) {
    return {-1, -1};
  }
  return {std::stol(m[1]), std::stol(m[2])};
}

class SpeculativeCliTest : public CliTest {
 protected:
  static std::pair<long, long> expect_identical(const std::string& run, const std::string& spec);
};

// The same run with and without drafts: identical stdout; the drafts counted.
std::pair<long, long> SpeculativeCliTest::expect_identical(const std::string& run,
                                                           const std::string& spec) {
  const Outcome ref = minfer_shell(run + " " + spec + " --draft-max 0");  // (the last wins)
  const Outcome got = minfer_shell(run + " " + spec);
  EXPECT_EQ(ref.code, 0) << ref.err;
  EXPECT_EQ(got.code, 0) << got.err;
  EXPECT_FALSE(got.out.empty());
  EXPECT_EQ(got.out, ref.out) << "speculation changed the output";
  EXPECT_EQ(drafts_of(ref.err), std::make_pair(0L, 0L)) << ref.err;
  const auto d = drafts_of(got.err);
  EXPECT_GE(d.second, 0) << got.err;
  EXPECT_LE(d.second, d.first) << got.err;
  return d;
}

TEST_F(SpeculativeCliTest, SyntheticModelOutputIsIdentical) {
  const std::string run = q(MINFER_BINARY) + " run -m " + model() + " -t 2 -n 40 -c 128 -p " +
                          q("a b c a b c a b c a b c");
  expect_identical(run + " --temp 0", "--spec ngram --spec-ngram-min 1");
  expect_identical(run + " --temp 0.9 --seed 17", "--spec ngram --spec-ngram-min 1");
  // The target as its own draft model: every greedy draft is its choice.
  const auto d = expect_identical(run + " --temp 0", "-md " + model() + " --draft-p-min 0");
  EXPECT_GT(d.first, 0);
  EXPECT_EQ(d.second, d.first);
}

TEST_F(SpeculativeCliTest, Gemma3RepeatedListIsIdenticalAndDraftsAreAccepted) {
  const std::string gemma = minfer::testing::gemma3_model_path();
  ASSERT_FALSE(gemma.empty()) << minfer::testing::kMissingGemma3;
  const std::string prompt =
      "Repeat this list three times: apple, banana, cherry, date, elderberry, fig, grape.\n"
      "apple, banana, cherry, date, elderberry, fig, grape.\n";
  const std::string run = q(MINFER_BINARY) + " run -m " + q(gemma) +
                          " -t 2 -n 64 -c 512 --no-display-prompt -p " + q(prompt);
  const auto greedy = expect_identical(run + " --temp 0", "--spec ngram");
  EXPECT_GT(greedy.second, 0) << "no draft was accepted";
  const auto sampled = expect_identical(run + " --temp 0.7 --seed 3", "--spec ngram --draft-max 8");
  EXPECT_GT(sampled.first, 0);
}

TEST_F(SpeculativeCliTest, BatchedBenchReportsTheDrafts) {
  const Outcome r = minfer("batched-bench -m " + model() +
                           " -t 2 -npp 16 -ntg 24 -npl 2 --spec ngram --spec-ngram-min 1");
  EXPECT_EQ(r.code, 0) << r.err;
  const auto d = drafts_of(r.out);
  EXPECT_GE(d.first, 0) << r.out;
  EXPECT_LE(d.second, d.first) << r.out;
  const Outcome j =
      minfer("batched-bench -m " + model() + " -t 2 -npp 16 -ntg 8 -npl 1 --json --spec ngram");
  EXPECT_EQ(j.code, 0) << j.err;
  EXPECT_NE(j.out.find("\"draft_n_accepted\": "), std::string::npos) << j.out;
}

TEST_F(SpeculativeCliTest, BadFlagsAreRefused) {
  const std::string run = "run -m " + model() + " -p hi -n 2 ";
  expect_error(minfer(run + "--spec lookahead"), "run", "--spec lookahead: unknown type");
  expect_error(minfer(run + "--spec draft"), "run", "needs a draft model (-md FILE)");
  expect_error(minfer(run + "--spec ngram --spec-ngram-min 5 --spec-ngram-max 3"), "run",
               "n-gram sizes 5 to 3");
  expect_error(minfer(run + "--spec ngram --draft-max -1"), "run", "--draft-max");
  const std::string gemma = minfer::testing::gemma3_model_path();
  ASSERT_FALSE(gemma.empty()) << minfer::testing::kMissingGemma3;
  expect_error(minfer(run + "-md " + q(gemma)), "run", "the draft model's vocabulary has");
}

}  // namespace
}  // namespace minfer::cli
