// `minfer batched-bench`: llama-batched-bench's table over the engine.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_testutil.h"

namespace minfer::cli {
namespace {

// The table's data rows, each split into its cells.
std::vector<std::vector<std::string>> rows(const std::string& out) {
  std::vector<std::vector<std::string>> table;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| ", 0) != 0 || line.find("PP") != std::string::npos) continue;
    std::vector<std::string> cells;
    std::istringstream cs(line.substr(1));
    std::string cell;
    while (std::getline(cs, cell, '|')) {
      const size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
      if (a != std::string::npos) cells.push_back(cell.substr(a, b - a + 1));
    }
    table.push_back(cells);
  }
  return table;
}

TEST_F(CliTest, BatchedBenchRunsEveryCase) {
  const Outcome r = minfer("batched-bench -m " + model() + " -npp 16,24 -ntg 4 -npl 1,3 -t 2");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto t = rows(r.out);
  ASSERT_EQ(t.size(), 4u) << r.out;
  const std::vector<std::vector<std::string>> want = {{"16", "4", "1", "20"},
                                                      {"16", "4", "3", "60"},
                                                      {"24", "4", "1", "28"},
                                                      {"24", "4", "3", "84"}};
  for (size_t i = 0; i < t.size(); ++i) {
    ASSERT_EQ(t[i].size(), 13u) << r.out;  // llama-batched-bench's 10, TTFT, reused, fwd %
    EXPECT_EQ(std::vector<std::string>(t[i].begin(), t[i].begin() + 4), want[i]);
    EXPECT_EQ(t[i][11], "0") << "distinct prompts share no page";
  }
}

TEST_F(CliTest, BatchedBenchSharedPromptReusesPages) {
  const Outcome r =
      minfer("batched-bench -m " + model() + " -npp 40 -ntg 2 -npl 2 -pps --page-size 8 -t 2");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto t = rows(r.out);
  ASSERT_EQ(t.size(), 1u) << r.out;
  EXPECT_EQ(t[0][11], "64") << "two sequences, four whole pages of 8 each";
}

// A shared system prompt: only the prefix's whole pages are reused, the rest
// of each prompt is its own.
TEST_F(CliTest, BatchedBenchSharedPrefixReusesOnlyItsPages) {
  const Outcome r = minfer("batched-bench -m " + model() +
                           " -npp 40 --prefix 24 -ntg 2 -npl 2 -pps --page-size 8 -t 2");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto t = rows(r.out);
  ASSERT_EQ(t.size(), 1u) << r.out;
  EXPECT_EQ(t[0][11], "48") << "two sequences, the prefix's three pages of 8 each";
  // Without -pps nothing computed the prefix beforehand: the second sequence
  // waits for the first one's pages, unless --no-await-prefill.
  const std::string cold = "batched-bench -m " + model() + " -npp 40 --prefix 24 -ntg 2 -npl 2 " +
                           "--page-size 8 -b 8 -t 2";
  for (const bool await : {true, false}) {
    const Outcome r2 = minfer(cold + (await ? "" : " --no-await-prefill"));
    ASSERT_EQ(r2.code, 0) << r2.err;
    const auto u = rows(r2.out);
    ASSERT_EQ(u.size(), 1u) << r2.out;
    EXPECT_EQ(u[0][11], await ? "24" : "0") << r2.out;
  }
}

TEST_F(CliTest, BatchedBenchJsonLinesParse) {
  const fs::path out = path("bb.jsonl");
  const Outcome r = minfer("batched-bench -m " + model() +
                           " -npp 8 -ntg 3 -npl 1,2 --json -t 2 > " + q(out.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string check =
      "import json,sys\nrows=[json.loads(l) for l in open(sys.argv[1])]\n"
      "assert [(x['pp'],x['tg'],x['pl'],x['n_kv']) for x in rows]==[(8,3,1,11),(8,3,2,22)],rows\n"
      "assert all(x['speed_tg']>0 and x['t']>0 and 'ttft' in x for x in rows)\nprint('ok')\n";
  const Outcome py = minfer_shell("python3 -c " + q(check) + " " + q(out.string()));
  EXPECT_EQ(py.out, "ok\n") << py.err << read_file(out);
}

TEST_F(CliTest, BatchedBenchRejectsBadLists) {
  Outcome r = minfer("batched-bench -m " + model() + " -npl 0");
  expect_error(r, "batched-bench", "-npl 0");
  r = minfer("batched-bench -m " + model() + " -npp 16 -ntg 4 -c 10");
  expect_error(r, "batched-bench", "-c 10: PP 16 + TG 4 need 21 tokens per sequence");
  r = minfer("batched-bench -m " + model() + " -npp 16,40 --prefix 24");
  expect_error(r, "batched-bench", "--prefix 24 is longer than the prompt (PP 16)");
}

}  // namespace
}  // namespace minfer::cli
