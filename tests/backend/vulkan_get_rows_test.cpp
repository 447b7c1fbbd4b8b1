// The Vulkan weight-row gather (the embedding lookup) out[i][:] =
// dequant(W[ids[i]]) * scale for W of every weight type (MXFP4 included),
// every variant the device has, bit-exact with quant::dequantize_row times
// the scale in f32.
// Tables are random values encoded by quant::quantize_row; ids are random
// (with repeats); rows of 640 elements (Gemma's width; 768 for the K-quants)
// and 13 (a partial unit, float types); and tables of random block bytes
// with sane f16 scales, which reach every bit pattern of the quants and
// packed sub-block scales. Also: an id outside the table skips
// its row and reports MINFER_ERR_ROW_ID with the id and the bound; 70000 ids
// fold the grid past maxComputeWorkGroupCount[0]; malformed calls are refused.
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/shader/encoders.h"
#include "backend/shader/kernel_args.h"
#include "backend/shader/kernel_table.h"
#include "backend/shader/recorder.h"
#include "backend/vulkan_testutil.h"
#include "quant/half.h"
#include "quant/reference.h"

namespace minfer::vulkan::testing {
namespace {

using cpu::testing::random_floats;
using quant::TensorType;

// Every weight type; the float ones first (3), then the quantized ones.
constexpr TensorType kWeightTypes[] = {
    TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1,
    TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K,
    TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::MXFP4};

// Written into `out` before a dispatch: rows the kernel must not touch keep it.
constexpr float kUntouched = -1234.5f;

struct Table {
  std::vector<uint8_t> bytes;
  std::vector<float> decoded;  // quant::dequantize_row of each row
  uint64_t row_bytes = 0;
};

Table make_table(TensorType type, int64_t rows, int64_t row_len, uint32_t seed) {
  const auto values = random_floats(rows * row_len, seed);
  Table t;
  t.row_bytes = quant::row_bytes(type, row_len).value();
  t.bytes.resize(t.row_bytes * rows);
  t.decoded.resize(values.size());
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = t.bytes.data() + r * t.row_bytes;
    if (type == TensorType::F32) {
      std::memcpy(row, values.data() + r * row_len, t.row_bytes);
    } else {
      EXPECT_TRUE(quant::quantize_row(type, values.data() + r * row_len, row, row_len).is_ok());
    }
    EXPECT_TRUE(quant::dequantize_row(type, row, t.decoded.data() + r * row_len, row_len).is_ok());
  }
  return t;
}

std::vector<int32_t> random_ids(int64_t n, int64_t n_rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(n_rows - 1));
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = dist(rng);
  return ids;
}

std::string lower(std::string_view s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Every get_rows variant for `type` that the device has.
std::vector<uint32_t> variants_of(TensorType type) {
  std::vector<uint32_t> out;
  const std::string base = lower(quant::type_name(type));
  for (const std::string& v : {base, base + "_packed"}) {
    const auto k = shader::find_kernel("get_rows", v);
    if (k && device().kernel(*k).available) out.push_back(*k);
  }
  return out;
}

struct Gathered {
  std::vector<float> out;
  std::vector<uint32_t> err;
};

// Runs kernel `k` over `ids` and returns out and the error words; with
// split > 0, as two dispatches binding rows [0, split) and [split, n_rows).
Gathered gather(uint32_t k, TensorType type, const Table& t, int64_t n_rows, int64_t row_len,
                const std::vector<int32_t>& ids, float scale, int64_t split = 0) {
  shader::Device& d = device();
  const int64_t n_ids = static_cast<int64_t>(ids.size());
  auto gw = upload(d, std::as_bytes(std::span(t.bytes)));
  auto gids = upload(d, std::as_bytes(std::span(ids)));
  auto gout = upload_floats(d, std::vector<float>(n_ids * row_len, kUntouched));
  auto gerr = zeros(d, MINFER_ERR_WORDS * 4);
  shader::Recorder rec(d);
  const uint64_t rb = t.bytes.size() / n_rows;
  for (const auto& [first, rows] :
       split > 0 ? std::vector<std::pair<int64_t, int64_t>>{{0, split}, {split, n_rows - split}}
                 : std::vector<std::pair<int64_t, int64_t>>{{0, n_rows}}) {
    const Status enc = shader::encode_get_rows(
        rec, k, type, shader::BufferRange{gw.get(), first * rb, rows * rb}, whole(gids),
        whole(gout), whole(gerr), n_rows, row_len, n_ids, scale, "", {first, rows});
    EXPECT_TRUE(enc.is_ok()) << enc.message();
  }
  const Status s = rec.submit_and_wait();
  EXPECT_TRUE(s.is_ok()) << s.message();
  Gathered g;
  g.out = download_floats(d, *gout, n_ids * row_len);
  g.err.resize(MINFER_ERR_WORDS);
  EXPECT_TRUE(d.read_buffer(*gerr, 0, std::as_writable_bytes(std::span(g.err))).is_ok());
  return g;
}

// Row i of `out` against decoded row ids[i] times scale, bit for bit (or
// kUntouched for an id outside the table); returns the mismatches.
int64_t mismatches(const Gathered& g, const Table& t, int64_t n_rows, int64_t row_len,
                   const std::vector<int32_t>& ids, float scale) {
  int64_t bad = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const bool valid = ids[i] >= 0 && ids[i] < n_rows;
    for (int64_t e = 0; e < row_len; ++e) {
      const float want = valid ? t.decoded[ids[i] * row_len + e] * scale : kUntouched;
      const float got = g.out[i * row_len + e];
      if (std::memcmp(&want, &got, sizeof(float)) != 0) {
        if (bad < 4) {
          ADD_FAILURE() << "out[" << i << "][" << e << "] (id " << ids[i] << ") = " << got
                        << ", want " << want;
        }
        ++bad;
      }
    }
  }
  return bad;
}

// Byte offsets of the f16 scale fields in a block (quant/blocks.h).
std::vector<int> f16_fields(TensorType type) {
  switch (type) {
    case TensorType::Q4_1:
    case TensorType::Q5_1:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
      return {0, 2};
    case TensorType::Q2_K:
      return {80, 82};
    case TensorType::Q3_K:
      return {108};
    case TensorType::Q6_K:
      return {208};
    case TensorType::MXFP4:  // an E8M0 byte instead (random_block_table)
      return {};
    default:  // Q4_0, Q5_0, Q8_0
      return {0};
  }
}

// Random bytes in every quant and sub-block scale field; the f16 scales in
// [-0.05, 0.05] and MXFP4's E8M0 exponents in [2^-16, 2^8] so that every
// value is finite and normal.
Table random_block_table(TensorType type, int64_t rows, int64_t row_len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  const quant::TypeTraits& traits = quant::type_traits(type);
  Table t;
  t.row_bytes = quant::row_bytes(type, row_len).value();
  t.bytes.resize(t.row_bytes * rows);
  for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(rng());
  for (size_t block = 0; block < t.bytes.size() / traits.type_size; ++block) {
    for (int off : f16_fields(type)) {
      const uint16_t h = quant::f32_to_f16(scale(rng));
      std::memcpy(t.bytes.data() + block * traits.type_size + off, &h, sizeof(h));
    }
    if (type == TensorType::MXFP4) {
      t.bytes[block * traits.type_size] = static_cast<uint8_t>(112 + rng() % 25);
    }
  }
  t.decoded.resize(rows * row_len);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(quant::dequantize_row(type, t.bytes.data() + r * t.row_bytes,
                                      t.decoded.data() + r * row_len, row_len)
                    .is_ok());
  }
  return t;
}

class VulkanGetRows : public ::testing::TestWithParam<TensorType> {};
class VulkanGetRowsBlocks : public ::testing::TestWithParam<TensorType> {};

// The quantized types only: random F16/BF16 bits would be NaNs and subnormals.
TEST_P(VulkanGetRowsBlocks, RandomBlockBytesAreBitExact) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const TensorType type = GetParam();
  const int64_t n_rows = 29, row_len = 1024;
  const Table t = random_block_table(type, n_rows, row_len, 51);
  std::vector<int32_t> ids(n_rows);
  for (int32_t i = 0; i < n_rows; ++i) ids[i] = n_rows - 1 - i;  // every row, reversed
  for (uint32_t k : variants_of(type)) {
    const Gathered g = gather(k, type, t, n_rows, row_len, ids, 1.5f);
    EXPECT_EQ(mismatches(g, t, n_rows, row_len, ids, 1.5f), 0)
        << shader::embedded_kernels()[k].label();
  }
}

TEST_P(VulkanGetRows, BitExactWithTheReferenceTimesTheScale) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const TensorType type = GetParam();
  const std::vector<uint32_t> kernels = variants_of(type);
  ASSERT_FALSE(kernels.empty()) << quant::type_name(type);
  const bool k_quant = quant::type_traits(type).block_size == 256;
  const bool float_type = quant::type_traits(type).block_size == 1;
  std::vector<int64_t> lens = {k_quant ? 768 : 640};
  if (float_type) lens.push_back(13);
  for (int64_t row_len : lens) {
    const int64_t n_rows = 37;
    const Table t = make_table(type, n_rows, row_len, 21);
    const auto ids = random_ids(11, n_rows, 22);
    for (float scale : {1.0f, std::sqrt(640.0f)}) {
      for (uint32_t k : kernels) {
        const Gathered g = gather(k, type, t, n_rows, row_len, ids, scale);
        EXPECT_EQ(mismatches(g, t, n_rows, row_len, ids, scale), 0)
            << shader::embedded_kernels()[k].label() << " row_len " << row_len << " scale "
            << scale;
        EXPECT_EQ(g.err[0], 0u) << shader::embedded_kernels()[k].label();
      }
    }
  }
}

TEST_P(VulkanGetRows, AnIdOutsideTheTableIsReportedAndSkipped) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const TensorType type = GetParam();
  const int64_t n_rows = 19;
  const int64_t row_len = quant::type_traits(type).block_size == 256 ? 256 : 64;
  const Table t = make_table(type, n_rows, row_len, 31);
  for (const int32_t bad : {int32_t(n_rows), int32_t(n_rows + 5), -3}) {
    std::vector<int32_t> ids = random_ids(6, n_rows, 32);
    ids[3] = bad;
    for (uint32_t k : variants_of(type)) {
      const Gathered g = gather(k, type, t, n_rows, row_len, ids, 0.5f);
      const std::string label = shader::embedded_kernels()[k].label();
      EXPECT_EQ(mismatches(g, t, n_rows, row_len, ids, 0.5f), 0) << label << " bad id " << bad;
      EXPECT_EQ(g.err[0], MINFER_ERR_ROW_ID) << label;
      EXPECT_EQ(static_cast<int32_t>(g.err[1]), bad) << label;
      EXPECT_EQ(g.err[2], uint32_t(n_rows)) << label;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(VulkanTypes, VulkanGetRows, ::testing::ValuesIn(kWeightTypes),
                         [](const auto& info) {
                           return std::string(quant::type_name(info.param));
                         });
INSTANTIATE_TEST_SUITE_P(VulkanTypes, VulkanGetRowsBlocks,
                         ::testing::ValuesIn(std::span(kWeightTypes).subspan(3)),
                         [](const auto& info) {
                           return std::string(quant::type_name(info.param));
                         });

TEST(VulkanGetRowsGrid, SeventyThousandIdsFoldTheGrid) {
  MINFER_SKIP_WITHOUT_VULKAN();
  // One workgroup per id (32-element rows): 70000 > 65535, the guaranteed
  // maxComputeWorkGroupCount[0], so the grid folds over y.
  const int64_t n_rows = 1000, row_len = 32, n_ids = 70000;
  const Table t = make_table(TensorType::Q8_0, n_rows, row_len, 41);
  const auto ids = random_ids(n_ids, n_rows, 42);
  const uint32_t k = shader::get_rows_kernel(device(), TensorType::Q8_0).value();
  const Gathered g = gather(k, TensorType::Q8_0, t, n_rows, row_len, ids, 3.0f);
  EXPECT_EQ(mismatches(g, t, n_rows, row_len, ids, 3.0f), 0);
  EXPECT_EQ(g.err[0], 0u);
}

// A table past one binding is gathered in two ranges of rows (as ShaderBackend
// does for one past maxStorageBufferRange): each dispatch writes the rows its
// range holds, bit-exact; an id outside the table is still skipped and
// reported (by the dispatch whose range starts the table).
TEST(VulkanGetRowsGrid, ATableInTwoRangesOfRows) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const int64_t n_rows = 40, row_len = 640, split = 32;  // 32 rows of 680 bytes: 85 x 256
  const Table t = make_table(TensorType::Q8_0, n_rows, row_len, 51);
  auto ids = random_ids(64, n_rows, 52);
  ids[5] = 0;
  ids[6] = split - 1;
  ids[7] = split;
  ids[8] = n_rows - 1;
  ids[9] = n_rows + 5;
  const uint32_t k = shader::get_rows_kernel(device(), TensorType::Q8_0).value();
  const Gathered g = gather(k, TensorType::Q8_0, t, n_rows, row_len, ids, 0.5f, split);
  EXPECT_EQ(mismatches(g, t, n_rows, row_len, ids, 0.5f), 0);
  EXPECT_EQ(g.err[0], MINFER_ERR_ROW_ID);
  EXPECT_EQ(static_cast<int32_t>(g.err[1]), n_rows + 5);
  EXPECT_EQ(g.err[2], uint32_t(n_rows));
  // A range past the table is refused.
  shader::Recorder rec(device());
  auto buf = zeros(device(), 1 << 16);
  EXPECT_FALSE(shader::encode_get_rows(rec, k, TensorType::Q8_0, whole(buf), whole(buf), whole(buf),
                                       whole(buf), n_rows, row_len, 1, 1.0f, "", {split, 9})
                   .is_ok());
}

TEST(VulkanGetRowsTypes, TheFeatureProbePicksAVariantPerType) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (TensorType t : kWeightTypes) {
    auto k = shader::get_rows_kernel(device(), t);
    ASSERT_TRUE(k.is_ok()) << k.message();
    EXPECT_TRUE(device().kernel(*k).available);
    EXPECT_EQ(shader::embedded_kernels()[*k].name, "get_rows");
    EXPECT_TRUE(shader::embedded_kernels()[*k].variant.starts_with(lower(quant::type_name(t))));
  }
  for (TensorType t : {TensorType::Q8_K, TensorType::IQ4_NL}) {
    EXPECT_EQ(shader::get_rows_kernel(device(), t).status().code(), StatusCode::kUnimplemented);
  }
}

TEST(VulkanGetRowsTypes, MalformedCallsAreRefused) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  auto buf = zeros(d, 4096);
  auto err = zeros(d, MINFER_ERR_WORDS * 4);
  shader::Recorder rec(d);
  const uint32_t q4k = shader::get_rows_kernel(d, TensorType::Q4_K).value();
  const uint32_t f32 = shader::get_rows_kernel(d, TensorType::F32).value();
  auto call = [&](uint32_t k, TensorType type, const shader::BufferRange& e, int64_t n_rows,
                  int64_t row_len, int64_t n_ids) {
    return shader::encode_get_rows(rec, k, type, whole(buf), whole(buf), whole(buf), e, n_rows,
                                   row_len, n_ids, 1.0f);
  };
  // A partial super-block, a table larger than its binding, a kernel of
  // another type, the matmul's kernel, no error words, zero ids.
  for (const Status& s : {call(q4k, TensorType::Q4_K, whole(err), 4, 640, 1),
                          call(q4k, TensorType::Q4_K, whole(err), 40, 256, 1),
                          call(f32, TensorType::Q4_K, whole(err), 4, 256, 1),
                          call(shader::matmul_kernel(d, TensorType::F32).value(), TensorType::F32,
                               whole(err), 4, 8, 1),
                          call(f32, TensorType::F32, shader::BufferRange{}, 4, 8, 1),
                          call(f32, TensorType::F32, shader::BufferRange{err.get(), 0, 8}, 4, 8, 1),
                          call(f32, TensorType::F32, whole(err), 4, 8, 0)}) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  }
  EXPECT_EQ(rec.pending(), 0u);
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
