// The fuzz target's seed corpus: every committed seed must parse, and the seeds are
// what fuzz_seeds() generates. To regenerate after a format change, run this binary
// with MINFER_WRITE_GGUF_CORPUS=1.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "gguf/file.h"
#include "gguf/gguf_testutil.h"

namespace minfer::gguf {
namespace {

const std::string kCorpusDir = std::string(MINFER_TEST_DATA_DIR) + "/gguf_reader_fuzz_corpus";

TEST(GgufFuzzCorpus, SeedsAreGeneratedAndValid) {
  const auto seeds = testing::fuzz_seeds();
  ASSERT_GE(seeds.size(), 5u);
  if (std::getenv("MINFER_WRITE_GGUF_CORPUS") != nullptr) {
    std::filesystem::create_directories(kCorpusDir);
    for (const auto& [name, bytes] : seeds)
      testing::write_file_bytes(kCorpusDir + "/" + name, bytes);
  }
  size_t total = 0;
  for (const auto& [name, bytes] : seeds) {
    const std::string path = kCorpusDir + "/" + name;
    EXPECT_EQ(testing::read_file_bytes(path), bytes) << path << " is stale; regenerate it";
    auto f = File::open(path);
    EXPECT_TRUE(f.is_ok()) << f.message();
    total += bytes.size();
  }
  EXPECT_LT(total, 200u * 1024u);
}

}  // namespace
}  // namespace minfer::gguf
