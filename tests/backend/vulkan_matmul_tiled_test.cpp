// The Vulkan tiled matmul (encode_matmul_tiled, kernels/matmul_tiled.comp)
// for W of every weight type and every tile variant the device has, against
// the scalar reference: W encoded with quant::quantize_row, decoded with
// quant::dequantize_row, dot products in double with the f32 activations.
// Shapes: partial row tiles (67, 130 rows), partial token tiles (1, 70, 130
// tokens), in_dim 896 (1024 for the K-quants), 77 for the float types (a
// partial 32-column step), and in_dim 18944 (592 steps: lavapipe's loop cap).
// Tolerance: max abs diff < 1e-3 with outputs of unit scale.
//
// MINFER_TILED_BENCH=1 also runs VulkanMatmulTiled.Speed: the Qwen2.5-0.5B
// matmul shapes (1024-wide for the K-quants) timed with GPU timestamps,
// tiled (every tile variant) against encode_matmul, in GFLOP/s, and the
// token counts from which the tiled kernel is faster.
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/shader/encode_matmul_tiled.h"
#include "backend/shader/encoders.h"
#include "backend/shader/kernel_table.h"
#include "backend/shader/recorder.h"
#include "backend/vulkan_matmul_testutil.h"
#include "backend/vulkan_testutil.h"
#include "quant/reference.h"

namespace minfer::vulkan::testing {
namespace {

using cpu::testing::random_floats;
using quant::TensorType;

bool is_k_quant(TensorType type) {
  return quant::type_traits(type).block_size == 256;
}

bool is_float(TensorType type) {
  return type == TensorType::F32 || type == TensorType::F16 || type == TensorType::BF16;
}

std::string lower_name(TensorType type) {
  std::string out;
  for (char c : quant::type_name(type)) out += static_cast<char>(std::tolower(uint8_t(c)));
  return out;
}

// Every available matmul_tiled variant of `type`: "<type>" and "<type>_r*".
std::vector<uint32_t> tiled_variants(TensorType type) {
  std::vector<uint32_t> out;
  const std::string base = lower_name(type);
  const auto table = shader::embedded_kernels();
  for (uint32_t i = 0; i < table.size(); ++i) {
    if (table[i].name != "matmul_tiled") continue;
    if (table[i].variant != base && !table[i].variant.starts_with(base + "_r")) continue;
    if (device().kernel(i).available) out.push_back(i);
  }
  return out;
}

void check_tiled(TensorType type, int64_t rows, int64_t in_dim, int64_t tokens) {
  shader::Device& d = device();
  const Weights w = encode_weights(type, rows, in_dim, 21, rows);
  const auto x = random_floats(in_dim * tokens, 22, 1.0f / std::sqrt(float(in_dim)));
  const auto want = reference(w, x, rows, in_dim, tokens);
  auto gw = upload(d, std::as_bytes(std::span(w.bytes)));
  auto gx = upload_floats(d, x);
  const std::vector<uint32_t> kernels = tiled_variants(type);
  ASSERT_FALSE(kernels.empty()) << quant::type_name(type);
  for (uint32_t k : kernels) {
    auto gy = zeros(d, rows * tokens * 4);
    shader::Recorder rec(d);
    const shader::MatmulShape shape{in_dim, rows, tokens};
    const Status enc =
        shader::encode_matmul_tiled(rec, k, type, shader::BufferRange{gw.get(), 0, w.bytes.size()},
                                    whole(gx), whole(gy), shape);
    ASSERT_TRUE(enc.is_ok()) << enc.message();
    const Status s = rec.submit_and_wait();
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_LT(max_abs_diff(download_floats(d, *gy, rows * tokens), want), 1e-3)
        << shader::embedded_kernels()[k].label() << " rows " << rows << " in " << in_dim
        << " tokens " << tokens;
  }
}

class VulkanMatmulTiled : public ::testing::TestWithParam<TensorType> {};

TEST_P(VulkanMatmulTiled, MatchesTheDequantizedReference) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const int64_t in_dim = is_k_quant(GetParam()) ? 1024 : 896;
  check_tiled(GetParam(), 67, in_dim, 1);
  check_tiled(GetParam(), 67, in_dim, 70);
  check_tiled(GetParam(), 130, in_dim, 130);
}

// A shape for which the default variant picks 128 x 128 tiles
// (TheTileFollowsTheShape), one step deep: partial tiles on both sides.
TEST_P(VulkanMatmulTiled, LargeTiles) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const int64_t in_dim = is_k_quant(GetParam()) ? 256 : is_float(GetParam()) ? 45 : 32;
  check_tiled(GetParam(), 1290, in_dim, 1283);
}

TEST_P(VulkanMatmulTiled, PartialStepsAndLongRows) {
  MINFER_SKIP_WITHOUT_VULKAN();
  if (is_float(GetParam())) check_tiled(GetParam(), 29, 77, 9);
  // 592 steps of 32 columns: far below lavapipe's 65535 loop iterations.
  check_tiled(GetParam(), 5, 18944, 3);
}

INSTANTIATE_TEST_SUITE_P(VulkanTypes, VulkanMatmulTiled, ::testing::ValuesIn(kWeightTypes),
                         [](const auto& info) {
                           return std::string(quant::type_name(info.param));
                         });

// Two ranges of a weight's rows, each writing its columns of a wider y
// (y_stride = all the rows), match the dequantized reference; the columns a
// range does not own keep what they held.
TEST(VulkanMatmulTiledTypes, RangesOfRowsWriteTheirColumnsOfAWiderOutput) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  const int64_t rows = 200, r0 = 128, in_dim = 896, tokens = 70;  // r0 * 4 bytes: 512
  const Weights w = encode_weights(TensorType::Q4_0, rows, in_dim, 41, rows);
  const uint64_t rb = quant::row_bytes(TensorType::Q4_0, in_dim).value();
  const auto x = random_floats(in_dim * tokens, 42, 1.0f / std::sqrt(float(in_dim)));
  const auto want = reference(w, x, rows, in_dim, tokens);
  auto gw = upload(d, std::as_bytes(std::span(w.bytes)));
  auto gx = upload_floats(d, x);
  auto halves = zeros(d, rows * tokens * 4);
  auto lone = upload_floats(d, std::vector<float>(rows * tokens, -7.0f));
  const uint32_t k = shader::matmul_tiled_kernel(d, TensorType::Q4_0).value();
  shader::Recorder rec(d);
  for (const auto& [y, from, n] :
       {std::tuple{&halves, int64_t{0}, r0}, std::tuple{&halves, r0, rows - r0},
        std::tuple{&lone, r0, rows - r0}}) {
    const shader::BufferRange yr{y->get(), uint64_t(from) * 4, uint64_t(rows * tokens - from) * 4};
    const Status st = shader::encode_matmul_tiled(rec, k, TensorType::Q4_0,
                                                  shader::BufferRange{gw.get(), from * rb, n * rb},
                                                  whole(gx), yr, {in_dim, n, tokens, rows});
    ASSERT_TRUE(st.is_ok()) << st.message();
  }
  ASSERT_TRUE(rec.submit_and_wait().is_ok());
  EXPECT_LT(max_abs_diff(download_floats(d, *halves, rows * tokens), want), 1e-3);
  const auto got = download_floats(d, *lone, rows * tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < r0; ++r) ASSERT_EQ(got[t * rows + r], -7.0f) << t << " " << r;
    for (int64_t r = r0; r < rows; ++r) {
      ASSERT_NEAR(got[t * rows + r], want[t * rows + r], 1e-3) << t << " " << r;
    }
  }
}

TEST(VulkanMatmulTiledTypes, EveryWeightTypeHasAKernel) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const quant::TypeTraits* t = quant::find_type_traits(raw);
    if (t == nullptr || !quant::is_weight_type(t->type)) continue;
    auto k = shader::matmul_tiled_kernel(device(), t->type);
    ASSERT_TRUE(k.is_ok()) << t->name << ": " << k.message();
    EXPECT_EQ(shader::embedded_kernels()[*k].variant, lower_name(t->type));
  }
  for (TensorType t : {TensorType::Q8_K, TensorType::IQ4_NL, TensorType::I32}) {
    EXPECT_EQ(shader::matmul_tiled_kernel(device(), t).status().code(), StatusCode::kUnimplemented)
        << quant::type_name(t);
  }
  EXPECT_GT(shader::matmul_tiled_min_tokens(device()), 1);
}

TEST(VulkanMatmulTiledTypes, TheTileFollowsTheShape) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const uint32_t q4 = shader::matmul_tiled_kernel(device(), TensorType::Q4_0).value();
  struct Case {
    int64_t out_dim, n_tokens;
    uint32_t rows;
  };
  // Measured on the H200 (encode_matmul_tiled.cpp): few 128 x 128 tiles lose.
  for (const Case& c :
       {Case{896, 2048, 128}, Case{4864, 2048, 128}, Case{151936, 512, 128}, Case{4864, 512, 64},
        Case{896, 512, 64}, Case{128, 2048, 64}, Case{896, 8, 64}, Case{67, 70, 64},
        Case{130, 130, 64}, Case{1290, 1283, 128}}) {
    auto t =
        shader::matmul_tiled_tile(device(), q4, TensorType::Q4_0, {896, c.out_dim, c.n_tokens});
    ASSERT_TRUE(t.is_ok()) << t.message();
    EXPECT_EQ(t->rows, c.rows) << c.out_dim << " x " << c.n_tokens;
    EXPECT_EQ(t->tokens, c.rows) << c.out_dim << " x " << c.n_tokens;
    EXPECT_EQ(shader::embedded_kernels()[t->kernel].variant,
              c.rows == 128 ? "q4_0" : "q4_0_r64t64");
  }
  // A tile asked for by name is kept.
  const uint32_t small = shader::find_kernel("matmul_tiled", "q4_0_r64t64").value();
  auto t = shader::matmul_tiled_tile(device(), small, TensorType::Q4_0, {896, 896, 2048});
  ASSERT_TRUE(t.is_ok()) << t.message();
  EXPECT_EQ(t->kernel, small);
  EXPECT_EQ(shader::matmul_tiled_tile(device(), small, TensorType::Q8_0, {896, 896, 2048})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(VulkanMatmulTiledTypes, BadCallsAreRefused) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  auto buf = zeros(d, 4096);
  shader::Recorder rec(d);
  const uint32_t q4 = shader::matmul_tiled_kernel(d, TensorType::Q4_0).value();
  // A partial block, a short W, a kernel of another type, the GEMV kernel.
  Status s = shader::encode_matmul_tiled(rec, q4, TensorType::Q4_0, whole(buf), whole(buf),
                                         whole(buf), {40, 2, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  s = shader::encode_matmul_tiled(rec, q4, TensorType::Q4_0, whole(buf), whole(buf), whole(buf),
                                  {896, 300, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("W needs"), std::string::npos) << s.message();
  s = shader::encode_matmul_tiled(rec, q4, TensorType::F16, whole(buf), whole(buf), whole(buf),
                                  {32, 1, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  const uint32_t gemv = shader::matmul_kernel(d, TensorType::Q4_0).value();
  s = shader::encode_matmul_tiled(rec, gemv, TensorType::Q4_0, whole(buf), whole(buf), whole(buf),
                                  {32, 1, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  // y too small, n_tokens 0, K-quant rows of partial super-blocks.
  s = shader::encode_matmul_tiled(rec, q4, TensorType::Q4_0, whole(buf), whole(buf),
                                  shader::BufferRange{buf.get(), 0, 16}, {32, 2, 3});
  EXPECT_NE(s.message().find("y needs"), std::string::npos) << s.message();
  s = shader::encode_matmul_tiled(rec, q4, TensorType::Q4_0, whole(buf), whole(buf), whole(buf),
                                  {32, 1, 0});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  const uint32_t q4k = shader::matmul_tiled_kernel(d, TensorType::Q4_K).value();
  s = shader::encode_matmul_tiled(rec, q4k, TensorType::Q4_K, whole(buf), whole(buf), whole(buf),
                                  {896, 1, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_EQ(rec.pending(), 0u);
}

// ---- MINFER_TILED_BENCH=1: timings on real shapes ----

struct Bench {
  TensorType type;
  int64_t out_dim, in_dim, tokens;
};

// Seconds per dispatch of `encode`, the best of 3 rounds of ~3 ms each
// (GPU timestamps) after ~30 ms of warm-up, so that the clocks are up; a
// negative value when it fails.
template <typename Encode>
double time_dispatches(shader::Device& d, Encode encode) {
  auto round = [&](int reps) -> double {
    shader::Recorder rec(d);
    if (!rec.timestamp().is_ok()) return -1;
    for (int i = 0; i < reps; ++i) {
      if (!encode(rec).is_ok()) return -1;
    }
    if (!rec.timestamp().is_ok() || !rec.submit_and_wait().is_ok()) return -1;
    const auto& ts = rec.timestamps_s();
    return ts.size() == 2 ? (ts[1] - ts[0]) / reps : -1;
  };
  const double first = round(1);
  if (first <= 0) return -1;
  if (round(std::clamp(int(30e-3 / first), 1, 5000)) <= 0) return -1;
  const int reps = std::clamp(int(3e-3 / first), 1, 1000);
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const double s = round(reps);
    if (s <= 0) return -1;
    best = std::min(best, s);
  }
  return best;
}

// Times every tiled variant and (optionally) encode_matmul on one shape;
// checks the default tiled result against encode_matmul's.
void bench_shape(const Bench& b, bool with_gemv) {
  shader::Device& d = device();
  const Weights w = encode_weights(b.type, b.out_dim, b.in_dim, 31, 64);
  const auto x = random_floats(b.in_dim * b.tokens, 32, 1.0f / std::sqrt(float(b.in_dim)));
  auto gw = upload(d, std::as_bytes(std::span(w.bytes)));
  auto gx = upload_floats(d, x);
  auto gy = zeros(d, b.out_dim * b.tokens * 4);
  auto gy2 = zeros(d, b.out_dim * b.tokens * 4);
  const shader::MatmulShape shape{b.in_dim, b.out_dim, b.tokens};
  const shader::BufferRange wr{gw.get(), 0, w.bytes.size()};
  const double flop = 2.0 * b.out_dim * b.in_dim * b.tokens;
  std::string line = std::string(quant::type_name(b.type)) + " " + std::to_string(b.out_dim) + "x" +
                     std::to_string(b.in_dim) + " n=" + std::to_string(b.tokens) + ":";
  char buf[128];
  for (uint32_t k : tiled_variants(b.type)) {
    const double s = time_dispatches(d, [&](shader::Recorder& rec) {
      return shader::encode_matmul_tiled(rec, k, b.type, wr, whole(gx), whole(gy), shape);
    });
    const std::string_view v = shader::embedded_kernels()[k].variant;
    const std::string label =
        v == lower_name(b.type) ? "auto" : std::string(v.substr(v.find("_r") + 1));
    std::snprintf(buf, sizeof(buf), " %s %.0f", label.c_str(), flop / s * 1e-9);
    line += buf;
  }
  if (with_gemv) {
    const uint32_t k = shader::matmul_kernel(d, b.type).value();
    const double s = time_dispatches(d, [&](shader::Recorder& rec) {
      return shader::encode_matmul(rec, k, b.type, wr, whole(gx), whole(gy2), shape);
    });
    std::snprintf(buf, sizeof(buf), " | matmul %.0f GFLOP/s", flop / s * 1e-9);
    line += buf;
    // The default variant once more into gy (the last timed one may be another).
    shader::Recorder rec(d);
    ASSERT_TRUE(shader::encode_matmul_tiled(rec, shader::matmul_tiled_kernel(d, b.type).value(),
                                            b.type, wr, whole(gx), whole(gy), shape)
                    .is_ok());
    ASSERT_TRUE(rec.submit_and_wait().is_ok());
    const size_t n = size_t(b.out_dim * b.tokens);
    const auto a = download_floats(d, *gy, n), c = download_floats(d, *gy2, n);
    double m = 0;
    for (size_t i = 0; i < n; ++i) m = std::max(m, double(std::abs(a[i] - c[i])));
    std::snprintf(buf, sizeof(buf), " (max |tiled - matmul| %.2g)", m);
    line += buf;
    EXPECT_LT(m, 2e-3) << line;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

TEST(VulkanMatmulTiledBench, Speed) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const char* on = std::getenv("MINFER_TILED_BENCH");
  if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "set MINFER_TILED_BENCH=1";
  std::printf("%s, %s; GFLOP/s\n", device().info().name.c_str(), device().info().driver.c_str());
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_K, TensorType::Q8_0, TensorType::Q6_K,
                       TensorType::Q5_0, TensorType::F16}) {
    const int64_t h = is_k_quant(t) ? 1024 : 896;
    for (int64_t tokens : {512, 2048}) {
      for (const auto& [o, i] :
           {std::pair<int64_t, int64_t>{h, h}, {128, h}, {4864, h}, {h, 4864}}) {
        bench_shape({t, o, i, tokens}, tokens == 512);
      }
    }
    if (t == TensorType::Q4_0 || t == TensorType::Q4_K) bench_shape({t, 151936, h, 512}, false);
  }
  // Where the tiled kernel starts to win.
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_K}) {
    const int64_t h = is_k_quant(t) ? 1024 : 896;
    for (int64_t tokens : {8, 16, 32, 48, 64, 96, 128, 256}) {
      for (const auto& [o, i] : {std::pair<int64_t, int64_t>{h, h}, {128, h}, {4864, h}}) {
        bench_shape({t, o, i, tokens}, true);
      }
    }
  }
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
