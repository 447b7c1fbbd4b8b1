// `minfer bench` end to end, in llama-bench's conventions: value lists and
// ranges form the test matrix, -d runs tests at a depth, every output format
// parses with its outside reader (Python's json and csv modules), the model
// column names the file type as llama.cpp does, and the roofline says which
// bandwidth it divides by. Tiny model and counts; timings are never asserted.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_testutil.h"

namespace minfer::cli {
namespace {

class BenchTest : public CliTest {
 protected:
  // The bench options every test shares: no bandwidth probe, one repetition.
  static std::string bench(const std::string& args) {
    return "bench -m " + model() + " -r 1 -t 1 --bandwidth 10 " + args;
  }

  // The test column of each row of an md table.
  static std::vector<std::string> md_tests(const std::string& out) {
    std::vector<std::string> tests;
    std::istringstream lines(out);
    std::string line;
    int row = 0;
    while (std::getline(lines, line)) {
      if (line.rfind("| ", 0) != 0 || row++ < 2) continue;  // title and rule rows
      std::vector<std::string> cells;
      std::istringstream cols(line.substr(1));
      std::string cell;
      while (std::getline(cols, cell, '|')) {
        const size_t first = cell.find_first_not_of(' ');
        cells.push_back(first == std::string::npos
                            ? ""
                            : cell.substr(first, cell.find_last_not_of(' ') - first + 1));
      }
      if (cells.size() >= 7) tests.push_back(cells[5]);
    }
    return tests;
  }

  // Runs a Python 3 program on `file`; returns what it printed (stderr too).
  static std::string python(const std::string& program, const fs::path& file) {
    return minfer_shell("python3 -c " + q(program) + " " + q(file.string()) + " 2>&1").out;
  }

  // Runs bench with `args`, its stdout into `name`; asserts success.
  static fs::path bench_to_file(const std::string& args, const std::string& name) {
    const fs::path file = path(name);
    const Outcome r = minfer(bench(args) + " >" + q(file.string()));
    EXPECT_EQ(r.code, 0) << r.err;
    return file;
  }
};

using Names = std::vector<std::string>;

TEST_F(BenchTest, ListsFormTheTestMatrix) {
  Outcome r = minfer(bench("-p 8,16 -n 0"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(md_tests(r.out), Names({"pp8", "pp16"})) << r.out;

  r = minfer(bench("-p 0 -n 2-4*2"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(md_tests(r.out), Names({"tg2", "tg4"})) << r.out;

  // llama-bench's order: for each depth, the pp tests, then tg, then pg.
  r = minfer(bench("-p 4-8+4 -n 2 -d 0,8 -pg 4,2"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(md_tests(r.out), Names({"pp4", "pp8", "tg2", "pp4+tg2", "pp4 @ d8", "pp8 @ d8",
                                    "tg2 @ d8", "pp4+tg2 @ d8"}))
      << r.out;
}

TEST_F(BenchTest, ThreadAndBatchLists) {
  const fs::path file = bench_to_file("-p 8 -n 2 -t 1,2 -b 4,8 -o jsonl", "tb.jsonl");
  EXPECT_EQ(
      python("import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; "
             "print([(x['n_batch'], x['n_threads'], x['n_prompt'], x['n_gen']) for x in rows])",
             file),
      "[(4, 1, 8, 0), (4, 1, 0, 2), (4, 2, 8, 0), (4, 2, 0, 2), "
      "(8, 1, 8, 0), (8, 1, 0, 2), (8, 2, 8, 0), (8, 2, 0, 2)]\n");
  // -b given: the md table shows it.
  const Outcome r = minfer(bench("-p 8 -n 0 -b 4"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| n_batch |"), std::string::npos) << r.out;
}

TEST_F(BenchTest, DepthRunsTestsAfterAContext) {
  const Outcome r = minfer(bench("-p 8 -n 2 -d 16"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(md_tests(r.out), Names({"pp8 @ d16", "tg2 @ d16"})) << r.out;
  const fs::path file = bench_to_file("-p 8 -n 2 -d 16 -o json", "depth.json");
  EXPECT_EQ(python("import json,sys; d=json.load(open(sys.argv[1])); "
                   "print([(x['n_prompt'], x['n_gen'], x['n_depth']) for x in d])",
                   file),
            "[(8, 0, 16), (0, 2, 16)]\n");
  // The context must hold depth + test: -c 20 cannot hold pp8 @ d16.
  const Outcome small = minfer(bench("-p 8 -n 0 -d 16 -c 20"));
  expect_error(small, "bench", "--ctx-size 20 is smaller than the 24 tokens test pp8 @ d16 needs");
  EXPECT_EQ(small.out, "");  // checked before the table begins
}

TEST_F(BenchTest, JsonHasLlamaBenchFields) {
  // --json is an alias of -o json.
  const fs::path file = bench_to_file("-p 8 -n 4 -r 3 -t 2 --json", "bench.json");
  EXPECT_EQ(
      python("import json,sys; d=json.load(open(sys.argv[1])); assert len(d) == 2, d; "
             "pp, tg = d; "
             "assert (pp['n_prompt'], pp['n_gen'], tg['n_prompt'], tg['n_gen']) == (8, 0, 0, 4); "
             "assert all(x['n_threads'] == 2 and len(x['samples_ts']) == 3 "
             "and len(x['samples_ns']) == 3 and x['avg_ts'] > 0 and x['avg_ns'] > 0 "
             "and x['stddev_ts'] >= 0 and x['model_size'] > 0 and x['model_n_params'] > 0 "
             "and x['model_type'] == 'qwen2 1.3M Q8_0' and x['n_depth'] == 0 "
             "and x['type_k'] == 'f16' and x['backends'] in ('CPU', 'CUDA') "
             "and x['test_time'].endswith('Z') "
             "and x['model_filename'].endswith('tiny.gguf') for x in d); "
             "assert tg['roofline_fraction'] > 0 and 'roofline_fraction' not in pp; "
             "assert tg['read_bandwidth_gbs'] == 10 "
             "and tg['bandwidth_source'] == 'given (--bandwidth)'; "
             "print('ok')",
             file),
      "ok\n")
      << read_file(file);
}

TEST_F(BenchTest, JsonlAndCsvParse) {
  const fs::path jsonl = bench_to_file("-p 8 -n 2 -o jsonl", "bench.jsonl");
  EXPECT_EQ(python("import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; "
                   "print(len(rows), rows[1]['n_gen'], len(rows[1]['samples_ns']))",
                   jsonl),
            "2 2 1\n");
  const fs::path csv = bench_to_file("-p 8 -n 2 -o csv", "bench.csv");
  EXPECT_EQ(python("import csv,sys; rows=list(csv.reader(open(sys.argv[1]))); "
                   "print(','.join(rows[0][:17])); h=rows[0]; print(len(rows) - 1, "
                   "[r[h.index('n_prompt')] + '/' + r[h.index('n_gen')] for r in rows[1:]], "
                   "[r[h.index('bandwidth_source')] for r in rows[1:]])",
                   csv),
            "backends,model_filename,model_type,model_size,model_n_params,n_batch,n_threads,"
            "type_k,type_v,"
            "n_prompt,n_gen,n_depth,test_time,avg_ns,stddev_ns,avg_ts,stddev_ts\n"
            "2 ['8/0', '0/2'] ['', 'given (--bandwidth)']\n");
}

TEST_F(BenchTest, ModelColumnNamesTheFileType) {
  const fs::path q4km = path("tiny_q4km.gguf");
  Outcome r = minfer("synth --model tiny-qwen2 -q Q4_K_M -s -o " + q(q4km.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  r = minfer("bench -m " + q(q4km.string()) + " -p 4 -n 0 -r 1 -t 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| qwen2 1.3M Q4_K - Medium "), std::string::npos) << r.out;
  r = minfer(bench("-p 4 -n 0"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| qwen2 1.3M Q8_0 "), std::string::npos) << r.out;
}

TEST_F(BenchTest, OutputSaysWhichBandwidth) {
  Outcome r = minfer(bench("-p 8 -n 4"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("roofline bandwidth: 10.00 GB/s, given (--bandwidth)"), std::string::npos)
      << r.out;
  // Measured: the host's read bandwidth, best of five passes (or, where the
  // session runs on a GPU, the device's copy bandwidth).
  r = minfer("bench -m " + model() + " -p 0 -n 2 -r 1 -t 1");
  ASSERT_EQ(r.code, 0) << r.err;
  const bool host = r.out.find("GB/s, measured (best of 5, 1 thread)") != std::string::npos;
  const bool device =
      r.out.find("GB/s, measured on the GPU (device copy, best of 5)") != std::string::npos;
  EXPECT_TRUE(host || device) << r.out;
  // A pp-only run divides by nothing and measures nothing.
  r = minfer("bench -m " + model() + " -p 4 -n 0 -r 1 -t 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("roofline bandwidth"), std::string::npos) << r.out;
}

TEST_F(BenchTest, WarmupAndDelayOptions) {
  Outcome r = minfer(bench("-p 4 -n 2 --no-warmup --delay 0"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(md_tests(r.out), Names({"pp4", "tg2"})) << r.out;
  r = minfer(bench("-p 4 --delay -1"));
  expect_error(r, "bench", "option '--delay': -1 is out of range (0 to 3600)");
}

TEST_F(BenchTest, BadValuesAreUsageErrors) {
  const std::pair<std::string, std::string> cases[] = {
      {"-p 512,abc", "-p 512,abc: 'abc' is not an integer"},
      {"-p many", "-p many: 'many' is not an integer"},
      {"-n 16-8", "-n 16-8: '16-8' is an empty range (LAST is below FIRST)"},
      {"-p 1-100000", "-p 1-100000: more than 1000 values"},
      {"-d -1", "-d -1: -1 is out of range (0 to 16777216)"},
      {"--n-depth 8,", "--n-depth 8,: an empty item"},
      {"-b 0", "-b 0: 0 is out of range (1 to 16777216)"},
      {"-t 1,x", "-t 1,x: 'x' is not an integer"},
      {"-p -3", "-p -3: -3 is out of range (0 to 16777216)"},
      {"-p 0 -n 0", "no test to run: every -p and -n value is 0 and no -pg"},
      {"-pg 8", "-pg 8: give PROMPT,GEN (two counts, not both 0)"},
      {"-p 1-20 -n 0 -d 0-99", "2000 tests: more than 1000"},
      {"-r 0", "option '-r': 0 is out of range (1 to 1000000)"},
      {"-o xml", "-o xml: unknown output format (md, json, jsonl, csv)"},
      {"--json -o csv", "--json is -o json: it cannot go with -o csv"},
      {"--bandwidth -1", "option '--bandwidth': -1 is out of range"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    const Outcome r = minfer("bench -m " + model() + " " + args);
    expect_error(r, "bench", message);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.out, "");
  }
  const Outcome r = minfer("bench -m " + model() + " --frobnicate");
  expect_error(r, "bench", "unknown option '--frobnicate'");
  EXPECT_EQ(r.code, 2);
}

}  // namespace
}  // namespace minfer::cli
