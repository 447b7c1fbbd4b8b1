// The fixture of the `minfer` command's end-to-end tests: a tiny synthetic
// model in a per-process directory, and a runner that captures stdout, stderr
// and the exit code of one command line (run through sh, so tests may use
// redirections, pipes and ulimit).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "synth/synth.h"

namespace minfer::cli {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;  // exit status; 128 + signal number when the process was killed
  std::string out, err;
};

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Shell-quotes one argument.
inline std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("minfer_cli_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    synth::SynthOptions o;
    o.shape = "tiny-qwen2";
    o.quant = "Q8_0";
    o.seed = 11;
    o.output_path = (dir_ / "tiny.gguf").string();
    o.n_threads = 2;
    const Status st = synth::synthesize(o);
    ASSERT_TRUE(st.is_ok()) << st.message();
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static fs::path path(const std::string& name) { return dir_ / name; }
  static std::string model() { return q(path("tiny.gguf").string()); }

  // Runs `minfer ARGS`, capturing stdout and stderr separately.
  static Outcome minfer(const std::string& args) {
    return minfer_shell(q(MINFER_BINARY) + " " + args);
  }

  // Runs a shell command line (sh -c) whose stderr is captured, with stdout
  // captured too unless the line redirects it. Asserts the process exited by
  // itself: a status past 127 from the shell, or a signal, is a crash.
  static Outcome minfer_shell(const std::string& line) {
    Outcome r;
    const fs::path err = path("stderr.txt");
    const std::string cmd = "{ " + line + "; } 2>" + q(err.string());
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) {
      ADD_FAILURE() << "popen failed: " << cmd;
      return r;
    }
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(pipe);
    if (WIFEXITED(status)) {
      r.code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      r.code = 128 + WTERMSIG(status);
    }
    r.err = read_file(err);
    EXPECT_GE(r.code, 0) << cmd;
    EXPECT_LT(r.code, 128) << "crashed: " << cmd << "\n" << r.err;
    return r;
  }

  // A failure: non-zero exit, the command's prefix, and `needle` in stderr.
  static void expect_error(const Outcome& r, const std::string& command,
                           const std::string& needle) {
    EXPECT_NE(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("minfer " + command + ": "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in:\n"
                                                     << r.err;
  }

  static void write(const std::string& name, const std::string& bytes) {
    std::ofstream out(path(name), std::ios::binary);
    out << bytes;
  }

  static inline fs::path dir_;
};

}  // namespace minfer::cli
