#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/file.h"
#include "gguf/gguf_testutil.h"
#include "gguf/writer.h"

namespace minfer::gguf {
namespace {

using quant::TensorType;

// A hand-made part: split keys as given, one f32 tensor per name.
void write_part(const std::string& path, int no, int count, int total,
                const std::vector<std::string>& tensors) {
  Writer w;
  w.set("split.no", Value::u16(static_cast<uint16_t>(no)));
  w.set("split.count", Value::u16(static_cast<uint16_t>(count)));
  w.set_i32("split.tensors.count", total);
  for (const auto& name : tensors) {
    ASSERT_TRUE(w.add_tensor(name, TensorType::F32, {4}, testing::pattern_fill(1)).is_ok());
  }
  ASSERT_TRUE(w.write(path).is_ok());
}

TEST(GgufSplit, WritesAndOpensAllParts) {
  testing::TempDir dir;
  Writer w = testing::sample_writer();
  w.set_u32("general.alignment", 64);
  ASSERT_TRUE(w.write_split(dir.file("model.gguf"), 3).is_ok());
  const std::string first = dir.file("model-00001-of-00003.gguf");
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::filesystem::exists(split_path(dir.file("model"), i, 3)));
  }
  auto f = File::open(first);
  ASSERT_TRUE(f.is_ok()) << f.message();
  EXPECT_EQ((*f)->n_parts(), 3u);
  EXPECT_EQ((*f)->paths()[2], dir.file("model-00003-of-00003.gguf"));
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ(*(*f)->get_u32("split.no"), 0u);
  EXPECT_EQ((*f)->find("split.count")->type(), ValueType::U16);
  EXPECT_EQ((*f)->find("split.tensors.count")->type(), ValueType::I32);
  EXPECT_EQ(*(*f)->get_i32("split.tensors.count"), 6);
  EXPECT_EQ(*(*f)->get_string("general.architecture"), "llama");
  EXPECT_EQ((*f)->metadata().size(), w.metadata().size() + 3);
  ASSERT_EQ((*f)->tensors().size(), 6u);
  // Same tensors, same bytes, same order as the unsplit file.
  auto whole = File::from_bytes(*w.to_bytes(), "whole.gguf");
  ASSERT_TRUE(whole.is_ok());
  std::vector<uint32_t> parts;
  for (size_t i = 0; i < 6; ++i) {
    const TensorInfo& a = (*f)->tensors()[i];
    const TensorInfo& b = (*whole)->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(testing::sha256_hex(a.data, a.nbytes), testing::sha256_hex(b.data, b.nbytes));
    EXPECT_EQ(a.offset % 64, 0u);
    parts.push_back(a.part);
  }
  EXPECT_EQ(parts, (std::vector<uint32_t>{0, 0, 1, 1, 2, 2}));
  // Later parts carry only the split keys (and the alignment).
  auto second = File::from_bytes(testing::read_file_bytes((*f)->paths()[1]), "p2");
  ASSERT_TRUE(second.is_ok()) << second.message();
  EXPECT_EQ((*second)->metadata().size(), 4u);
  EXPECT_EQ(*(*second)->get_u32("split.no"), 1u);
  // Opening any part opens the whole model.
  auto via_third = File::open(dir.file("model-00003-of-00003.gguf"));
  ASSERT_TRUE(via_third.is_ok()) << via_third.message();
  EXPECT_EQ((*via_third)->tensors().size(), 6u);
}

TEST(GgufSplit, MissingPart) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::sample_writer().write_split(dir.file("m"), 3).is_ok());
  std::filesystem::remove(dir.file("m-00002-of-00003.gguf"));
  auto f = File::open(dir.file("m-00001-of-00003.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.message(), "split model " + dir.file("m-00001-of-00003.gguf") +
                             ": part 2 of 3: " + dir.file("m-00002-of-00003.gguf") +
                             ": cannot open: No such file or directory");
}

TEST(GgufSplit, WrongSplitNo) {
  testing::TempDir dir;
  write_part(dir.file("m-00001-of-00002.gguf"), 0, 2, 2, {"a"});
  write_part(dir.file("m-00002-of-00002.gguf"), 0, 2, 2, {"b"});
  auto f = File::open(dir.file("m-00001-of-00002.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.message(), dir.file("m-00002-of-00002.gguf") +
                             ": key 'split.no': value 0, but the file name makes it part index 1");
}

TEST(GgufSplit, CountMismatch) {
  testing::TempDir dir;
  write_part(dir.file("m-00001-of-00002.gguf"), 0, 2, 2, {"a"});
  write_part(dir.file("m-00002-of-00002.gguf"), 1, 3, 2, {"b"});
  auto f = File::open(dir.file("m-00001-of-00002.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.message(), dir.file("m-00002-of-00002.gguf") +
                             ": key 'split.count': value 3, but the file name says 2 parts");
}

TEST(GgufSplit, TensorCountMismatch) {
  testing::TempDir dir;
  write_part(dir.file("m-00001-of-00002.gguf"), 0, 2, 3, {"a"});
  write_part(dir.file("m-00002-of-00002.gguf"), 1, 2, 3, {"b"});
  auto f = File::open(dir.file("m-00001-of-00002.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.message(),
            dir.file("m-00001-of-00002.gguf") +
                ": key 'split.tensors.count': value 3, but the 2 parts hold 2 tensors");
}

TEST(GgufSplit, DuplicateTensorAcrossParts) {
  testing::TempDir dir;
  write_part(dir.file("m-00001-of-00002.gguf"), 0, 2, 3, {"a", "dup"});
  write_part(dir.file("m-00002-of-00002.gguf"), 1, 2, 3, {"dup"});
  auto f = File::open(dir.file("m-00001-of-00002.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.message(), dir.file("m-00002-of-00002.gguf") +
                             ": tensor 'dup': appears in part 2 and in part 1 (" +
                             dir.file("m-00001-of-00002.gguf") + ")");
}

TEST(GgufSplit, MissingSplitKeys) {
  testing::TempDir dir;
  write_part(dir.file("m-00001-of-00002.gguf"), 0, 2, 2, {"a"});
  Writer plain;
  ASSERT_TRUE(plain.add_tensor("b", TensorType::F32, {4}, testing::pattern_fill(1)).is_ok());
  ASSERT_TRUE(plain.write(dir.file("m-00002-of-00002.gguf")).is_ok());
  auto f = File::open(dir.file("m-00001-of-00002.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.message(),
            dir.file("m-00002-of-00002.gguf") + ": key 'split.no' not found in a split part");
}

TEST(GgufSplit, SplitKeysWithoutSplitName) {
  testing::TempDir dir;
  write_part(dir.file("renamed.gguf"), 0, 2, 2, {"a"});
  auto f = File::open(dir.file("renamed.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.message().find(dir.file("renamed.gguf") + ": key 'split.count': value 2 marks a "
                                                        "split model"),
            std::string::npos)
      << f.message();
}

TEST(GgufSplit, WriteSplitValidatesPartCount) {
  testing::TempDir dir;
  const Writer w = testing::sample_writer();
  EXPECT_EQ(w.write_split(dir.file("m"), 0).message(),
            dir.file("m") + ": cannot split 6 tensors into 0 parts");
  EXPECT_EQ(w.write_split(dir.file("m"), 7).message(),
            dir.file("m") + ": cannot split 6 tensors into 7 parts");
  ASSERT_TRUE(w.write_split(dir.file("one.gguf"), 1).is_ok());
  auto f = File::open(dir.file("one-00001-of-00001.gguf"));
  ASSERT_TRUE(f.is_ok()) << f.message();
  EXPECT_EQ((*f)->n_parts(), 1u);
  EXPECT_EQ((*f)->tensors().size(), 6u);
}

}  // namespace
}  // namespace minfer::gguf
