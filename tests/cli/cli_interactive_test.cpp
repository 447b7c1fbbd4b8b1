// The interactive side of the `minfer` command: chat turns that fail without
// ending the conversation, Ctrl-C, prompts from standard input, and a
// property test over random command lines.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cli/cli_testutil.h"
#include "test_models.h"

namespace minfer::cli {
namespace {

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST_F(CliTest, ChatGoesOnAfterABadTurn) {
  // CRLF input, a line of invalid UTF-8, a turn past the context, /reset,
  // a good turn, /exit, and a line that must not be read.
  const std::string input =
      "hi\\r\\nab\\377\\nevery one of these words makes the turn longer than the context "
      "and then some more words to be sure it overflows\\n"
      "/reset\\nhello\\n/exit\\nnever read\\n";
  const Outcome r = minfer_shell("printf '" + input + "' | " + q(MINFER_BINARY) + " chat -m " +
                                 model() + " -n 4 --temp 0 -c 40");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("minfer chat: message: invalid UTF-8 at byte 2 of the line"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("no longer fits in the context (-c); /reset starts over"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(conversation reset)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("> "), std::string::npos) << "no prompt marker when stdin is no terminal";
  // Two replies (hi, hello): each ends with a line break.
  EXPECT_EQ(count_of(r.out, "\n"), 2u) << r.out;
}

// --chat-template-file: the conversation goes through that Jinja template
// (the banner says so); a template that raises fails that turn only, naming
// its message; one that does not parse, or a missing file, stops the command
// naming the file.
TEST_F(CliTest, ChatTemplateFileReplacesTheModelsFormat) {
  write("ok.jinja",
        "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content | trim }}\n"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}");
  Outcome r = minfer_shell("printf 'hi\\nhello\\n' | " + q(MINFER_BINARY) + " chat -m " + model() +
                           " -n 3 --temp 0 --chat-template-file " + q(path("ok.jinja").string()));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("chat format: template"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("minfer chat:"), std::string::npos) << "both turns answered: " << r.err;
  EXPECT_FALSE(r.out.empty());

  write("raise.jinja",
        "{% if messages | length > 1 %}{{ raise_exception('one turn only, please') }}{% endif %}"
        "{{ messages[0].content }}");
  r = minfer_shell("printf 'a\\nb\\n' | " + q(MINFER_BINARY) + " chat -m " + model() +
                   " -n 2 --temp 0 --chat-template-file " + q(path("raise.jinja").string()));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("one turn only, please"), std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.err, "minfer chat:"), 1u) << "only the second turn failed: " << r.err;
  EXPECT_FALSE(r.out.empty()) << "the first turn was answered";

  write("bad.jinja", "hello\n{% for x in %}{% endfor %}");
  r = minfer("chat -m " + model() + " --chat-template-file " + q(path("bad.jinja").string()) +
             " < /dev/null");
  expect_error(r, "chat", "bad.jinja");
  EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;
  r = minfer("chat -m " + model() + " --chat-template-file " + q(path("none.jinja").string()) +
             " < /dev/null");
  expect_error(r, "chat", "none.jinja");
}

// Shell text that waits (up to 60 s) until `file` holds `text`: the command
// under test has installed its Ctrl-C handler by then.
std::string wait_for(const std::string& text, const std::string& file) {
  return "i=0; until grep -q " + q(text) + " " + q(file) +
         " 2>/dev/null || [ $i -ge 1200 ]; do "
         "sleep 0.05; i=$((i+1)); done; ";
}

// The real Gemma generates slowly enough (tens of tokens a second here) for a
// signal to land mid-reply.
std::string gemma() {
  const std::string path = testing::gemma3_model_path();
  EXPECT_FALSE(path.empty()) << testing::kMissingGemma3;
  return q(path);
}

TEST_F(CliTest, RunPrintsItsSummaryOnCtrlC) {
  const std::string err = path("int_err.txt").string();
  const Outcome r =
      minfer_shell(q(MINFER_BINARY) + " run -m " + gemma() +
                   " -p hi -n 1000000 -c 4096 --temp 0 >/dev/null 2>" + q(err) + " & pid=$!; " +
                   wait_for("seed: ", err) + "sleep 0.3; kill -INT $pid; wait $pid; echo rc=$?");
  const std::string e = read_file(err);
  EXPECT_NE(r.out.find("rc=130"), std::string::npos) << r.out << e;
  EXPECT_NE(e.find("generation: "), std::string::npos) << e;
  EXPECT_NE(e.find("(interrupted)"), std::string::npos) << e;
}

TEST_F(CliTest, ChatCtrlCStopsTheReplyAndASecondOneQuits) {
  // The first reply would fill the whole context, so that the second turn
  // could not fit; Ctrl-C cuts it, and the second line is answered.
  const std::string err = path("chat_int.txt").string();
  Outcome r = minfer_shell(
      "(printf 'first\\n'; sleep 2; printf 'second\\n') | " + q(MINFER_BINARY) + " chat -m " +
      gemma() + " -n 1000000 -c 256 --temp 0 2>" + q(err) + " & pid=$!; " +
      wait_for("chat format", err) + "sleep 0.5; kill -INT $pid; wait $pid; echo rc=$?");
  const std::string e = read_file(err);
  EXPECT_NE(r.out.find("rc=0"), std::string::npos) << r.out << e;
  EXPECT_EQ(e.find("no longer fits"), std::string::npos) << "the first reply was not cut:\n" << e;
  const std::string err2 = path("chat_int2.txt").string();
  r = minfer_shell("sleep 5 | " + q(MINFER_BINARY) + " chat -m " + model() + " 2>" + q(err2) +
                   " & pid=$!; " + wait_for("chat format", err2) +
                   "kill -INT $pid; sleep 0.2; kill -INT $pid; wait $pid; echo rc=$?");
  EXPECT_NE(r.out.find("rc=130"), std::string::npos) << r.out;
}

TEST_F(CliTest, PromptFromStandardInputAndNoEcho) {
  const Outcome a = minfer_shell("printf 'hi' | " + q(MINFER_BINARY) + " run -m " + model() +
                                 " -f - -n 3 --temp 0");
  ASSERT_EQ(a.code, 0) << a.err;
  const Outcome b = minfer("run -m " + model() + " -p hi -n 3 --temp 0");
  EXPECT_EQ(a.out, b.out) << "-f - reads the same prompt";
  const Outcome c = minfer("run -m " + model() + " -p hi -n 3 --temp 0 --no-display-prompt");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ("hi" + c.out, b.out);
  EXPECT_EQ(b.err.find('\r'), std::string::npos) << "no progress bar frames in a log";
  const Outcome s = minfer("synth --model tiny-qwen2 -o " + q(path("log.gguf").string()));
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.err.find('\r'), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("synth: wrote "), std::string::npos) << s.err;
}

// A vocabulary with a duplicate token: the message says "tokenizer" once.
TEST_F(CliTest, MessagesNameTheirSourceOnce) {
  std::string bytes = read_file(path("tiny.gguf"));
  const std::string b_token("\x01\0\0\0\0\0\0\0b", 9);
  const size_t at = bytes.find(b_token);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 8] = 'a';  // "b" becomes a second "a"
  write("dup.gguf", bytes);
  const Outcome r = minfer("run -m " + q(path("dup.gguf").string()) + " -p hi");
  expect_error(r, "run", "tokenizer: token ");
  EXPECT_EQ(count_of(r.err, "tokenizer:"), 1u) << r.err;
}

// Random command lines of known flags with hostile values: every run ends by
// itself with 0, 1 or 2, and every failure says why. A fixed seed keeps CI
// repeatable; MINFER_ARGV_FUZZ_RUNS raises the count.
TEST_F(CliTest, RandomCommandLinesNeverCrash) {
  const char* runs_env = std::getenv("MINFER_ARGV_FUZZ_RUNS");
  const int runs = runs_env != nullptr ? std::atoi(runs_env) : 120;
  const std::vector<std::string> commands = {"run",     "tokenize", "perplexity",   "bench",
                                             "inspect", "synth",    "batched-bench"};
  const std::vector<std::string> flags = {"-m",           "-p",       "-n",
                                          "-c",           "-t",       "-b",
                                          "--temp",       "--top-k",  "--top-p",
                                          "--seed",       "--chunks", "-f",
                                          "--cache-type", "-ctk",     "-r",
                                          "-o",           "-d",       "--json",
                                          "--ids",        "-npl",     "--page-size",
                                          "--",           "--layers", "-q",
                                          "--split",      "--min-p",  "--repeat-last-n"};
  const std::vector<std::string> values = {
      "0",         "-1",           "1",    "2",    "4294967296", "99999999999999999999",
      "1e9",       "nan",          "-inf", "abc",  "",           "1,2",
      "1-3*2",     "5-1",          "q8_0", "f64",  "\x1b[2J",    "\xff",
      "/dev/null", "/nonexistent", "md",   "json", "-p"};
  std::mt19937 rng(20261201);
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  for (int i = 0; i < runs; ++i) {
    std::string args = pick(commands);
    if (rng() % 4 != 0) args += " -m " + model();
    const int n = static_cast<int>(rng() % 5);
    for (int k = 0; k < n; ++k) {
      args += " " + q(pick(flags));
      if (rng() % 5 != 0) args += " " + q(pick(values));
    }
    args += " -n 2";  // keeps a run that succeeds short
    const Outcome r =
        minfer_shell("timeout 60 " + q(MINFER_BINARY) + " " + args + " </dev/null >/dev/null");
    SCOPED_TRACE(args);
    EXPECT_TRUE(r.code == 0 || r.code == 1 || r.code == 2) << "rc " << r.code << "\n" << r.err;
    if (r.code != 0) EXPECT_NE(r.err.find("minfer"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace minfer::cli
