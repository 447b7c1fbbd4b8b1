// Synthetic models: determinism (same options -> same bytes, whatever the
// thread count, and the same bytes as recorded in synth_sha256.txt when the
// generator was last changed on purpose), and validity checked by the gguf
// Python package (tools/check_synth.py), which reads the files independently.
#include "synth/synth.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace minfer::synth {
namespace {

namespace fs = std::filesystem;

struct CommandOutput {
  int exit_code;
  std::string text;
};

CommandOutput run_command(const std::string& cmd) {
  CommandOutput out{-1, ""};
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe) != nullptr) out.text += buf.data();
  const int status = pclose(pipe);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string sha256_of(const fs::path& p) {
  auto r = run_command("sha256sum '" + p.string() + "'");
  return r.exit_code == 0 ? r.text.substr(0, 64) : "sha256sum failed: " + r.text;
}

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("minfer_synth_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

SynthOptions options(const std::string& shape, const std::string& quant, const fs::path& out) {
  SynthOptions o;
  o.shape = shape;
  o.quant = quant;
  o.output_path = out.string();
  o.seed = 7;
  return o;
}

TEST(Synth, SameOptionsSameBytesAnyThreadCount) {
  const fs::path dir = temp_dir();
  SynthOptions a = options("tiny-qwen2", "Q4_K_M", dir / "a.gguf");
  a.n_threads = 1;
  SynthOptions b = options("tiny-qwen2", "Q4_K_M", dir / "b.gguf");
  b.n_threads = 3;
  ASSERT_TRUE(synthesize(a).is_ok());
  ASSERT_TRUE(synthesize(b).is_ok());
  EXPECT_EQ(sha256_of(dir / "a.gguf"), sha256_of(dir / "b.gguf"));
  SynthOptions c = options("tiny-qwen2", "Q4_K_M", dir / "c.gguf");
  c.seed = 8;
  ASSERT_TRUE(synthesize(c).is_ok());
  EXPECT_NE(sha256_of(dir / "a.gguf"), sha256_of(dir / "c.gguf"));
  fs::remove_all(dir);
}

// Reproducibility across builds and machines: the recorded digests were made
// by this generator; a change here means synthetic files changed, which must be
// deliberate (regenerate with tools/update_synth_sha256.sh and say why).
TEST(Synth, BytesMatchRecordedDigests) {
  std::ifstream in(std::string(MINFER_TEST_DATA_DIR) + "/synth_sha256.txt");
  ASSERT_TRUE(in) << "missing tests/synth/synth_sha256.txt";
  const fs::path dir = temp_dir();
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string digest, shape, quant;
    fields >> digest >> shape >> quant;
    const fs::path out = dir / (shape + "-" + quant + ".gguf");
    ASSERT_TRUE(synthesize(options(shape, quant, out)).is_ok()) << shape << " " << quant;
    EXPECT_EQ(sha256_of(out), digest) << shape << " " << quant;
    ++checked;
  }
  EXPECT_GE(checked, 4);
  fs::remove_all(dir);
}

// Every tiny shape with every weight type, read back by the gguf Python package.
TEST(Synth, FilesReadByIndependentReader) {
  const fs::path dir = temp_dir();
  const std::string script = std::string(MINFER_SOURCE_DIR) + "/tools/check_synth.py";
  const char* shapes[] = {"tiny-qwen2", "tiny-qwen3", "tiny-llama", "tiny-gemma3"};
  const char* quants[] = {"F32",  "F16",  "BF16", "Q4_0", "Q4_1", "Q5_0",   "Q5_1", "Q8_0",
                          "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "MXFP4"};
  for (size_t i = 0; i < std::size(quants); ++i) {
    const std::string shape = shapes[i % std::size(shapes)];
    const fs::path out = dir / (shape + "-" + quants[i] + ".gguf");
    Status s = synthesize(options(shape, quants[i], out));
    ASSERT_TRUE(s.is_ok()) << s.message();
    auto r = run_command("python3 '" + script + "' '" + out.string() + "'");
    EXPECT_EQ(r.exit_code, 0) << shape << " " << quants[i] << ": " << r.text
                              << "(run tools/install_deps.sh for the gguf package)";
    fs::remove(out);
  }
  fs::remove_all(dir);
}

// The mixture-of-experts shapes (3-D expert tensors, an F32 router; gpt-oss
// adds sinks, biases and YaRN keys) in a float, a legacy, a K-quant mix and
// the MXFP4 mix.
TEST(Synth, MoeFilesReadByIndependentReader) {
  const fs::path dir = temp_dir();
  const std::string script = std::string(MINFER_SOURCE_DIR) + "/tools/check_synth.py";
  for (const std::string shape : {"tiny-qwen3moe", "tiny-gpt-oss"}) {
    for (const char* quant : {"F16", "Q8_0", "Q4_K_M", "MXFP4"}) {
      const fs::path out = dir / (shape + "-" + quant + ".gguf");
      Status s = synthesize(options(shape, quant, out));
      ASSERT_TRUE(s.is_ok()) << s.message();
      auto r = run_command("python3 '" + script + "' '" + out.string() + "'");
      EXPECT_EQ(r.exit_code, 0) << shape << " " << quant << ": " << r.text;
      fs::remove(out);
    }
  }
  fs::remove_all(dir);
}

// A real shape with the real Qwen2 tokenizer (one layer to keep it quick).
TEST(Synth, QwenShapeWithRealTokenizer) {
  const fs::path dir = temp_dir();
  SynthOptions o = options("qwen2.5-0.5b", "Q4_0", dir / "qwen.gguf");
  o.n_layer = 1;
  Status s = synthesize(o);
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto r = run_command("python3 '" + std::string(MINFER_SOURCE_DIR) + "/tools/check_synth.py' '" +
                       (dir / "qwen.gguf").string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.text;
  fs::remove_all(dir);
}

TEST(Synth, ErrorsNameTheProblem) {
  const fs::path dir = temp_dir();
  Status s = synthesize(options("qwen9-1t", "Q4_0", dir / "x.gguf"));
  EXPECT_NE(s.message().find("unknown model shape 'qwen9-1t'"), std::string::npos) << s.message();
  s = synthesize(options("tiny-qwen2", "Q9_9", dir / "x.gguf"));
  EXPECT_NE(s.message().find("unknown quantization 'Q9_9'"), std::string::npos) << s.message();
  s = synthesize(options("tiny-qwen2", "Q8_0", "/nonexistent-dir/x.gguf"));
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("/nonexistent-dir/x.gguf"), std::string::npos) << s.message();
  SynthOptions o = options("qwen2.5-0.5b", "Q8_0", dir / "x.gguf");
  o.qwen2_tokenizer_dir = "/nonexistent-tokenizer";
  s = synthesize(o);
  EXPECT_NE(s.message().find("/nonexistent-tokenizer"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace minfer::synth
