#include "gguf/writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "gguf/file.h"
#include "gguf/gguf_testutil.h"

namespace minfer::gguf {
namespace {

using quant::TensorType;

TEST(GgufWriter, RoundTripsThroughTheReader) {
  const Writer w = testing::sample_writer();
  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.is_ok()) << bytes.message();
  auto f = File::from_bytes(*bytes, "rt.gguf");
  ASSERT_TRUE(f.is_ok()) << f.message();
  ASSERT_EQ((*f)->metadata().size(), w.metadata().size());
  for (size_t i = 0; i < w.metadata().size(); ++i) {
    EXPECT_EQ((*f)->metadata()[i].first, w.metadata()[i].first);
    EXPECT_EQ((*f)->metadata()[i].second, w.metadata()[i].second) << w.metadata()[i].first;
  }
  ASSERT_EQ((*f)->tensors().size(), 6u);
  // The data is what the fills produced.
  const TensorInfo& t = (*f)->tensors()[1];
  std::vector<uint8_t> expect(t.nbytes);
  ASSERT_TRUE(testing::pattern_fill(2)(expect).is_ok());
  EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.nbytes), expect);
  // No padding after the last tensor.
  const TensorInfo& last = (*f)->tensors().back();
  EXPECT_EQ(last.file_offset + last.nbytes, bytes->size());
}

TEST(GgufWriter, SetReplacesInPlace) {
  Writer w;
  w.set_u32("a", 1);
  w.set_string("b", "x");
  w.set_i32("a", -2);
  ASSERT_EQ(w.metadata().size(), 2u);
  EXPECT_EQ(w.metadata()[0].first, "a");
  EXPECT_EQ(w.metadata()[0].second, Value::i32(-2));
  EXPECT_TRUE(w.remove("a"));
  EXPECT_FALSE(w.remove("a"));
  EXPECT_EQ(w.metadata().size(), 1u);
}

TEST(GgufWriter, ValidatesTensors) {
  Writer w;
  EXPECT_TRUE(w.add_tensor("t", TensorType::Q4_K, {256, 2}, testing::pattern_fill(1)).is_ok());
  EXPECT_EQ(w.add_tensor("t", TensorType::F32, {1}, testing::pattern_fill(1)).message(),
            "tensor 't': duplicate tensor name");
  EXPECT_NE(w.add_tensor("u", TensorType::Q4_K, {100}, testing::pattern_fill(1))
                .message()
                .find("tensor 'u': row of 100 elements is not a multiple of Q4_K's block size 256"),
            std::string::npos);
  EXPECT_EQ(w.add_tensor("v", TensorType::F32, {}, testing::pattern_fill(1)).message(),
            "tensor 'v': 0 dims, expected 1..4");
  EXPECT_EQ(w.add_tensor("v", TensorType::F32, {1, 1, 1, 1, 1}, testing::pattern_fill(1)).message(),
            "tensor 'v': 5 dims, expected 1..4");
  EXPECT_EQ(w.add_tensor("v", TensorType::F32, {2, -1}, testing::pattern_fill(1)).message(),
            "tensor 'v': negative dim -1");
  EXPECT_EQ(w.add_tensor("v", TensorType::F32, {1ll << 40, 1ll << 40}, testing::pattern_fill(1))
                .message(),
            "tensor 'v': shape [1099511627776, 1099511627776] overflows int64");
  EXPECT_EQ(w.add_tensor("w", TensorType::F32, {2}, std::vector<uint8_t>(7)).message(),
            "tensor 'w': 7 bytes given, the shape and type need 8");
  EXPECT_TRUE(w.add_tensor("w", TensorType::F32, {2}, std::vector<uint8_t>(8)).is_ok());
  EXPECT_EQ(w.n_tensors(), 2u);
}

TEST(GgufWriter, RejectsBadMetadataAtWriteTime) {
  Writer w;
  w.set("arr", Value::array(ValueType::U32, {Value::u32(1), Value::string("x")}));
  EXPECT_EQ(w.to_bytes().message(), "key 'arr': array element 1 is string, expected u32");
  Writer a;
  a.set_u32("general.alignment", 48);
  EXPECT_EQ(a.to_bytes().message(),
            "key 'general.alignment': alignment 48 is not a nonzero power of two");
  Writer v;
  v.set_version(1);
  EXPECT_EQ(v.to_bytes().message(), "header: cannot write GGUF version 1");
}

TEST(GgufWriter, WriteIsAtomicAndNamesThePath) {
  testing::TempDir dir;
  const std::string path = dir.file("m.gguf");
  Writer good = testing::sample_writer();
  ASSERT_TRUE(good.write(path).is_ok());
  const auto before = testing::read_file_bytes(path);
  Writer bad = testing::sample_writer();
  ASSERT_TRUE(bad.add_tensor("boom", TensorType::F32, {4},
                             [](std::span<uint8_t>) { return Status::error("generator failed"); })
                  .is_ok());
  Status s = bad.write(path);
  EXPECT_EQ(s.message(), path + ": tensor 'boom': generator failed");
  EXPECT_EQ(testing::read_file_bytes(path), before);
  // The failed write left no temporary behind: the directory holds m.gguf alone.
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.file(""))) {
    EXPECT_EQ(e.path().filename(), "m.gguf");
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
  Status missing = good.write(dir.file("no/such/dir/m.gguf"));
  EXPECT_TRUE(missing.message().starts_with(dir.file("no/such/dir/m.gguf") + ".tmp."))
      << missing.message();
  EXPECT_TRUE(missing.message().ends_with(": cannot create: No such file or directory"))
      << missing.message();
}

TEST(GgufWriter, NeverReplacesWhatIsNotARegularFile) {
  testing::TempDir dir;
  const Writer w = testing::sample_writer();
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string target = dir.file("target.gguf");
  ASSERT_TRUE(w.write(target).is_ok());
  const std::string link = dir.file("link.gguf");
  std::filesystem::create_symlink(target, link);
  const std::string subdir = dir.file("sub");
  std::filesystem::create_directory(subdir);
  const std::pair<std::string, std::string> cases[] = {{"/dev/null", "a character device"},
                                                       {fifo, "a FIFO or pipe"},
                                                       {link, "a symbolic link"},
                                                       {subdir, "a directory"}};
  for (const auto& [path, kind] : cases) {
    const Status s = w.write(path);
    EXPECT_EQ(s.message(), path + ": exists and is " + kind +
                               "; refusing to replace it (give the path of a regular file)");
  }
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_TRUE(std::filesystem::is_directory(subdir));
  // Nothing but what the test made: no temporary was left beside any of them.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.file("")))
    ++entries;
  EXPECT_EQ(entries, 4u);
}

TEST(GgufWriter, SplitChecksEveryPartBeforeWritingAny) {
  testing::TempDir dir;
  const Writer w = testing::sample_writer();
  const std::string first = dir.file("m-00001-of-00002.gguf");
  {
    std::ofstream keep(first, std::ios::binary);
    keep << "keep me";
  }
  std::filesystem::create_directory(dir.file("m-00002-of-00002.gguf"));
  const Status s = w.write_split(dir.file("m.gguf"), 2);
  EXPECT_NE(s.message().find("m-00002-of-00002.gguf: exists and is a directory"), std::string::npos)
      << s.message();
  const auto bytes = testing::read_file_bytes(first);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "keep me");
}

TEST(GgufWriter, StreamsLargeTensorsOneAtATime) {
  // Each fill checks that it runs after the previous one finished: the writer holds
  // one tensor's bytes at a time.
  Writer w;
  int calls = 0;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(w.add_tensor("t" + std::to_string(i), TensorType::F32, {1 << 18},
                             [&calls, i](std::span<uint8_t> out) {
                               EXPECT_EQ(calls, i);
                               ++calls;
                               out[0] = static_cast<uint8_t>(i);
                               return Status::ok();
                             })
                    .is_ok());
  }
  testing::TempDir dir;
  ASSERT_TRUE(w.write(dir.file("big.gguf")).is_ok());
  EXPECT_EQ(calls, 4);
  auto f = File::open(dir.file("big.gguf"));
  ASSERT_TRUE(f.is_ok()) << f.message();
  EXPECT_EQ((*f)->find_tensor("t3")->data[0], 3);
  EXPECT_EQ((*f)->total_tensor_bytes(), 4u << 20);
}

}  // namespace
}  // namespace minfer::gguf
