// Checks the reference (de)quantizers against data produced by an independent
// implementation (the gguf Python package; see tools/gen_quant_goldens.py).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "quant/reference.h"
#include "quant/tensor_type.h"

namespace minfer::quant {
namespace {

struct Golden {
  uint32_t type_id = 0;
  uint32_t n = 0;
  std::vector<uint8_t> raw;   // quantized bytes
  std::vector<float> values;  // f32 values (outputs for MQGD, inputs for MQGQ)
};

std::string golden_path(const std::string& file) {
  return std::string(MINFER_TEST_DATA_DIR) + "/golden/" + file;
}

uint32_t read_u32(const std::vector<uint8_t>& b, size_t off) {
  uint32_t v = 0;
  std::memcpy(&v, b.data() + off, 4);
  return v;
}

// Loads a golden file; any malformation fails the calling test.
void load_golden(const std::string& file, const char* magic, Golden* g) {
  std::ifstream in(golden_path(file), std::ios::binary);
  ASSERT_TRUE(in) << "missing " << golden_path(file);
  const std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GE(b.size(), 20u);
  ASSERT_EQ(std::memcmp(b.data(), magic, 4), 0) << file;
  ASSERT_EQ(read_u32(b, 4), 1u) << file;
  g->type_id = read_u32(b, 8);
  g->n = read_u32(b, 12);
  const uint32_t m = read_u32(b, 16);
  ASSERT_EQ(b.size(), 20u + m + 4ull * g->n) << file;
  const bool raw_first = std::memcmp(magic, "MQGD", 4) == 0;
  const size_t raw_off = raw_first ? 20 : 20 + 4ull * g->n;
  const size_t val_off = raw_first ? 20 + m : 20;
  g->raw.assign(b.begin() + static_cast<std::ptrdiff_t>(raw_off),
                b.begin() + static_cast<std::ptrdiff_t>(raw_off + m));
  g->values.resize(g->n);
  std::memcpy(g->values.data(), b.data() + val_off, 4ull * g->n);
}

class DequantizeGolden : public ::testing::TestWithParam<TensorType> {};

TEST_P(DequantizeGolden, MatchesGgufPyBitExactly) {
  const TensorType type = GetParam();
  Golden g;
  ASSERT_NO_FATAL_FAILURE(
      load_golden("dequant_" + std::string(type_name(type)) + ".bin", "MQGD", &g));
  ASSERT_EQ(g.type_id, static_cast<uint32_t>(type));
  auto bytes = row_bytes(type, g.n);
  ASSERT_TRUE(bytes.is_ok()) << bytes.message();
  ASSERT_EQ(*bytes, g.raw.size());
  std::vector<float> out(g.n);
  ASSERT_TRUE(dequantize_row(type, g.raw.data(), out.data(), g.n).is_ok());
  int mismatches = 0;
  for (uint32_t i = 0; i < g.n && mismatches < 10; ++i) {
    // NaN payloads: numpy keeps signalling NaNs signalling, this reference
    // quiets them like the hardware converters do; both must still be NaN.
    if (std::isnan(g.values[i])) {
      EXPECT_TRUE(std::isnan(out[i])) << "element " << i;
      continue;
    }
    if (std::bit_cast<uint32_t>(out[i]) != std::bit_cast<uint32_t>(g.values[i])) {
      ++mismatches;
      ADD_FAILURE() << type_name(type) << " element " << i << ": got " << out[i] << " want "
                    << g.values[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantizeGolden,
                         ::testing::Values(TensorType::F32, TensorType::F16, TensorType::BF16,
                                           TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,
                                           TensorType::Q5_1, TensorType::Q8_0, TensorType::Q8_1,
                                           TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K,
                                           TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_K,
                                           TensorType::MXFP4),
                         [](const auto& info) { return std::string(type_name(info.param)); });

class QuantizeGolden : public ::testing::TestWithParam<TensorType> {};

TEST_P(QuantizeGolden, MatchesGgmlRoundingByteForByte) {
  const TensorType type = GetParam();
  Golden g;
  ASSERT_NO_FATAL_FAILURE(
      load_golden("quant_" + std::string(type_name(type)) + ".bin", "MQGQ", &g));
  ASSERT_EQ(g.type_id, static_cast<uint32_t>(type));
  std::vector<uint8_t> out(g.raw.size(), 0xAA);
  const Status st = quantize_row(type, g.values.data(), out.data(), g.n);
  ASSERT_TRUE(st.is_ok()) << st.message();
  const uint64_t block_bytes = type_traits(type).type_size;
  int mismatches = 0;
  for (size_t i = 0; i < out.size() && mismatches < 10; ++i) {
    if (out[i] != g.raw[i]) {
      ++mismatches;
      ADD_FAILURE() << type_name(type) << " byte " << i << " (block " << i / block_bytes
                    << ", offset " << i % block_bytes << "): got " << int(out[i]) << " want "
                    << int(g.raw[i]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ExactTypes, QuantizeGolden,
                         ::testing::Values(TensorType::F16, TensorType::BF16, TensorType::Q4_0,
                                           TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                                           TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K,
                                           TensorType::MXFP4),
                         [](const auto& info) { return std::string(type_name(info.param)); });

TEST(TypeTableGolden, BlockGeometryMatchesGgufPy) {
  std::ifstream in(golden_path("quant_sizes.txt"));
  ASSERT_TRUE(in);
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string name;
    uint32_t id = 0;
    int64_t block = 0;
    uint64_t size = 0;
    ASSERT_TRUE(ss >> name >> id >> block >> size) << line;
    const TypeTraits* t = find_type_traits(id);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->name, name);
    EXPECT_EQ(t->block_size, block) << name;
    if (name == "Q8_1") {
      // gguf-py still lists the older f32-scale Q8_1 block (4 + 4 + 32 bytes);
      // ggml's block_q8_1 holds two f16s. Q8_1 only exists in memory, never in
      // GGUF files, so the stale entry is harmless but must not be copied.
      EXPECT_EQ(size, 40u);
      EXPECT_EQ(t->type_size, 36u);
    } else {
      EXPECT_EQ(t->type_size, size) << name;
    }
    ++rows;
  }
  EXPECT_EQ(rows, 32);
}

}  // namespace
}  // namespace minfer::quant
