#include <gtest/gtest.h>

#include <initializer_list>
#include <limits>

#include "gguf/file.h"
#include "gguf/gguf_testutil.h"
#include "gguf/writer.h"

namespace minfer::gguf {
namespace {

using quant::TensorType;
using testing::Raw;

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ4K = 12;

// Parses `bytes` and expects an error that starts with the display name and contains
// every fragment (the field and the offending value).
void expect_error(std::vector<uint8_t> bytes, std::initializer_list<std::string_view> fragments) {
  auto f = File::from_bytes(std::move(bytes), "bad.gguf");
  ASSERT_FALSE(f.is_ok()) << "parsed successfully";
  EXPECT_TRUE(f.message().starts_with("bad.gguf: ")) << f.message();
  for (std::string_view frag : fragments) {
    EXPECT_NE(f.message().find(frag), std::string::npos)
        << "message lacks '" << frag << "': " << f.message();
  }
}

std::unique_ptr<File> parse_ok(std::vector<uint8_t> bytes) {
  auto f = File::from_bytes(std::move(bytes), "good.gguf");
  EXPECT_TRUE(f.is_ok()) << f.message();
  return f.is_ok() ? std::move(f).value() : nullptr;
}

// A valid file with one f32 tensor of `n` elements at offset 0, alignment 32.
std::vector<uint8_t> one_tensor(const std::string& name, uint64_t n) {
  Raw r;
  r.header(3, 1, 0).tensor(name, {n}, kF32, 0).pad_to(32).zeros(n * 4);
  return r.bytes;
}

TEST(GgufReader, ReadsEveryValueType) {
  auto bytes = testing::sample_writer().to_bytes();
  ASSERT_TRUE(bytes.is_ok()) << bytes.message();
  auto f = parse_ok(std::move(bytes).value());
  ASSERT_TRUE(f);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->n_parts(), 1u);
  EXPECT_EQ(f->metadata().size(), 18u);
  EXPECT_EQ(f->metadata()[0].first, "general.architecture");
  EXPECT_EQ(*f->find("t.u8"), Value::u8(200));
  EXPECT_EQ(*f->find("t.i8"), Value::i8(-100));
  EXPECT_EQ(*f->find("t.u16"), Value::u16(60000));
  EXPECT_EQ(*f->find("t.i16"), Value::i16(-30000));
  EXPECT_EQ(*f->get_u32("t.u32"), 4000000000u);
  EXPECT_EQ(*f->get_i32("t.i32"), -2000000000);
  EXPECT_EQ(*f->get_f32("t.f32"), 0.15625f);
  EXPECT_EQ(*f->get_bool("t.bool"), true);
  EXPECT_EQ(*f->get_string("t.string"), "h\xc3\xa9llo \"world\"\n");
  EXPECT_EQ(*f->get_u64("t.u64"), 18000000000000000000ull);
  EXPECT_EQ(*f->find("t.i64")->to_i64(), -9000000000000000000ll);
  EXPECT_EQ(*f->find("t.f64")->to_f64(), -2.5e-300);
  EXPECT_EQ(*f->get_string_array("t.strings"),
            (std::vector<std::string>{"a", "", "\xe2\x96\x81the"}));
  EXPECT_EQ(*f->get_f32_array("t.f32s"), (std::vector<float>{1.0f, -0.0f, 3.5f}));
  EXPECT_TRUE(f->get_i32_array("t.i32s")->empty());
  const Value* nested = f->find("t.nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->array_type(), ValueType::ARRAY);
  ASSERT_EQ(nested->array_size(), 3u);
  EXPECT_EQ(nested->array()[0].array_type(), ValueType::U8);
  EXPECT_EQ(nested->array()[1].array()[0], Value::string("x"));
  EXPECT_EQ(nested->array()[2].array_type(), ValueType::I64);
  EXPECT_EQ(nested->display(), "[[1, 2], [\"x\"], []]");
}

TEST(GgufReader, ReadsTensorTable) {
  auto f = parse_ok(*testing::sample_writer().to_bytes());
  ASSERT_TRUE(f);
  ASSERT_EQ(f->tensors().size(), 6u);
  const TensorInfo* t = f->find_tensor("tok_embd.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, TensorType::Q4_K);
  EXPECT_EQ(t->dims, (std::vector<int64_t>{256, 3}));
  EXPECT_EQ(t->n_elements(), 768);
  EXPECT_EQ(t->nbytes, 3u * 144u);
  EXPECT_EQ(t->offset, 0u);
  EXPECT_EQ(t->file_offset, f->data_offset());
  EXPECT_EQ(f->data_offset() % 32, 0u);
  const TensorInfo* q8 = f->find_tensor("a.q8");
  ASSERT_NE(q8, nullptr);
  EXPECT_EQ(q8->dims.size(), 4u);
  EXPECT_EQ(q8->nbytes, 8u * 34u);
  EXPECT_EQ(q8->offset % 32, 0u);
  EXPECT_EQ(f->find_tensor("missing"), nullptr);
  uint64_t total = 0;
  for (const auto& ti : f->tensors()) total += ti.nbytes;
  EXPECT_EQ(f->total_tensor_bytes(), total);
}

TEST(GgufReader, ReadsVersion2AndCustomAlignment) {
  Writer w = testing::sample_writer();
  w.set_version(2);
  w.set_u32("general.alignment", 256);
  auto f = parse_ok(*w.to_bytes());
  ASSERT_TRUE(f);
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->data_offset() % 256, 0u);
  for (const auto& t : f->tensors()) EXPECT_EQ(t.offset % 256, 0u) << t.name;
}

TEST(GgufReader, AcceptsZeroSizeDims) {
  Raw r;
  r.header(3, 2, 0)
      .tensor("empty", {32, 0}, kF32, 0)
      .tensor("one", {1}, kF32, 0)
      .pad_to(32)
      .zeros(4);
  auto f = parse_ok(r.bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->find_tensor("empty")->nbytes, 0u);
  EXPECT_EQ(f->find_tensor("empty")->n_elements(), 0);
}

TEST(GgufReader, TypedGetterErrorsNameKeyAndValue) {
  Writer w;
  w.set("k.u16", Value::u32(70000));
  w.set_string("k.s", "x");
  w.set_i32("k.neg", -1);
  w.set_i32_array("k.arr", {1});
  auto f = parse_ok(*w.to_bytes());
  ASSERT_TRUE(f);
  EXPECT_EQ(f->get_u32("nope").message(), "good.gguf: key 'nope' not found");
  EXPECT_EQ(f->get_u32("k.s").message(), "good.gguf: key 'k.s': expected u32, found string");
  EXPECT_EQ(f->get_u64("k.neg").message(), "good.gguf: key 'k.neg': value -1 does not fit in u64");
  EXPECT_EQ(f->find("k.u16")->to_unsigned_checked(ValueType::U16).message(),
            "value 70000 does not fit in u16");
  EXPECT_EQ(f->get_string("k.u16").message(), "good.gguf: key 'k.u16': expected string, found u32");
  EXPECT_EQ(f->get_string_array("k.s").message(),
            "good.gguf: key 'k.s': expected array of string, found string");
  EXPECT_NE(f->get_string_array("k.arr").message().find("element 0: expected string, found i32"),
            std::string::npos);
  EXPECT_EQ(f->get_bool("k.s").message(), "good.gguf: key 'k.s': expected bool, found string");
  EXPECT_EQ(*f->get_f32("k.neg"), -1.0f);
  EXPECT_FALSE(f->get_f32("k.s").is_ok());
}

TEST(GgufReaderErrors, Header) {
  expect_error({}, {"header", "truncated"});
  expect_error({'G', 'G', 'U', 'X', 3, 0, 0, 0}, {"header", "bad magic 0x58554747"});
  expect_error(Raw().header(1, 0, 0).bytes, {"header", "version 1 is not supported"});
  expect_error(Raw().header(4, 0, 0).bytes, {"header", "unsupported GGUF version 4"});
  expect_error(Raw().header(0x03000000, 0, 0).bytes, {"header", "big-endian"});
  expect_error(Raw().header(3, std::numeric_limits<uint64_t>::max(), 0).bytes,
               {"tensor count", "18446744073709551615"});
  expect_error(Raw().header(3, 0, 1ull << 60).bytes, {"metadata count", "1152921504606846976"});
  expect_error(Raw().u32(kMagic).u32(3).u32(0).bytes, {"tensor count", "truncated"});
}

TEST(GgufReaderErrors, MetadataLengthsAndTypes) {
  expect_error(Raw().header(3, 0, 1).u64(std::numeric_limits<uint64_t>::max()).zeros(16).bytes,
               {"key #0", "18446744073709551615"});
  expect_error(Raw().header(3, 0, 1).str("k").u32(8).u64(1000).bytes,
               {"key 'k'", "string length 1000"});
  expect_error(Raw().header(3, 0, 1).str("k").u32(13).u32(0).bytes, {"key 'k'", "value type 13"});
  expect_error(Raw().header(3, 0, 1).str("k").u32(9).u32(99).u64(0).bytes,
               {"key 'k'", "array element type 99"});
  expect_error(Raw().header(3, 0, 1).str("k").u32(9).u32(4).u64(1ull << 62).bytes,
               {"key 'k'", "array of 4611686018427387904 u32"});
  expect_error(Raw().header(3, 0, 1).str("k").u32(9).u32(8).u64(5).str("a").bytes,
               {"key 'k'", "array of 5 string elements exceeds the 9 bytes left"});
  expect_error(Raw().header(3, 0, 1).str("k").u32(9).u32(8).u64(1).u64(5).u8('a').bytes,
               {"key 'k'", "string length 5 exceeds the 1 bytes left"});
  expect_error(
      Raw().header(3, 0, 1).str("k").u32(5).u16(0).bytes,
      {"key 'k'", "truncated: i32 value needs 4 bytes at offset 37, but the file has 39 bytes"});
  expect_error(Raw().header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2).bytes,
               {"key 'a'", "duplicate key"});
}

TEST(GgufReaderErrors, ArrayNestingDepthIsBounded) {
  Raw ok;
  ok.header(3, 0, 1).str("k").u32(9);
  for (int i = 0; i < kMaxArrayDepth - 1; ++i) ok.u32(9).u64(1);
  ok.u32(0).u64(0);
  EXPECT_TRUE(parse_ok(ok.bytes));
  Raw deep;
  deep.header(3, 0, 1).str("k").u32(9);
  for (int i = 0; i < 100000; ++i) deep.u32(9).u64(1);
  expect_error(deep.bytes, {"key 'k'", "nested more than 8 deep"});
}

TEST(GgufReaderErrors, Alignment) {
  auto with_alignment = [](uint32_t type, uint64_t value) {
    Raw r;
    r.header(3, 0, 1).str("general.alignment").u32(type);
    return type == 10 ? r.u64(value).bytes : r.u32(static_cast<uint32_t>(value)).bytes;
  };
  expect_error(with_alignment(4, 0), {"key 'general.alignment'", "alignment 0"});
  expect_error(with_alignment(4, 24), {"key 'general.alignment'", "alignment 24"});
  expect_error(with_alignment(10, 64), {"key 'general.alignment'", "expected u32, found u64"});
}

TEST(GgufReaderErrors, TensorShapes) {
  expect_error(Raw().header(3, 1, 0).tensor("t", {}, kF32, 0).zeros(64).bytes,
               {"tensor 't'", "n_dims 0"});
  expect_error(Raw().header(3, 1, 0).tensor("t", {1, 1, 1, 1, 1}, kF32, 0).zeros(64).bytes,
               {"tensor 't'", "n_dims 5"});
  expect_error(Raw().header(3, 1, 0).tensor("t", {1, ~0ull}, kF32, 0).zeros(64).bytes,
               {"tensor 't'", "dim 1 is 18446744073709551615"});
  expect_error(Raw().header(3, 1, 0).tensor("t", {1ull << 32, 1ull << 32}, kF32, 0).zeros(64).bytes,
               {"tensor 't'", "[4294967296 x 4294967296] overflows int64"});
  expect_error(Raw().header(3, 1, 0).tensor("t", {4}, 99, 0).zeros(64).bytes,
               {"tensor 't'", "unknown tensor type 99"});
  expect_error(Raw().header(3, 1, 0).tensor("t", {100}, kQ4K, 0).zeros(64).bytes,
               {"tensor 't'", "100", "block size 256"});
  expect_error(Raw().header(3, 1, 0).tensor("t", {4}, kF32, 8).zeros(64).bytes,
               {"tensor 't'", "offset 8 is not a multiple of the alignment 32"});
  expect_error(
      Raw().header(3, 2, 0).tensor("t", {4}, kF32, 0).tensor("t", {4}, kF32, 32).zeros(64).bytes,
      {"tensor 't'", "duplicate tensor name"});
}

TEST(GgufReaderErrors, TensorData) {
  auto short_data = one_tensor("t", 8);
  short_data.pop_back();
  expect_error(short_data, {"tensor 't'", "offset 0 (+32 bytes)", "past the end"});
  Raw far;
  far.header(3, 1, 0).tensor("t", {8}, kF32, 1ull << 40).pad_to(32).zeros(32);
  expect_error(far.bytes, {"tensor 't'", "offset 1099511627776", "past the end"});
  Raw overlap;
  overlap.header(3, 2, 0)
      .tensor("a", {16}, kF32, 0)
      .tensor("b", {8}, kF32, 32)
      .pad_to(32)
      .zeros(64);
  expect_error(overlap.bytes, {"tensor 'b'", "overlaps tensor 'a'"});
  Raw no_data;
  no_data.header(3, 1, 0).tensor("t", {8}, kF32, 0);
  expect_error(no_data.bytes, {"data section", "past the end"});
}

TEST(GgufReaderErrors, TruncationAtEveryByteFails) {
  auto full = testing::sample_writer().to_bytes();
  ASSERT_TRUE(full.is_ok());
  const std::vector<uint8_t>& bytes = *full;
  ASSERT_TRUE(parse_ok(bytes));
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto f = File::from_bytes(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n), "cut.gguf");
    ASSERT_FALSE(f.is_ok()) << "a file cut to " << n << " of " << bytes.size() << " bytes parsed";
    ASSERT_TRUE(f.message().starts_with("cut.gguf: ")) << f.message();
  }
}

TEST(GgufReader, OpenErrorsNameThePath) {
  auto f = File::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.message(), "/nonexistent/dir/model.gguf: cannot open: No such file or directory");
  testing::TempDir dir;
  testing::write_file_bytes(dir.file("x.gguf"), {'G', 'G', 'U', 'F'});
  auto g = File::open(dir.file("x.gguf"));
  ASSERT_FALSE(g.is_ok());
  EXPECT_TRUE(g.message().starts_with(dir.file("x.gguf") + ": header: truncated")) << g.message();
}

TEST(GgufReader, OpenMapsTensorData) {
  testing::TempDir dir;
  const std::string path = dir.file("m.gguf");
  auto bytes = testing::sample_writer().to_bytes();
  ASSERT_TRUE(bytes.is_ok());
  testing::write_file_bytes(path, *bytes);
  auto f = File::open(path);
  ASSERT_TRUE(f.is_ok()) << f.message();
  auto mem = parse_ok(*bytes);
  ASSERT_TRUE(mem);
  EXPECT_EQ(testing::canonical_dump(**f), testing::canonical_dump(*mem));
  EXPECT_EQ((*f)->paths(), std::vector<std::string>{path});
}

}  // namespace
}  // namespace minfer::gguf
