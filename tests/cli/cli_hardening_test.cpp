// The `minfer` command under hostile and careless use: thread counts the
// system cannot give, FIFOs and devices where files belong, outputs that
// cannot be written, values past their range, stray arguments, weight types
// no backend computes, and file strings that would act on the terminal. Each
// case must end with a clear message and a non-zero exit, never a crash, a
// hang or damage outside the command's own output.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

#include "cli/cli_testutil.h"
#include "gguf/writer.h"
#include "model/model.h"
#include "runtime/session.h"

namespace minfer::cli {
namespace {

// Byte offset just past the first occurrence of `needle` in `bytes`.
size_t offset_after(const std::string& bytes, const std::string& needle) {
  const size_t at = bytes.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return at == std::string::npos ? 0 : at + needle.size();
}

uint32_t read_u32(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  std::memcpy(&v, bytes.data() + at, 4);
  return v;
}

void write_u32(std::string& bytes, size_t at, uint32_t v) {
  std::memcpy(bytes.data() + at, &v, 4);
}

// True when `s` holds a byte a terminal acts on (C0 controls but '\n', DEL).
bool has_raw_control(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && u != '\n') || u == 0x7F;
  });
}

TEST_F(CliTest, AbsurdThreadCountIsAnErrorNotACrash) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  Outcome r = minfer("run -m " + model() + " -p hi -n 2 -t 33000");
  expect_error(r, "run", "-t 33000: more than 4 per hardware thread");
  EXPECT_NE(r.err.find("at most " + std::to_string(4 * hw)), std::string::npos) << r.err;
  EXPECT_EQ(r.code, 1);
  r = minfer("run -m " + model() + " -p hi -n 2 -t 4294967296");
  expect_error(r, "run", "option '-t': 4294967296 is out of range (0 to 2147483647)");
  r = minfer("bench -m " + model() + " -p 8 -n 2 -r 1 --threads 33000");
  expect_error(r, "bench", "--threads 33000: 33000 is more than 4 per hardware thread");
  r = minfer("synth --model tiny-qwen2 -o " + q(path("never.gguf").string()) + " -t 33000");
  expect_error(r, "synth", "-t 33000: more than 4 per hardware thread");
  EXPECT_FALSE(fs::exists(path("never.gguf")));
}

// Thread stacks of 1 GB under a 4 GB address-space limit: the system refuses
// the fifth thread. That must become an error naming the thread, not an abort.
TEST_F(CliTest, ThreadsTheSystemRefusesAreAnError) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned n = std::min(8u, 4 * hw);
  if (n < 8) GTEST_SKIP() << "needs 2 hardware threads to ask for 8";
  const std::string limits = "ulimit -s 1000000 && ulimit -v 4000000 && exec ";
  const Outcome r = minfer_shell(limits + q(MINFER_BINARY) + " run -m " + model() +
                                 " -p hi -n 2 -t " + std::to_string(n));
  expect_error(r, "run", "cannot start CPU thread ");
  EXPECT_NE(r.err.find(" of 8: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ask for fewer with -t"), std::string::npos) << r.err;
  EXPECT_EQ(r.code, 1);
}

TEST_F(CliTest, FifoOrPipeAsModelIsRefusedWithoutBlocking) {
  const std::string fifo = path("model.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // `timeout` turns a hang into exit 124, which the checks below reject.
  Outcome r = minfer_shell("timeout 20 " + q(MINFER_BINARY) + " inspect " + q(fifo));
  expect_error(r, "inspect", fifo + ": not a regular file (a FIFO or pipe)");
  EXPECT_EQ(r.code, 1);
  r = minfer_shell("timeout 20 " + q(MINFER_BINARY) + " run -m " + q(fifo) + " -p hi");
  expect_error(r, "run", "not a regular file (a FIFO or pipe)");
  EXPECT_EQ(r.code, 1);
  // A model piped in: /dev/stdin is the pipe's read end.
  r = minfer_shell("cat " + model() + " | timeout 20 " + q(MINFER_BINARY) +
                   " run -m /dev/stdin -p hi");
  expect_error(r, "run", "not a regular file (a FIFO or pipe)");
  r = minfer_shell("timeout 20 " + q(MINFER_BINARY) + " inspect /dev/null");
  expect_error(r, "inspect", "/dev/null: not a regular file (a character device)");
}

TEST_F(CliTest, SynthNeverReplacesASpecialFile) {
  Outcome r = minfer("synth --model tiny-qwen2 -s -o /dev/null");
  expect_error(r, "synth", "/dev/null: exists and is a character device; refusing to replace it");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null was replaced";
  const std::string fifo = path("out.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = minfer("synth --model tiny-qwen2 -s -o " + q(fifo));
  expect_error(r, "synth", fifo + ": exists and is a FIFO or pipe");
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  r = minfer("synth --model tiny-qwen2 -s -o " + q(dir_.string()));
  expect_error(r, "synth", "exists and is a directory");
  // A regular file is replaced, as before.
  write("old.gguf", "old bytes");
  r = minfer("synth --model tiny-qwen2 -s -o " + q(path("old.gguf").string()));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_file(path("old.gguf")).substr(0, 4), "GGUF");
}

TEST_F(CliTest, FullDiskOnStdoutIsAnError) {
  const std::string full = " > /dev/full";
  const std::pair<std::string, std::string> cases[] = {
      {"run", "run -m " + model() + " -p hi -n 4 --temp 0"},
      {"tokenize", "tokenize -m " + model() + " -p hi"},
      {"tokenize", "tokenize -m " + model() + " -p hi --ids"},
      {"inspect", "inspect " + model()},
      {"inspect", "inspect --json " + model()},
      {"perplexity", "perplexity -m " + model() + " -c 16 --chunks 1 -f " +
                         q(std::string(MINFER_SOURCE_DIR) + "/tests/data/text.txt")},
      {"bench", "bench -m " + model() + " -p 8 -n 2 -r 1 --bandwidth 10"},
  };
  for (const auto& [command, args] : cases) {
    SCOPED_TRACE(args);
    const Outcome r = minfer(args + full);
    expect_error(r, command, "cannot write to standard output: No space left on device");
    EXPECT_EQ(r.code, 1);
  }
}

// With SIGPIPE ignored (as many parents leave it), a reader that goes away
// makes writes fail with EPIPE: generation must stop there, not run on.
TEST_F(CliTest, ReaderGoneStopsGeneration) {
  const std::string rc = path("pipe_rc.txt").string();
  const std::string err = path("pipe_err.txt").string();
  const Outcome r = minfer_shell("trap '' PIPE; { " + q(MINFER_BINARY) + " run -m " + model() +
                                 " -p hi -n 100000 -c 2048 --temp 0 2>" + q(err) + "; echo $? > " +
                                 q(rc) + "; } | head -c 1 >/dev/null");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(read_file(rc), "1\n");
  const std::string e = read_file(err);
  EXPECT_NE(e.find("minfer run: cannot write to standard output: Broken pipe"), std::string::npos)
      << e;
  EXPECT_EQ(e.find("generation:"), std::string::npos) << "ran to the end:\n" << e;
}

TEST_F(CliTest, ValuesPastTheirRangeAreRejected) {
  const std::string run = "run -m " + model() + " -p hi -n 2 ";
  const std::pair<std::string, std::string> cases[] = {
      {"--top-k 4294967296", "option '--top-k': 4294967296 is out of range (0 to 2147483647)"},
      {"--repeat-last-n 4294967295", "option '--repeat-last-n': 4294967295 is out of range (-1 to"},
      {"-c 99999999999999999999", "option '-c': 99999999999999999999 is out of range (1 to"},
      {"-n 4294967297", "option '-n': 4294967297 is out of range (1 to"},
      {"--seed -2", "option '--seed': '-2' is not a non-negative integer"},
      {"--seed 18446744073709551616", "option '--seed': 18446744073709551616 is out of range"},
      {"--top-p inf", "option '--top-p': 'inf' is not a finite number"},
  };
  for (const auto& [flags, message] : cases) {
    const Outcome r = minfer(run + flags);
    expect_error(r, "run", message);
    EXPECT_EQ(r.code, 1);
  }
  Outcome r = minfer("synth --model tiny-qwen2 -s -o " + q(path("x.gguf").string()) +
                     " --layers 4294967298");
  expect_error(r, "synth", "option '--layers': 4294967298 is out of range (0 to 4096)");
  r = minfer("synth --model tiny-qwen2 -s -o " + q(path("x.gguf").string()) + " --split 100000");
  expect_error(r, "synth", "out of range (1 to 99999)");
}

TEST_F(CliTest, LargestSeedIsUsable) {
  const Outcome r = minfer("run -m " + model() + " -p hi -n 3 --seed 18446744073709551615");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("seed: 18446744073709551615,"), std::string::npos) << r.err;
}

// --seed -1 asks for a random seed, as in llama.cpp; the seed it prints
// repeats the run when passed back.
TEST_F(CliTest, RandomSeedIsPrintedAndRepeatable) {
  const Outcome first = minfer("run -m " + model() + " -p hi -n 12 --temp 1.5 --seed -1");
  ASSERT_EQ(first.code, 0) << first.err;
  const size_t at = first.err.find("seed: ");
  ASSERT_NE(at, std::string::npos) << first.err;
  const std::string seed = first.err.substr(at + 6, first.err.find(',', at) - at - 6);
  EXPECT_NE(seed, "18446744073709551615");
  const Outcome again = minfer("run -m " + model() + " -p hi -n 12 --temp 1.5 --seed " + seed);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.out, first.out);
}

TEST_F(CliTest, StrayArgumentsAreRejected) {
  const std::pair<std::string, std::string> cases[] = {
      {"run", "run -m " + model() + " -p hi extra"},
      {"run", "run -m " + model() + " -p hi -- extra"},
      {"tokenize", "tokenize -m " + model() + " -p hi extra"},
      {"perplexity", "perplexity -m " + model() + " -p hi extra"},
      {"bench", "bench -m " + model() + " extra"},
      {"synth", "synth --model tiny-qwen2 -o x.gguf extra"},
  };
  for (const auto& [command, args] : cases) {
    const Outcome r = minfer(args);
    expect_error(r, command, "unexpected argument 'extra'");
    EXPECT_NE(r.err.find("'" + command + "' takes no positional arguments"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.code, 2);
  }
  Outcome r = minfer("run -m " + model() + " -- -p hi");
  expect_error(r, "run", "unexpected argument '-p' after '--'");
  r = minfer("inspect " + model() + " " + model());
  expect_error(r, "inspect", "'inspect' takes at most 1 FILE argument(s)");
  EXPECT_EQ(r.code, 2);
  r = minfer("inspect -- " + model());  // "--" then the one FILE is fine
  EXPECT_EQ(r.code, 0) << r.err;
}

// Generation ended by an end-of-generation token is not "stopped at the
// context limit", even when the context had shortened the budget: a copy of
// the model whose EOS is the token greedy decoding picks first stops at once.
TEST_F(CliTest, EndOfGenerationIsNotReportedAsTheContextLimit) {
  auto m = model::Model::load(path("tiny.gguf").string());
  ASSERT_TRUE(m.is_ok()) << m.message();
  auto ids = (*m)->tokenizer().encode("hi", /*add_special=*/true, /*parse_special=*/true);
  ASSERT_TRUE(ids.is_ok());
  runtime::SessionOptions so;  // the command's cache type: RunOptions' default
  so.n_ctx = 64;
  so.gpu = false;
  auto s = runtime::Session::create(**m, so);
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto logits = (*s)->eval(*ids, 1);
  ASSERT_TRUE(logits.is_ok()) << logits.message();
  const auto first =
      static_cast<uint32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());

  std::string bytes = read_file(path("tiny.gguf"));
  const size_t value_at = offset_after(bytes, "tokenizer.ggml.eos_token_id") + 4;
  ASSERT_EQ(read_u32(bytes, value_at - 4), 4u) << "eos_token_id is a u32";
  write_u32(bytes, value_at, first);
  write("eos_first.gguf", bytes);
  // -c 16 leaves a budget below -n 100; the EOS ends generation first.
  const std::string args =
      "run -m " + q(path("eos_first.gguf").string()) + " -p hi -n 100 -c 16 --temp 0";
  const Outcome r = minfer(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("generation: 0 tokens"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("context limit"), std::string::npos) << r.err;
}

TEST_F(CliTest, PerplexityChecksChunksContextAndSeed) {
  const std::string text = q(std::string(MINFER_SOURCE_DIR) + "/tests/data/text.txt");
  const std::string ppl = "perplexity -m " + model() + " -f " + text + " ";
  for (const char* n : {"0", "-1", "-7"}) {
    const Outcome r = minfer(ppl + "-c 16 --chunks " + n);
    expect_error(r, "perplexity",
                 std::string("option '--chunks': ") + n + " is out of range (1 to");
  }
  // A context past the model's own is refused before any cache is allocated.
  Outcome r = minfer(ppl + "-c 100000000");
  expect_error(r, "perplexity", "option '-c': 100000000 is out of range (1 to 16777216)");
  r = minfer(ppl + "-c 1000000");
  expect_error(r, "perplexity", "-c 1000000: more than the model's training context of 2048");
  r = minfer(ppl + "-c 4096");
  expect_error(r, "perplexity", "-c 4096: more than the model's training context of 2048");
  r = minfer(ppl + "-c 16 --chunks 2");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("2 chunks"), std::string::npos) << r.err;
}

// Q4_0 and IQ4_NL blocks are both 18 bytes per 32 weights: retyping one
// tensor of a Q4_0 model gives a well-formed file minfer cannot compute.
TEST_F(CliTest, UncomputableWeightTypeIsRefusedAtLoad) {
  synth::SynthOptions o;
  o.shape = "tiny-qwen2";
  o.quant = "Q4_0";
  o.output_path = path("q4.gguf").string();
  o.n_threads = 2;
  ASSERT_TRUE(synth::synthesize(o).is_ok());
  std::string bytes = read_file(path("q4.gguf"));
  const std::string name = "blk.1.ffn_down.weight";
  // Tensor info: name, n_dims (u32), dims (u64 each), type (u32), offset (u64).
  const size_t dims_at = offset_after(bytes, name);
  const uint32_t n_dims = read_u32(bytes, dims_at);
  ASSERT_EQ(n_dims, 2u);
  const size_t type_at = dims_at + 4 + 8 * n_dims;
  ASSERT_EQ(read_u32(bytes, type_at), 2u) << "Q4_0";
  write_u32(bytes, type_at, 20);  // IQ4_NL
  write("iq4.gguf", bytes);
  const Outcome r = minfer("run -m " + q(path("iq4.gguf").string()) + " -p hi -n 2");
  expect_error(r, "run",
               "tensor 'blk.1.ffn_down.weight' has type IQ4_NL, which minfer cannot "
               "compute (supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K");
  EXPECT_EQ(r.out, "") << "nothing echoed before the error";
  // inspect still reads it: the file itself is well-formed.
  const Outcome i = minfer("inspect " + q(path("iq4.gguf").string()));
  EXPECT_EQ(i.code, 0) << i.err;
  EXPECT_NE(i.out.find("IQ4_NL"), std::string::npos);
}

TEST_F(CliTest, FileStringsCannotActOnTheTerminal) {
  const std::string evil =
      "\x1b]0;owned\x07\x1b[2J\x9b"
      "31m";
  gguf::Writer w;
  w.set_string("general.architecture", evil);
  w.set_string("key.with.\x1b[1mbold", "value \x1b[5m");
  ASSERT_TRUE(
      w.add_tensor("t\x1b[8m", quant::TensorType::F32, {32}, std::vector<uint8_t>(32 * 4, 0))
          .is_ok());
  ASSERT_TRUE(w.write(path("evil.gguf").string()).is_ok());
  const Outcome r = minfer("run -m " + q(path("evil.gguf").string()) + " -p hi");
  expect_error(r, "run", "unsupported architecture '\\x1b]0;owned\\x07\\x1b[2J\\x9b31m'");
  EXPECT_FALSE(has_raw_control(r.err)) << r.err;
  for (const char* flags : {"", "--json "}) {
    const Outcome i = minfer(std::string("inspect ") + flags + q(path("evil.gguf").string()));
    EXPECT_EQ(i.code, 0) << i.err;
    EXPECT_FALSE(has_raw_control(i.out)) << i.out;
    EXPECT_EQ(i.out.find("\x9b"), std::string::npos) << "a lone C1 byte passed through";
  }
  // The unknown command's name comes from the command line; it is escaped too.
  const Outcome u = minfer(q("\x1b[2Jrun"));
  EXPECT_EQ(u.code, 2);
  EXPECT_NE(u.err.find("unknown command '\\x1b[2Jrun'"), std::string::npos) << u.err;
}

// The MINFER_* environment is read by one rule before any command runs; a bad
// value is named, not taken as a default.
TEST_F(CliTest, InvalidEnvironmentIsRefusedBeforeRunning) {
  Outcome r = minfer_shell("MINFER_GPU_TIMEOUT=abc " + q(MINFER_BINARY) + " run -m " + model() +
                           " -p hi -n 2");
  expect_error(r, "run", "MINFER_GPU_TIMEOUT=abc: expected a number of seconds above 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  r = minfer_shell("MINFER_NO_FUSE_QKV=maybe " + q(MINFER_BINARY) + " tokenize -m " + model() +
                   " -p hi");
  expect_error(r, "tokenize", "MINFER_NO_FUSE_QKV=maybe: expected 1/true/yes/on or 0/false/no/off");
  r = minfer_shell("MINFER_DISABLE_CUDA=yes MINFER_NO_FUSE_GLU=1 " + q(MINFER_BINARY) + " run -m " +
                   model() + " -p hi -n 2 --temp 0");
  EXPECT_EQ(r.code, 0) << r.err;
}

// serve fails at once, naming the problem: no model (after it began
// listening), or a port another socket holds (no second listener on it).
TEST_F(CliTest, ServeRefusesAMissingModelAndABusyPort) {
  expect_error(minfer("serve --port 0"), "serve", "no model given");
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(sock, 4), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  const Outcome r = minfer("serve -m " + model() + " --port " + std::to_string(port));
  ::close(sock);
  expect_error(r, "serve", "cannot listen on 127.0.0.1:" + std::to_string(port));
}

}  // namespace
}  // namespace minfer::cli
