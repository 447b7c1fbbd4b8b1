// The matmul's fusions against the separate kernels they replace, bit for
// bit (the engine's batch invariance relies on it: a decode step runs the
// fused kernel where a prefill chunk runs the separate ones):
//   - input norm (rms_norm then matmul), with and without a norm weight;
//   - GLU epilogue (two matmuls over gate and up, then glu), SwiGLU and GeGLU;
//   - both together (the decode FusedFFN), and the norm with a bias (FusedQKV);
// for the types whose decoders differ (word units, quads, 16-bit, the legacy
// per-element path), 1, 5 and 9 tokens, and every way a row's lanes meet.
// Also against the host, and the refusals.
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/shader/encode_activation.h"
#include "backend/shader/encoders.h"
#include "backend/shader/recorder.h"
#include "backend/vulkan_matmul_testutil.h"
#include "backend/vulkan_testutil.h"

namespace minfer::vulkan::testing {
namespace {

using cpu::testing::random_floats;
using quant::TensorType;

struct Case {
  TensorType type;
  int64_t in_dim;
};

constexpr Case kCases[] = {
    {TensorType::Q4_0, 896}, {TensorType::Q8_0, 640}, {TensorType::Q4_K, 1024},
    {TensorType::Q6_K, 512}, {TensorType::F16, 896},  {TensorType::Q4_1, 256},
};

constexpr shader::MatmulForTesting kWays[] = {{}, {.lanes = 4}, {.lanes = 64}};

std::string label(const Case& c, int64_t tokens, const shader::MatmulForTesting& how) {
  return std::string(quant::type_name(c.type)) + " in " + std::to_string(c.in_dim) + " t" +
         std::to_string(tokens) + " lanes " + std::to_string(how.lanes);
}

// The host's RMS norm of each token (f64), times the weight when given.
std::vector<float> host_norm(const std::vector<float>& x, const std::vector<float>* w,
                             int64_t in_dim, int64_t tokens, float eps) {
  std::vector<float> out(x.size());
  for (int64_t t = 0; t < tokens; ++t) {
    double ss = 0;
    for (int64_t k = 0; k < in_dim; ++k) ss += double(x[t * in_dim + k]) * x[t * in_dim + k];
    const double s = 1.0 / std::sqrt(ss / double(in_dim) + eps);
    for (int64_t k = 0; k < in_dim; ++k) {
      out[t * in_dim + k] = float(x[t * in_dim + k] * s * (w ? (*w)[k] : 1.0f));
    }
  }
  return out;
}

// rows gate + rows up in one buffer (the fused kernel's W) and apart.
struct GateUp {
  Weights gate, up;
  std::vector<uint8_t> both;
};

GateUp gate_up(TensorType type, int64_t rows, int64_t in_dim) {
  GateUp g{encode_weights(type, rows, in_dim, 31), encode_weights(type, rows, in_dim, 32), {}};
  g.both = g.gate.bytes;
  g.both.insert(g.both.end(), g.up.bytes.begin(), g.up.bytes.end());
  return g;
}

class VulkanMatmulFused : public ::testing::TestWithParam<Case> {};

// The decode FusedFFN: act(norm(x) Wg^T) * (norm(x) Wu^T) in one dispatch.
TEST_P(VulkanMatmulFused, NormAndGluEqualTheSeparateKernels) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const Case c = GetParam();
  shader::Device& d = device();
  const int64_t rows = 37;
  const float eps = 1e-6f;
  const GateUp g = gate_up(c.type, rows, c.in_dim);
  const auto nw = random_floats(c.in_dim, 33, 1.0f);
  auto g_both = upload(d, std::as_bytes(std::span(g.both)));
  auto g_gate = upload(d, std::as_bytes(std::span(g.gate.bytes)));
  auto g_up = upload(d, std::as_bytes(std::span(g.up.bytes)));
  auto g_nw = upload_floats(d, nw);
  const uint32_t k = shader::matmul_kernel(d, c.type).value();
  for (const int64_t tokens : {1, 5, 9}) {
    const auto x = random_floats(c.in_dim * tokens, 34 + uint32_t(tokens), 2.0f);
    auto gx = upload_floats(d, x);
    auto normed = zeros(d, x.size() * 4);
    const int64_t n = rows * tokens;
    auto gate = zeros(d, n * 4), up = zeros(d, n * 4), want = zeros(d, n * 4);
    for (const shader::GluOp op : {shader::GluOp::kSwiGLU, shader::GluOp::kGeGLU}) {
      for (const shader::MatmulForTesting& how : kWays) {
        const std::string what =
            label(c, tokens, how) + (op == shader::GluOp::kSwiGLU ? " swiglu" : " geglu");
        const Forced forced(how);
        const shader::MatmulShape shape{c.in_dim, rows, tokens};
        auto fused = zeros(d, n * 4);
        shader::Recorder rec(d);
        ASSERT_TRUE(shader::encode_rms_norm(rec, whole(gx), whole(g_nw), whole(normed), tokens,
                                            c.in_dim, eps)
                        .is_ok());
        ASSERT_TRUE(
            shader::encode_matmul(rec, k, c.type, whole(g_gate), whole(normed), whole(gate), shape)
                .is_ok());
        ASSERT_TRUE(
            shader::encode_matmul(rec, k, c.type, whole(g_up), whole(normed), whole(up), shape)
                .is_ok());
        ASSERT_TRUE(shader::encode_glu(rec, op, whole(gate), whole(up), whole(want), n).is_ok());
        const Status s =
            shader::encode_matmul(rec, k, c.type, whole(g_both), whole(gx), whole(fused), shape,
                                  "fused", {{}, {}, op}, {true, whole(g_nw), eps});
        ASSERT_TRUE(s.is_ok()) << what << ": " << s.message();
        ASSERT_TRUE(rec.submit_and_wait().is_ok());
        const auto expected = download_floats(d, *want, n);
        EXPECT_EQ(download_floats(d, *fused, n), expected) << what;
        if (op != shader::GluOp::kSwiGLU || how.lanes != 0) continue;
        // And the host: silu(g) * u of the normalized x.
        const auto hx = host_norm(x, &nw, c.in_dim, tokens, eps);
        const auto hg = reference(g.gate, hx, rows, c.in_dim, tokens);
        const auto hu = reference(g.up, hx, rows, c.in_dim, tokens);
        double worst = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double h = hg[i] / (1.0 + std::exp(-hg[i])) * hu[i];
          worst = std::max(worst, std::abs(h - double(expected[i])));
        }
        EXPECT_LT(worst, 2e-3) << what;
      }
    }
  }
}

// The decode FusedQKV's product: norm (no weight, and weighted) + bias.
TEST_P(VulkanMatmulFused, NormAndBiasEqualTheSeparateKernels) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const Case c = GetParam();
  shader::Device& d = device();
  const int64_t rows = 45;
  const float eps = 1e-5f;
  const Weights w = encode_weights(c.type, rows, c.in_dim, 41);
  auto gw = upload(d, std::as_bytes(std::span(w.bytes)));
  auto g_nw = upload_floats(d, random_floats(c.in_dim, 42, 1.0f));
  auto g_bias = upload_floats(d, random_floats(rows, 43));
  const uint32_t k = shader::matmul_kernel(d, c.type).value();
  for (const int64_t tokens : {1, 9}) {
    const auto x = random_floats(c.in_dim * tokens, 44, 3.0f);
    auto gx = upload_floats(d, x);
    auto normed = zeros(d, x.size() * 4);
    const int64_t n = rows * tokens;
    for (const bool weighted : {false, true}) {
      for (const shader::MatmulForTesting& how : kWays) {
        const std::string what = label(c, tokens, how) + (weighted ? " weighted" : "");
        const Forced forced(how);
        const shader::MatmulShape shape{c.in_dim, rows, tokens};
        const shader::BufferRange norm_w = weighted ? whole(g_nw) : shader::BufferRange{};
        auto want = zeros(d, n * 4), fused = zeros(d, n * 4);
        shader::Recorder rec(d);
        ASSERT_TRUE(
            shader::encode_rms_norm(rec, whole(gx), norm_w, whole(normed), tokens, c.in_dim, eps)
                .is_ok());
        ASSERT_TRUE(shader::encode_matmul(rec, k, c.type, whole(gw), whole(normed), whole(want),
                                          shape, "", {whole(g_bias), {}, std::nullopt})
                        .is_ok());
        ASSERT_TRUE(shader::encode_matmul(rec, k, c.type, whole(gw), whole(gx), whole(fused), shape,
                                          "", {whole(g_bias), {}, std::nullopt},
                                          {true, norm_w, eps})
                        .is_ok());
        ASSERT_TRUE(rec.submit_and_wait().is_ok());
        EXPECT_EQ(download_floats(d, *fused, n), download_floats(d, *want, n)) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(VulkanTypes, VulkanMatmulFused, ::testing::ValuesIn(kCases),
                         [](const auto& info) {
                           return std::string(quant::type_name(info.param.type));
                         });

TEST(VulkanMatmulFusedChecks, ShortBuffersAndGluWithBiasAreRefused) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  const int64_t rows = 16, in_dim = 256;
  const GateUp g = gate_up(TensorType::Q8_0, rows, in_dim);
  auto g_both = upload(d, std::as_bytes(std::span(g.both)));
  auto g_gate = upload(d, std::as_bytes(std::span(g.gate.bytes)));
  auto gx = upload_floats(d, random_floats(in_dim, 51));
  auto gy = zeros(d, rows * 4);
  auto g_nw = upload_floats(d, random_floats(in_dim / 2, 52));
  const uint32_t k = shader::matmul_kernel(d, TensorType::Q8_0).value();
  const shader::MatmulShape shape{in_dim, rows, 1};
  shader::Recorder rec(d);
  // W of the gate rows only: a GLU needs both.
  Status s = shader::encode_matmul(rec, k, TensorType::Q8_0, whole(g_gate), whole(gx), whole(gy),
                                   shape, "", {{}, {}, shader::GluOp::kSwiGLU});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  // A GLU with a bias.
  s = shader::encode_matmul(rec, k, TensorType::Q8_0, whole(g_both), whole(gx), whole(gy), shape,
                            "", {whole(gy), {}, shader::GluOp::kSwiGLU});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  // A norm weight shorter than in_dim.
  s = shader::encode_matmul(rec, k, TensorType::Q8_0, whole(g_gate), whole(gx), whole(gy), shape,
                            "", {}, {true, whole(g_nw), 1e-6f});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("norm weight"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
