// The Vulkan matmul y[t][r] = dot(W[r], x[t]) for W of every weight type
// (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K), every variant
// the device has (8/16-bit storage and packed words), against the scalar
// reference: W encoded with quant::quantize_row, decoded with
// quant::dequantize_row, dot products in double with the f32 activations.
// Shapes: in_dim 896 and 3584 (Qwen2.5 0.5B / 7B widths; 1024 and 3584 for
// the K-quants, whose rows are 256-element blocks), odd row counts, 1 and 5
// tokens (5: a partial second token group) and 9.
// Tolerance: max abs diff < 1e-3 with outputs of unit scale (activations
// scaled by 1/sqrt(in_dim)).
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/gpu/encoders.h"
#include "backend/gpu/kernel_table.h"
#include "backend/gpu/recorder.h"
#include "backend/vulkan_testutil.h"
#include "quant/reference.h"

namespace minfer::vulkan::testing {
namespace {

using cpu::testing::random_floats;
using quant::TensorType;

// Every type the GPU weight kernels decode: quant::is_weight_type's list.
constexpr TensorType kWeightTypes[] = {
    TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1,
    TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K,
    TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K};

struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> decoded;  // what the GPU must compute with
};

Weights encode_weights(TensorType type, int64_t rows, int64_t in_dim, uint32_t seed) {
  const auto values = random_floats(rows * in_dim, seed);
  const uint64_t rb = quant::row_bytes(type, in_dim).value();
  Weights w;
  w.bytes.resize(rb * rows);
  w.decoded.resize(values.size());
  for (int64_t r = 0; r < rows; ++r) {
    if (type == TensorType::F32) {
      std::memcpy(w.bytes.data() + r * rb, values.data() + r * in_dim, rb);
    } else {
      EXPECT_TRUE(
          quant::quantize_row(type, values.data() + r * in_dim, w.bytes.data() + r * rb, in_dim)
              .is_ok());
    }
    EXPECT_TRUE(
        quant::dequantize_row(type, w.bytes.data() + r * rb, w.decoded.data() + r * in_dim, in_dim)
            .is_ok());
  }
  return w;
}

std::vector<double> reference(const Weights& w, const std::vector<float>& x, int64_t rows,
                              int64_t in_dim, int64_t tokens) {
  std::vector<double> y(rows * tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t k = 0; k < in_dim; ++k)
        s += double(w.decoded[r * in_dim + k]) * x[t * in_dim + k];
      y[t * rows + r] = s;
    }
  }
  return y;
}

// Every matmul variant for `type` that the device has.
std::vector<uint32_t> variants_of(TensorType type) {
  std::vector<uint32_t> out;
  const std::string base = std::string(quant::type_name(type));
  std::string lower;
  for (char c : base) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string& v : {lower, lower + "_packed"}) {
    const auto k = gpu::find_kernel("matmul", v);
    if (k && device().kernel(*k).available) out.push_back(*k);
  }
  return out;
}

void check_matmul(TensorType type, int64_t rows, int64_t in_dim, int64_t tokens) {
  gpu::Device& d = device();
  const Weights w = encode_weights(type, rows, in_dim, 11);
  const auto x = random_floats(in_dim * tokens, 12, 1.0f / std::sqrt(float(in_dim)));
  const auto want = reference(w, x, rows, in_dim, tokens);
  auto gw = upload(d, std::as_bytes(std::span(w.bytes)));
  auto gx = upload_floats(d, x);
  auto gy = zeros(d, rows * tokens * 4);
  const std::vector<uint32_t> kernels = variants_of(type);
  ASSERT_FALSE(kernels.empty()) << quant::type_name(type);
  for (uint32_t k : kernels) {
    gpu::Recorder rec(d);
    const gpu::MatmulShape shape{in_dim, rows, tokens};
    const Status enc = gpu::encode_matmul(
        rec, k, type, gpu::BufferRange{gw.get(), 0, w.bytes.size()}, whole(gx), whole(gy), shape);
    ASSERT_TRUE(enc.is_ok()) << enc.message();
    const Status s = rec.submit_and_wait();
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_LT(max_abs_diff(download_floats(d, *gy, rows * tokens), want), 1e-3)
        << gpu::embedded_kernels()[k].label() << " rows " << rows << " in " << in_dim << " tokens "
        << tokens;
  }
}

class VulkanMatmul : public ::testing::TestWithParam<TensorType> {};

bool is_k_quant(TensorType type) {
  return quant::type_traits(type).block_size == 256;
}

TEST_P(VulkanMatmul, MatchesTheDequantizedReference) {
  MINFER_SKIP_WITHOUT_VULKAN();
  struct Shape {
    int64_t rows, in_dim;
  };
  const int64_t narrow = is_k_quant(GetParam()) ? 1024 : 896;
  for (const Shape& s : {Shape{67, narrow}, Shape{33, 3584}}) {
    for (int64_t tokens : {1, 5}) check_matmul(GetParam(), s.rows, s.in_dim, tokens);
  }
}

TEST_P(VulkanMatmul, NineTokensAndFewRows) {
  MINFER_SKIP_WITHOUT_VULKAN();
  check_matmul(GetParam(), 3, is_k_quant(GetParam()) ? 2048 : 896, 9);
}

INSTANTIATE_TEST_SUITE_P(VulkanTypes, VulkanMatmul, ::testing::ValuesIn(kWeightTypes),
                         [](const auto& info) {
                           return std::string(quant::type_name(info.param));
                         });

TEST(VulkanMatmulTypes, TheFeatureProbePicksAnAvailableVariantPerType) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (TensorType t : kWeightTypes) {
    auto k = gpu::matmul_kernel(device(), t);
    ASSERT_TRUE(k.is_ok()) << k.message();
    EXPECT_TRUE(device().kernel(*k).available);
    const bool storage = device().info().features.storage_buffer_8bit &&
                         device().info().features.storage_buffer_16bit;
    if (t != TensorType::F32) {
      EXPECT_EQ(gpu::embedded_kernels()[*k].variant.ends_with("_packed"), !storage)
          << gpu::embedded_kernels()[*k].label();
    }
  }
  for (TensorType t : {TensorType::Q8_K, TensorType::IQ4_NL, TensorType::I32}) {
    EXPECT_EQ(gpu::matmul_kernel(device(), t).status().code(), StatusCode::kUnimplemented)
        << quant::type_name(t);
  }
}

TEST(VulkanMatmulTypes, EveryWeightTypeOfTheReferenceHasAKernel) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const quant::TypeTraits* t = quant::find_type_traits(raw);
    if (t == nullptr || !quant::is_weight_type(t->type)) continue;
    EXPECT_TRUE(gpu::matmul_kernel(device(), t->type).is_ok()) << t->name;
  }
}

TEST(VulkanMatmulTypes, PartialBlocksAndShortBuffersAreRefused) {
  MINFER_SKIP_WITHOUT_VULKAN();
  gpu::Device& d = device();
  auto buf = zeros(d, 4096);
  gpu::Recorder rec(d);
  const uint32_t q4 = gpu::matmul_kernel(d, TensorType::Q4_0).value();
  Status s =
      gpu::encode_matmul(rec, q4, TensorType::Q4_0, whole(buf), whole(buf), whole(buf), {40, 2, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  s = gpu::encode_matmul(rec, q4, TensorType::Q4_0, whole(buf), whole(buf), whole(buf),
                         {896, 300, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("W needs"), std::string::npos) << s.message();
  s = gpu::encode_matmul(rec, q4, TensorType::F16, whole(buf), whole(buf), whole(buf), {32, 1, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  // K-quant rows are whole 256-element super-blocks: 896 is not.
  const uint32_t q4k = gpu::matmul_kernel(d, TensorType::Q4_K).value();
  s = gpu::encode_matmul(rec, q4k, TensorType::Q4_K, whole(buf), whole(buf), whole(buf),
                         {896, 1, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  s = gpu::encode_matmul(rec, q4k, TensorType::Q6_K, whole(buf), whole(buf), whole(buf),
                         {256, 1, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_EQ(rec.pending(), 0u);
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
