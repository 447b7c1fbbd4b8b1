// The `minfer` binary end to end: bad input never crashes and always gives a
// message that names what was wrong, with a non-zero exit; the good paths
// (inspect, tokenize, run, perplexity) print what they promise and are
// reproducible when seeded.
#include <gtest/gtest.h>

#include <cmath>

#include <string>

#include "cli/cli_testutil.h"
#include "free_port.h"
#include "gguf/writer.h"

namespace minfer::cli {
namespace {

TEST_F(CliTest, MissingModelFile) {
  const std::string missing = path("no_such_model.gguf").string();
  const Outcome r = minfer("run -m " + q(missing) + " -p hi");
  expect_error(r, "run", "'" + missing + "'");
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_EQ(r.code, 1);
}

TEST_F(CliTest, NoModelGiven) {
  const Outcome r = minfer("run -p hi");
  expect_error(r, "run", "no model given (-m FILE.gguf)");
}

TEST_F(CliTest, TextFileIsNotGguf) {
  write("notes.txt", "hello, this is not a model\n");
  const Outcome r = minfer("run -m " + q(path("notes.txt").string()) + " -p hi");
  expect_error(r, "run", "notes.txt");
  EXPECT_NE(r.err.find("not a GGUF file"), std::string::npos) << r.err;
}

TEST_F(CliTest, EmptyFileIsNotGguf) {
  write("empty.gguf", "");
  const Outcome r = minfer("run -m " + q(path("empty.gguf").string()) + " -p hi");
  expect_error(r, "run", "empty.gguf");
}

TEST_F(CliTest, UnsupportedArchitecture) {
  gguf::Writer w;
  w.set_string("general.architecture", "mamba");
  w.set_u32("mamba.block_count", 2);
  ASSERT_TRUE(w.add_tensor("token_embd.weight", quant::TensorType::F32, {32, 4},
                           std::vector<uint8_t>(32 * 4 * 4, 0))
                  .is_ok());
  ASSERT_TRUE(w.write(path("mamba.gguf").string()).is_ok());
  const Outcome r = minfer("run -m " + q(path("mamba.gguf").string()) + " -p hi");
  expect_error(r, "run", "unsupported architecture 'mamba'");
  EXPECT_NE(r.err.find("mamba.gguf"), std::string::npos) << r.err;
  // inspect reads any GGUF, whatever its architecture.
  const Outcome i = minfer("inspect " + q(path("mamba.gguf").string()));
  EXPECT_EQ(i.code, 0) << i.err;
  EXPECT_NE(i.out.find("\"mamba\""), std::string::npos) << i.out;
}

TEST_F(CliTest, TruncatedGguf) {
  const std::string whole = read_file(path("tiny.gguf"));
  ASSERT_GT(whole.size(), 100000u);
  // Cut inside the metadata, and inside the tensor data.
  for (size_t keep : {size_t{1000}, whole.size() / 2}) {
    SCOPED_TRACE(keep);
    write("cut.gguf", whole.substr(0, keep));
    const Outcome r = minfer("run -m " + q(path("cut.gguf").string()) + " -p hi");
    expect_error(r, "run", "cut.gguf");
    const Outcome i = minfer("inspect " + q(path("cut.gguf").string()));
    expect_error(i, "inspect", "cut.gguf");
    EXPECT_EQ(i.out, "");
  }
}

TEST_F(CliTest, PromptLongerThanContext) {
  const Outcome r =
      minfer("run -m " + model() + " -c 8 -n 4 -p 'the quick brown fox jumps over the lazy dog'");
  expect_error(r, "run", "more than the context of 8 allows");
  EXPECT_NE(r.err.find("the prompt has "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("-c"), std::string::npos) << r.err;
}

TEST_F(CliTest, InvalidUtf8Prompt) {
  write("bad_prompt.txt", "\xff\xfe hello");
  const Outcome r = minfer("run -m " + model() + " -n 4 -f " + q(path("bad_prompt.txt").string()));
  expect_error(r, "run", "invalid UTF-8");
  EXPECT_NE(r.err.find("prompt"), std::string::npos) << r.err;
  // Invalid bytes after valid text: the offset is reported.
  write("bad_tail.txt", "abc\xc3");
  const Outcome t = minfer("tokenize -m " + model() + " -f " + q(path("bad_tail.txt").string()));
  expect_error(t, "tokenize", "invalid UTF-8");
  EXPECT_NE(t.err.find("3"), std::string::npos) << t.err;
}

TEST_F(CliTest, MissingPromptFile) {
  const std::string missing = path("nowhere.txt").string();
  const Outcome r = minfer("run -m " + model() + " -f " + q(missing));
  expect_error(r, "run", "cannot read prompt file '" + missing + "'");
}

TEST_F(CliTest, PromptFileIsADirectory) {
  const std::string d = dir_.string();
  for (const char* command : {"run", "tokenize", "perplexity"}) {
    const Outcome r = minfer(std::string(command) + " -m " + model() + " -f " + q(d));
    expect_error(r, command, "prompt file '" + d + "' is a directory");
  }
}

// A GGUF of a supported architecture whose hyper-parameters are missing: the
// error names the missing key.
TEST_F(CliTest, MissingHyperParameter) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  ASSERT_TRUE(
      w.add_tensor("t", quant::TensorType::F32, {32}, std::vector<uint8_t>(128, 0)).is_ok());
  ASSERT_TRUE(w.write(path("bare.gguf").string()).is_ok());
  const Outcome r = minfer("run -m " + q(path("bare.gguf").string()) + " -p hi");
  expect_error(r, "run", "bare.gguf");
  EXPECT_NE(r.err.find("llama."), std::string::npos) << r.err;
}

TEST_F(CliTest, NonPositiveTokenCount) {
  for (const char* n : {"0", "-5"}) {
    const Outcome r = minfer("run -m " + model() + " -p hi -n " + n);
    expect_error(r, "run", std::string("option '-n': ") + n + " is out of range (1 to 16777216)");
  }
  const Outcome r = minfer("run -m " + model() + " -p hi -n lots");
  expect_error(r, "run", "'lots' is not an integer");
}

TEST_F(CliTest, UnknownFlag) {
  const Outcome r = minfer("run -m " + model() + " -p hi --frobnicate 3");
  expect_error(r, "run", "unknown option '--frobnicate'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("usage: minfer run"), std::string::npos) << r.err;
}

TEST_F(CliTest, MissingFlagValue) {
  for (const char* flag : {"-n", "-c", "-m", "--temp"}) {
    const Outcome r = minfer(std::string("run -p hi ") + flag);
    expect_error(r, "run", std::string("option '") + flag + "' needs a value");
    EXPECT_EQ(r.code, 2);
  }
}

TEST_F(CliTest, BadOptionValues) {
  Outcome r = minfer("run -m " + model() + " -p hi -c 0");
  expect_error(r, "run", "option '-c': 0 is out of range (1 to 16777216)");
  r = minfer("run -m " + model() + " -p hi --cache-type q3");
  expect_error(r, "run", "cache type 'q3' is not supported");
  r = minfer("run -m " + model() + " -p hi --top-p 2");
  expect_error(r, "run", "option '--top-p': 2 is out of range (0 to 1)");
  r = minfer("run -m " + model() + " -p hi --top-p 0");
  expect_error(r, "run", "top_p = 0");
  r = minfer("run -m " + model() + " -p hi --temp warm");
  expect_error(r, "run", "option '--temp': 'warm' is not a finite number");
  r = minfer("run -m " + model() + " -p hi --temp nan");
  expect_error(r, "run", "option '--temp': 'nan' is not a finite number");
}

TEST_F(CliTest, UnknownCommand) {
  const Outcome r = minfer("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos) << r.err;
  const Outcome none = minfer("");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("usage: minfer <command>"), std::string::npos) << none.err;
}

TEST_F(CliTest, InspectGoodFile) {
  const Outcome r = minfer("inspect " + model());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("GGUF v3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("general.architecture"), std::string::npos);
  EXPECT_NE(r.out.find("\"qwen2\""), std::string::npos);
  EXPECT_NE(r.out.find("token_embd.weight"), std::string::npos);
  EXPECT_NE(r.out.find("totals: "), std::string::npos);
}

TEST_F(CliTest, InspectJsonParses) {
  for (const char* extra : {"", " --full"}) {
    const fs::path json = path("inspect.json");
    const Outcome r =
        minfer(std::string("inspect --json") + extra + " " + model() + " >" + q(json.string()));
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string check =
        "python3 -c 'import json,sys; d=json.loads(sys.stdin.buffer.read().decode(\"utf-8\")); "
        "t={x[\"name\"] for x in d[\"tensors\"]}; "
        "m={x[\"key\"]: x[\"value\"] for x in d[\"metadata\"]}; "
        "assert \"token_embd.weight\" in t, t; "
        "assert m[\"general.architecture\"] == \"qwen2\", m; "
        "assert d[\"totals\"][\"tensors\"] == len(d[\"tensors\"]); print(\"ok\")' <" +
        q(json.string()) + " 2>&1";
    const Outcome py = minfer_shell(check);
    const std::string& text = py.out;
    EXPECT_EQ(py.code, 0) << text;
    EXPECT_EQ(text, "ok\n") << "inspect --json" << extra;
  }
}

// Metadata strings are bytes: control characters and invalid UTF-8 must still
// come out as JSON that parses.
TEST_F(CliTest, InspectJsonEscapesOddStrings) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", std::string("tab\there \x01 del\x7f bad\xff\xfe end"));
  w.set_string("general.description", "quote \" backslash \\ newline \n é ✓");
  ASSERT_TRUE(
      w.add_tensor("t", quant::TensorType::F32, {32}, std::vector<uint8_t>(128, 0)).is_ok());
  ASSERT_TRUE(w.write(path("odd.gguf").string()).is_ok());
  const fs::path json = path("odd.json");
  const Outcome r =
      minfer("inspect --json " + q(path("odd.gguf").string()) + " >" + q(json.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string check =
      "python3 -c 'import json,sys; d=json.loads(sys.stdin.buffer.read().decode(\"utf-8\")); "
      "m={x[\"key\"]: x[\"value\"] for x in d[\"metadata\"]}; "
      "print(m[\"general.description\"]); print(json.dumps(m[\"general.name\"]))' <" +
      q(json.string()) + " 2>&1";
  const Outcome py = minfer_shell(check);
  const std::string& text = py.out;
  EXPECT_EQ(py.code, 0) << text << read_file(json);
  EXPECT_EQ(text,
            "quote \" backslash \\ newline \n é ✓\n"
            "\"tab\\there \\u0001 del\\u007f bad\\ufffd\\ufffd end\"\n");
}

TEST_F(CliTest, InspectBadFiles) {
  Outcome r = minfer("inspect " + q(path("absent.gguf").string()));
  expect_error(r, "inspect", "absent.gguf");
  write("notes2.txt", "plain text");
  r = minfer("inspect --json " + q(path("notes2.txt").string()));
  expect_error(r, "inspect", "not a GGUF file");
  EXPECT_EQ(r.out, "") << "no partial JSON on error";
  r = minfer("inspect");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no FILE given"), std::string::npos) << r.err;
}

TEST_F(CliTest, TokenizeIds) {
  const Outcome r = minfer("tokenize -m " + model() + " -p 'hello world' --ids");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_GE(r.out.size(), 3u);
  EXPECT_EQ(r.out.front(), '[');
  EXPECT_EQ(r.out.substr(r.out.size() - 2), "]\n");
  // [a, b, ...]: integers separated by ", ".
  std::istringstream items(r.out.substr(1, r.out.size() - 3));
  std::string item;
  int count = 0;
  while (std::getline(items, item, ',')) {
    if (count > 0) {
      ASSERT_EQ(item.front(), ' ') << r.out;
      item = item.substr(1);
    }
    ASSERT_FALSE(item.empty()) << r.out;
    for (char c : item) ASSERT_TRUE(c >= '0' && c <= '9') << r.out;
    ++count;
  }
  EXPECT_GE(count, 2) << r.out;
  // Same ids as the one-per-line form.
  const Outcome lines = minfer("tokenize -m " + model() + " -p 'hello world' --show-count");
  ASSERT_EQ(lines.code, 0) << lines.err;
  EXPECT_NE(lines.out.find("Total number of tokens: " + std::to_string(count)), std::string::npos)
      << lines.out;
}

TEST_F(CliTest, GreedyRunIsReproducible) {
  const std::string args = "run -m " + model() + " -p 'Once upon a time' -n 12 --temp 0 -t 2";
  const Outcome a = minfer(args);
  const Outcome b = minfer(args);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out.rfind("Once upon a time", 0), 0u) << a.out;
  EXPECT_GT(a.out.size(), std::string("Once upon a time\n").size()) << "nothing generated";
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.err.find("generation: 12 tokens"), std::string::npos) << a.err;
}

TEST_F(CliTest, SeededSamplingIsReproducible) {
  const std::string args =
      "run -m " + model() + " -p 'Once upon a time' -n 12 --seed 5 --temp 1 -t 2";
  const Outcome a = minfer(args);
  const Outcome b = minfer(args);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.err.find("seed: 5,"), std::string::npos) << a.err;
}

TEST_F(CliTest, Perplexity) {
  const std::string text = std::string(MINFER_SOURCE_DIR) + "/tests/data/text.txt";
  const Outcome r = minfer("perplexity -m " + model() + " -f " + q(text) + " -c 64 --chunks 3");
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t at = r.out.find("\nFinal estimate: PPL = ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_EQ(r.out.rfind("[1]", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("[3]"), std::string::npos) << r.out;
  // The estimate is a finite positive number: a random model over a 512-token
  // vocabulary scores in the hundreds, never beyond the vocabulary size by far.
  const double ppl = std::stod(r.out.substr(at + std::string("\nFinal estimate: PPL = ").size()));
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 5000.0);
  // Too short a text: names both counts.
  const Outcome s = minfer("perplexity -m " + model() + " -p 'too short' -c 64");
  expect_error(s, "perplexity", "the text has 10 tokens, fewer than one chunk of 64");
}

// Tensor parallelism on CPU ranks (docs/PARALLEL.md): -tp 2, -tp 4 and
// llama.cpp's --tensor-split of two equal shares score the text within 0.01
// in ln PPL of -tp 1 (the ranks' partial sums add in another order); shares
// that differ, ranks that do not divide the heads, and a count that
// disagrees are refused.
TEST_F(CliTest, TensorParallelPerplexity) {
  const std::string text = std::string(MINFER_SOURCE_DIR) + "/tests/data/text.txt";
  const std::string base = "perplexity -m " + model() + " -f " + q(text) + " -c 64 --chunks 2";
  auto ln_ppl = [](const Outcome& r) {
    const std::string key = "Final estimate: PPL = ";
    const size_t at = r.out.find(key);
    return at == std::string::npos ? 0.0 : std::log(std::stod(r.out.substr(at + key.size())));
  };
  const Outcome one = minfer(base + " -tp 1");
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_GT(ln_ppl(one), 1.0) << one.out;
  for (const char* flags : {" -tp 2", " --tensor-parallel-size 4", " --tensor-split 1,1"}) {
    const Outcome r = minfer(base + flags);
    ASSERT_EQ(r.code, 0) << flags << ": " << r.err;
    EXPECT_NEAR(ln_ppl(r), ln_ppl(one), 0.01) << flags << ": " << r.out;
  }
  expect_error(minfer(base + " --tensor-split 3,1"), "perplexity", "minfer splits evenly");
  expect_error(minfer(base + " -tp 3"), "perplexity", "query heads (4) to divide by 3");
  expect_error(minfer(base + " -tp 4 --tensor-split 1,1"), "perplexity",
               "--tensor-split names 2 ranks");
}

// One rank per process: three `minfer tp-worker` processes and `perplexity
// -tp 4 --tp-init` as rank 0 give the bits the four ranks give as threads of
// one process (the same parts, the same sums in rank order), and every
// worker exits cleanly when rank 0 ends. A worker told another rank count
// is refused at the handshake.
TEST_F(CliTest, TensorParallelProcesses) {
  const std::string text = std::string(MINFER_SOURCE_DIR) + "/tests/data/text.txt";
  const std::string ppl = "perplexity -m " + model() + " -f " + q(text) + " -c 64 --chunks 2";
  const Outcome threads = minfer(ppl + " -tp 4 -t 4");
  ASSERT_EQ(threads.code, 0) << threads.err;
  const int port = minfer::testing::free_loopback_port();
  ASSERT_GT(port, 0);
  const std::string at = " --tp-init 127.0.0.1:" + std::to_string(port);
  const std::string bin = q(MINFER_BINARY);
  std::string line = "pids=;";
  for (int r = 1; r < 4; ++r) {
    line += bin + " tp-worker -m " + model() + " -tp 4 --tp-rank " + std::to_string(r) + at +
            " -t 1 --tp-timeout 60 2>" + q(path("worker" + std::to_string(r) + ".txt").string()) +
            " & pids=\"$pids $!\";";
  }
  line += bin + " " + ppl + " -tp 4 -t 1" + at +
          "; rc=$?; for p in $pids; do wait $p || rc=7; done;" + " exit $rc";
  const Outcome procs = minfer_shell(line);
  ASSERT_EQ(procs.code, 0) << procs.err << read_file(path("worker1.txt"));
  const size_t a = threads.out.find("Final estimate"), b = procs.out.find("Final estimate");
  ASSERT_NE(a, std::string::npos) << threads.out;
  ASSERT_NE(b, std::string::npos) << procs.out;
  EXPECT_EQ(procs.out.substr(b), threads.out.substr(a));
  EXPECT_NE(read_file(path("worker2.txt")).find("rank 2 of 4"), std::string::npos);

  const int port2 = minfer::testing::free_loopback_port();
  const std::string at2 = " --tp-init 127.0.0.1:" + std::to_string(port2);
  const Outcome bad = minfer_shell(bin + " tp-worker -m " + model() + " -tp 4 --tp-rank 1" + at2 +
                                   " --tp-timeout 20 2>/dev/null & " + bin + " " + ppl + " -tp 2" +
                                   at2 + "; rc=$?; wait; exit $rc");
  EXPECT_NE(bad.code, 0);
  expect_error(bad, "perplexity",
               "the ranks disagree on the group size: rank 0 has 2, rank 1 has 4");
}

}  // namespace
// KV cache types: -ctk/-ctv (llama.cpp's spellings) per half, --cache-type and
// MINFER_CACHE_TYPE for both; a flag beats the env var; a bad value names its
// source and the allowed types. q8_0 changes the perplexity a little.
TEST_F(CliTest, CacheTypes) {
  const std::string text = std::string(MINFER_SOURCE_DIR) + "/tests/data/text.txt";
  const std::string ppl = "perplexity -m " + model() + " -f " + q(text) + " -c 64 --chunks 2 ";
  Outcome r = minfer(ppl + "-ctk q4_0");
  expect_error(r, "perplexity",
               "--cache-type-k: cache type 'q4_0' is not supported (f32, f16, q8_0)");
  r = minfer(ppl + "--cache-type-v F8");
  expect_error(r, "perplexity", "--cache-type-v: cache type 'F8' is not supported");
  for (auto [command, extra] : {std::pair{"run", " -p hi"}, {"chat", ""}, {"bench", " -p 4"}}) {
    r = minfer(std::string(command) + " -m " + model() + extra + " -ctv q8");
    expect_error(r, command, "--cache-type-v: cache type 'q8' is not supported (f32, f16, q8_0)");
  }
  const Outcome f16 = minfer(ppl);
  const Outcome f32 = minfer(ppl + "--cache-type f32");
  const Outcome q8 = minfer(ppl + "-ctk q8_0 -ctv q8_0");
  const Outcome mixed = minfer(ppl + "-ctk Q8_0 --cache-type-v f16");
  for (const Outcome* o : {&f16, &f32, &q8, &mixed}) ASSERT_EQ(o->code, 0) << o->err;
  EXPECT_NE(q8.out, f32.out);
  EXPECT_NE(q8.out, mixed.out);
  setenv("MINFER_CACHE_TYPE", "q8_0", 1);
  const Outcome env_q8 = minfer(ppl);
  const Outcome flag_beats_env = minfer(ppl + "--cache-type f32");
  setenv("MINFER_CACHE_TYPE", "f64", 1);
  const Outcome bad_env = minfer(ppl);
  const Outcome bad_env_overridden = minfer(ppl + "-ctk f32 -ctv f32");
  unsetenv("MINFER_CACHE_TYPE");
  ASSERT_EQ(env_q8.code, 0) << env_q8.err;
  EXPECT_EQ(env_q8.out, q8.out);
  ASSERT_EQ(flag_beats_env.code, 0) << flag_beats_env.err;
  EXPECT_EQ(flag_beats_env.out, f32.out);
  expect_error(bad_env, "perplexity",
               "MINFER_CACHE_TYPE: cache type 'f64' is not supported (f32, f16, q8_0)");
  ASSERT_EQ(bad_env_overridden.code, 0) << bad_env_overridden.err;
  EXPECT_EQ(bad_env_overridden.out, f32.out);
}

}  // namespace minfer::cli
