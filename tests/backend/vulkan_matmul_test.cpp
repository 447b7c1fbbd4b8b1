// The Vulkan matmul y[t][r] = dot(W[r], x[t]) for W of every weight type
// (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, Q2_K..Q6_K), every variant
// the device has (8/16-bit storage and packed words), against the scalar
// reference: W encoded with quant::quantize_row, decoded with
// quant::dequantize_row, dot products in double with the f32 activations.
// Shapes: in_dim 896, 3584, 4864 and 18944 (Qwen2.5 widths; 1024 instead of
// 896 for the K-quants, whose rows are 256-element blocks), odd row counts,
// 1..9 tokens (past 8: a second token group). Every way a row's lanes meet
// (fewer lanes than a subgroup, one subgroup, several) is forced once.
// Batch invariance: a token's row computed alone is bit-identical to the
// same row in batches of 7 and 9 tokens, whatever its place there.
// Tolerance: max abs diff < 1e-3 with outputs of unit scale (activations
// scaled by 1/sqrt(in_dim)).
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/shader/encode_activation.h"
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

// Every matmul variant for `type` that the device has.
std::vector<uint32_t> variants_of(TensorType type) {
  std::vector<uint32_t> out;
  const std::string base = std::string(quant::type_name(type));
  std::string lower;
  for (char c : base) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string& v : {lower, lower + "_packed"}) {
    const auto k = shader::find_kernel("matmul", v);
    if (k && device().kernel(*k).available) out.push_back(*k);
  }
  return out;
}

// y of the matmul with `kernel`.
std::vector<float> run_matmul(uint32_t kernel, TensorType type, const Weights& w,
                              const std::vector<float>& x, int64_t rows, int64_t in_dim,
                              int64_t tokens) {
  shader::Device& d = device();
  auto gw = upload(d, std::as_bytes(std::span(w.bytes)));
  auto gx = upload_floats(d, x);
  auto gy = zeros(d, rows * tokens * 4);
  shader::Recorder rec(d);
  const shader::MatmulShape shape{in_dim, rows, tokens};
  const Status enc =
      shader::encode_matmul(rec, kernel, type, shader::BufferRange{gw.get(), 0, w.bytes.size()},
                            whole(gx), whole(gy), shape);
  EXPECT_TRUE(enc.is_ok()) << enc.message();
  if (!enc.is_ok()) return {};
  const Status s = rec.submit_and_wait();
  EXPECT_TRUE(s.is_ok()) << s.message();
  return download_floats(d, *gy, rows * tokens);
}

void check_matmul(TensorType type, int64_t rows, int64_t in_dim, int64_t tokens) {
  const Weights w = encode_weights(type, rows, in_dim, 11);
  const auto x = random_floats(in_dim * tokens, 12, 1.0f / std::sqrt(float(in_dim)));
  const auto want = reference(w, x, rows, in_dim, tokens);
  const std::vector<uint32_t> kernels = variants_of(type);
  ASSERT_FALSE(kernels.empty()) << quant::type_name(type);
  for (uint32_t k : kernels) {
    EXPECT_LT(max_abs_diff(run_matmul(k, type, w, x, rows, in_dim, tokens), want), 1e-3)
        << shader::embedded_kernels()[k].label() << " rows " << rows << " in " << in_dim
        << " tokens " << tokens;
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
  for (const Shape& s : {Shape{67, narrow}, Shape{33, 3584}, Shape{13, 4864}, Shape{5, 18944}}) {
    for (int64_t tokens : {1, 5}) check_matmul(GetParam(), s.rows, s.in_dim, tokens);
  }
}

TEST_P(VulkanMatmul, OneToNineTokens) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (int64_t tokens = 1; tokens <= 9; ++tokens) {
    check_matmul(GetParam(), 37, is_k_quant(GetParam()) ? 1024 : 896, tokens);
  }
}

TEST_P(VulkanMatmul, NineTokensAndFewRows) {
  MINFER_SKIP_WITHOUT_VULKAN();
  check_matmul(GetParam(), 3, is_k_quant(GetParam()) ? 2048 : 896, 9);
}

// Token t's row alone, in a batch of 7 (at its own place) and in a batch of
// 9 (moved to the last place, the second token group): the same bits.
TEST_P(VulkanMatmul, ATokensRowIsTheSameInEveryBatch) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const TensorType type = GetParam();
  const int64_t rows = 29;
  for (int64_t in_dim : {is_k_quant(type) ? int64_t{1024} : int64_t{896}, int64_t{4864}}) {
    const Weights w = encode_weights(type, rows, in_dim, 21);
    const auto x7 = random_floats(in_dim * 7, 22, 1.0f / std::sqrt(float(in_dim)));
    const auto filler = random_floats(in_dim * 9, 23, 1.0f / std::sqrt(float(in_dim)));
    for (uint32_t k : variants_of(type)) {
      const std::string label = shader::embedded_kernels()[k].label();
      const auto y7 = run_matmul(k, type, w, x7, rows, in_dim, 7);
      ASSERT_EQ(y7.size(), size_t(rows * 7)) << label;
      for (int64_t t = 0; t < 7; ++t) {
        const std::vector<float> xt(x7.begin() + t * in_dim, x7.begin() + (t + 1) * in_dim);
        const auto alone = run_matmul(k, type, w, xt, rows, in_dim, 1);
        std::vector<float> x9(filler.begin(), filler.end());
        std::copy(xt.begin(), xt.end(), x9.begin() + 8 * in_dim);
        const auto y9 = run_matmul(k, type, w, x9, rows, in_dim, 9);
        ASSERT_EQ(alone.size(), size_t(rows)) << label;
        ASSERT_EQ(y9.size(), size_t(rows * 9)) << label;
        EXPECT_EQ(std::memcmp(alone.data(), y7.data() + t * rows, rows * 4), 0)
            << label << " in " << in_dim << ": token " << t << " alone vs in 7";
        EXPECT_EQ(std::memcmp(alone.data(), y9.data() + 8 * rows, rows * 4), 0)
            << label << " in " << in_dim << ": token " << t << " alone vs last of 9";
      }
    }
  }
}

// Every way the lanes of a row meet: several rows per subgroup (lanes below
// the subgroup size), one subgroup per row, several subgroups per row; each
// set of lanes computing 1..4 rows (19 rows: a partial last set); with the
// batch invariance kept in each.
TEST_P(VulkanMatmul, EveryLaneCountPerRow) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const TensorType type = GetParam();
  const int64_t rows = 19, in_dim = is_k_quant(type) ? 1024 : 896, tokens = 3;
  const Weights w = encode_weights(type, rows, in_dim, 31);
  const auto x = random_floats(in_dim * tokens, 32, 1.0f / std::sqrt(float(in_dim)));
  const auto want = reference(w, x, rows, in_dim, tokens);
  const uint32_t sg = device().info().limits.subgroup_size;
  struct How {
    uint32_t lanes, rows;
  };
  for (const How how : {How{1, 1}, How{2, 3}, How{sg / 2, 1}, How{sg, 1}, How{sg, 4},
                        How{2 * sg, 2}, How{2 * sg, 3}, How{256, 1}, How{256, 4}}) {
    if (how.lanes == 0) continue;
    const Forced forced({.lanes = how.lanes, .lane_rows = how.rows});
    for (uint32_t k : variants_of(type)) {
      const std::string label = shader::embedded_kernels()[k].label() + " lanes " +
                                std::to_string(how.lanes) + " rows " + std::to_string(how.rows);
      const auto y = run_matmul(k, type, w, x, rows, in_dim, tokens);
      EXPECT_LT(max_abs_diff(y, want), 1e-3) << label;
      const std::vector<float> last(x.begin() + 2 * in_dim, x.end());
      const auto alone = run_matmul(k, type, w, last, rows, in_dim, 1);
      ASSERT_EQ(y.size(), size_t(rows * tokens)) << label;
      ASSERT_EQ(alone.size(), size_t(rows)) << label;
      EXPECT_EQ(std::memcmp(alone.data(), y.data() + 2 * rows, rows * 4), 0) << label;
    }
  }
}

// x read element by element (a binding offset that is no multiple of 16
// bytes, forced here) gives the same bits as x read as vec4.
TEST_P(VulkanMatmul, ScalarXLoadsGiveTheSameBits) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const TensorType type = GetParam();
  const int64_t rows = 7, in_dim = is_k_quant(type) ? 1024 : 896, tokens = 2;
  const Weights w = encode_weights(type, rows, in_dim, 41);
  const auto x = random_floats(in_dim * tokens, 42, 1.0f / std::sqrt(float(in_dim)));
  const auto want = reference(w, x, rows, in_dim, tokens);
  for (uint32_t k : variants_of(type)) {
    const std::string label = shader::embedded_kernels()[k].label();
    const auto quads = run_matmul(k, type, w, x, rows, in_dim, tokens);
    std::vector<float> scalars;
    {
      const Forced forced({.scalar_x = true});
      scalars = run_matmul(k, type, w, x, rows, in_dim, tokens);
    }
    EXPECT_LT(max_abs_diff(scalars, want), 1e-3) << label;
    ASSERT_EQ(quads.size(), scalars.size()) << label;
    EXPECT_EQ(std::memcmp(quads.data(), scalars.data(), quads.size() * 4), 0) << label;
  }
}

// GPU time per call at decode shapes (qwen2.5-0.5B, gemma-3-270m), for the
// lanes per row and rows per set the encoder picks (0x0) and forced ones
// (lanes x rows, 0: the encoder's). By hand:
// --gtest_also_run_disabled_tests --gtest_filter='*MatmulTiming*'.
TEST(VulkanMatmulTiming, DISABLED_DecodeShapes) {
  MINFER_SKIP_WITHOUT_VULKAN();
  struct Case {
    TensorType type;
    int64_t rows, in_dim;
  };
  const Case cases[] = {
      {TensorType::Q4_0, 896, 896},    {TensorType::Q4_0, 128, 896},
      {TensorType::Q4_0, 4864, 896},   {TensorType::Q4_0, 896, 4864},
      {TensorType::Q4_0, 151936, 896}, {TensorType::Q8_0, 896, 896},
      {TensorType::Q8_0, 4864, 896},   {TensorType::Q8_0, 896, 4864},
      {TensorType::Q8_0, 151936, 896}, {TensorType::Q5_0, 2048, 640},
      {TensorType::Q5_0, 1024, 640},   {TensorType::Q8_0, 2048, 640},
      {TensorType::Q4_K, 640, 1024},   {TensorType::Q4_K, 640, 2048},
      {TensorType::Q6_K, 640, 2048},   {TensorType::Q4_K, 4864, 1024},
      {TensorType::F16, 896, 896},     {TensorType::F16, 4864, 896},
      {TensorType::F32, 896, 896},     {TensorType::Q4_1, 896, 896},
      {TensorType::Q4_K, 4608, 3584},  {TensorType::Q4_K, 37888, 3584},
      {TensorType::Q4_K, 3584, 18944}, {TensorType::Q6_K, 3584, 18944},
      {TensorType::Q6_K, 512, 3584},
  };
  shader::Device& d = device();
  constexpr int kCalls = 200;
  for (const Case& c : cases) {
    const uint64_t rb = quant::row_bytes(c.type, c.in_dim).value();
    std::vector<uint8_t> bytes(rb * c.rows);
    {
      const auto values = random_floats(c.in_dim * 64, 5);
      for (int64_t r = 0; r < 64; ++r) {
        if (c.type == TensorType::F32) {
          std::memcpy(bytes.data() + r * rb, values.data() + r * c.in_dim, rb);
        } else {
          ASSERT_TRUE(quant::quantize_row(c.type, values.data() + r * c.in_dim,
                                          bytes.data() + r * rb, c.in_dim)
                          .is_ok());
        }
      }
      for (int64_t r = 64; r < c.rows; ++r) {
        std::memcpy(bytes.data() + r * rb, bytes.data() + (r % 64) * rb, rb);
      }
    }
    auto gw = upload(d, std::as_bytes(std::span(bytes)));
    const uint32_t k = shader::matmul_kernel(d, c.type).value();
    for (int64_t tokens : {1, 4, 8}) {
      auto gx = upload_floats(d, random_floats(c.in_dim * tokens, 6, 0.03f));
      auto gy = zeros(d, c.rows * tokens * 4);
      std::string line = std::string(quant::type_name(c.type)) + " " + std::to_string(c.rows) +
                         " x " + std::to_string(c.in_dim) + " t" + std::to_string(tokens) + ":";
      struct How {
        uint32_t lanes, rows;
      };
      for (const How how : {How{0, 0}, How{0, 1}, How{0, 2}, How{0, 4}, How{64, 0}}) {
        const Forced forced({.lanes = how.lanes, .lane_rows = how.rows});
        shader::Recorder rec(d);
        const shader::MatmulShape shape{c.in_dim, c.rows, tokens};
        double best = 1e9;
        for (int rep = 0; rep < 3; ++rep) {
          ASSERT_TRUE(rec.timestamp().is_ok());
          for (int i = 0; i < kCalls; ++i) {
            ASSERT_TRUE(
                shader::encode_matmul(rec, k, c.type, whole(gw), whole(gx), whole(gy), shape)
                    .is_ok());
          }
          ASSERT_TRUE(rec.timestamp().is_ok());
          ASSERT_TRUE(rec.submit_and_wait().is_ok());
          const auto& ts = rec.timestamps_s();
          if (ts.size() == 2) best = std::min(best, (ts[1] - ts[0]) / kCalls);
        }
        char cell[48];
        std::snprintf(cell, sizeof(cell), " %ux%u %.2f", how.lanes, how.rows, best * 1e6);
        line += cell;
      }
      std::printf("%s us\n", line.c_str());
    }
  }
}

// GPU time per dispatch of a tiny kernel (scale over 896 floats): each one
// depending on the last (in place, a barrier between them) and independent
// (each into its own range, no barriers). By hand, as above, with
// --gtest_filter='*DispatchTiming*'.
TEST(VulkanDispatchTiming, DISABLED_Floor) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  constexpr int kCalls = 200;
  constexpr int64_t kN = 896;
  auto gx = upload_floats(d, random_floats(kN, 7));
  auto gy = zeros(d, kN * 4 * kCalls);
  // The third kind: dependent, in a MemoryUse::kHostAccess buffer (a BAR
  // mapping on a discrete GPU): do kernels reach that memory as fast?
  auto gm = d.create_buffer(kN * 4, shader::MemoryUse::kHostAccess).value();
  ASSERT_TRUE(d.write_buffer(*gm, 0, std::vector<std::byte>(kN * 4)).is_ok());
  for (int kind = 0; kind < 3; ++kind) {
    const bool dependent = kind != 1;
    shader::Recorder rec(d);
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      ASSERT_TRUE(rec.timestamp().is_ok());
      for (int i = 0; i < kCalls; ++i) {
        const shader::BufferRange out{kind == 2 ? gm.get() : gy.get(),
                                      dependent ? 0 : uint64_t(i) * kN * 4, kN * 4};
        const shader::BufferRange in = dependent ? out : whole(gx);
        ASSERT_TRUE(
            shader::encode_unary(rec, shader::UnaryOp::kScale, in, out, kN, 1.0f, "").is_ok());
      }
      ASSERT_TRUE(rec.timestamp().is_ok());
      ASSERT_TRUE(rec.submit_and_wait().is_ok());
      const auto& ts = rec.timestamps_s();
      if (ts.size() == 2) best = std::min(best, (ts[1] - ts[0]) / kCalls);
    }
    const char* what[] = {"dependent", "independent", "dependent, host-access memory"};
    std::printf("scale %lld floats, %s: %.2f us per dispatch (%llu barriers)\n", (long long)kN,
                what[kind], best * 1e6, (unsigned long long)rec.barriers());
  }
  // Host round trips: a submit and wait of one dispatch, small writes and
  // reads, and a read of the 0.5B's logits (151936 floats).
  const auto host_us = [](auto&& f) {
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 50; ++i) f();
      best = std::min(
          best,
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
              50);
    }
    return best;
  };
  shader::Recorder rec(d);
  std::vector<std::byte> small(16), logits(151936 * 4);
  auto big = zeros(d, logits.size());
  std::printf(
      "host: submit+wait of one dispatch %.1f us, write 16 B %.1f us, read 16 B %.1f us, "
      "read 608 KB %.1f us\n",
      host_us([&] {
        EXPECT_TRUE(
            shader::encode_unary(rec, shader::UnaryOp::kScale, whole(gx), whole(gx), kN, 1.0f, "")
                .is_ok());
        EXPECT_TRUE(rec.submit_and_wait().is_ok());
      }),
      host_us([&] { EXPECT_TRUE(d.write_buffer(*gx, 0, small).is_ok()); }),
      host_us([&] { EXPECT_TRUE(d.read_buffer(*gx, 0, small).is_ok()); }),
      host_us([&] { EXPECT_TRUE(d.read_buffer(*big, 0, logits).is_ok()); }));
  // The same copies of a kHostAccess buffer, reads by size (read_buffer
  // reads mapped memory up to 512 bytes and stages larger reads).
  std::vector<std::byte> host(64 << 10);
  auto mapped = d.create_buffer(host.size(), shader::MemoryUse::kHostAccess).value();
  const auto read_us = [&](size_t n) {
    return host_us(
        [&] { EXPECT_TRUE(d.read_buffer(*mapped, 0, std::span(host).first(n)).is_ok()); });
  };
  std::printf(
      "host-access buffer (%s): write 16 B %.1f us, 64 KB %.1f us; read 16 B %.1f us, "
      "1 KB %.1f us, 4 KB %.1f us, 16 KB %.1f us, 64 KB %.1f us\n",
      mapped->mapped() ? "mapped" : "not mapped",
      host_us([&] { EXPECT_TRUE(d.write_buffer(*mapped, 0, small).is_ok()); }),
      host_us([&] { EXPECT_TRUE(d.write_buffer(*mapped, 0, host).is_ok()); }), read_us(16),
      read_us(1 << 10), read_us(4 << 10), read_us(16 << 10), read_us(64 << 10));
  // Waits that poll their fence (the shared device) and that block at once:
  // one dispatch, and a chain of 600 dependent ones (about a 0.5B decode
  // step, 1.5 ms), each as wall time past its GPU time.
  TestDevice blocking = open_test_device({.quiet = true, .fence_spin_s = 0});
  ASSERT_TRUE(blocking.status.is_ok()) << blocking.status.message();
  for (shader::Device* dev : {&d, blocking.device.get()}) {
    auto x = upload_floats(*dev, random_floats(kN, 7));
    double past[2] = {1e9, 1e9};
    for (int rep = 0; rep < 20; ++rep) {
      shader::Recorder chain(*dev);
      const int calls = rep % 2 == 0 ? 1 : 600;
      ASSERT_TRUE(chain.timestamp().is_ok());
      for (int i = 0; i < calls; ++i) {
        ASSERT_TRUE(
            shader::encode_unary(chain, shader::UnaryOp::kScale, whole(x), whole(x), kN, 1.0f, "")
                .is_ok());
      }
      ASSERT_TRUE(chain.timestamp().is_ok());
      const auto t0 = std::chrono::steady_clock::now();
      ASSERT_TRUE(chain.submit_and_wait().is_ok());
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const auto& ts = chain.timestamps_s();
      if (ts.size() == 2) past[rep % 2] = std::min(past[rep % 2], wall - (ts[1] - ts[0]));
    }
    std::printf(
        "wait (%s): submit+wait past the GPU time: one dispatch %.1f us, 600 dependent "
        "%.1f us\n",
        dev == &d ? "polling" : "blocking", past[0] * 1e6, past[1] * 1e6);
  }
}

INSTANTIATE_TEST_SUITE_P(VulkanTypes, VulkanMatmul, ::testing::ValuesIn(kWeightTypes),
                         [](const auto& info) {
                           return std::string(quant::type_name(info.param));
                         });

// A matmul with a bias and a residual: random weights of `type` (seed),
// activations, bias row and residual, on the host and uploaded.
struct EpilogueCase {
  EpilogueCase(shader::Device& d, TensorType type, int64_t rows, int64_t in_dim, int64_t tokens,
               uint32_t seed)
      : w(encode_weights(type, rows, in_dim, seed)),
        x(random_floats(in_dim * tokens, seed + 1, 0.05f)),
        bias(random_floats(rows, seed + 2)),
        res(random_floats(rows * tokens, seed + 3)),
        gw(upload(d, std::as_bytes(std::span(w.bytes)))),
        gx(upload_floats(d, x)),
        gb(upload_floats(d, bias)),
        gr(upload_floats(d, res)) {}
  Weights w;
  std::vector<float> x, bias, res;
  std::unique_ptr<shader::Buffer> gw, gx, gb, gr;
};

// The epilogue (bias row, then residual) gives the bits of the plain matmul
// followed by the two element-wise adds, in place or into a separate y.
TEST(VulkanMatmulTypes, BiasAndResidualEqualSeparateAdds) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  const int64_t rows = 67, in_dim = 896, tokens = 5;
  const EpilogueCase c(d, TensorType::Q4_0, rows, in_dim, tokens, 21);
  const auto& [w, x, bias, res, gw, gx, gb, gr] = c;
  auto plain = zeros(d, rows * tokens * 4);
  auto fused = zeros(d, rows * tokens * 4);
  auto in_place = upload_floats(d, res);  // y is the residual itself
  const auto kernel = shader::matmul_kernel(d, TensorType::Q4_0);
  ASSERT_TRUE(kernel.is_ok()) << kernel.message();
  const shader::MatmulShape shape{in_dim, rows, tokens};
  const shader::BufferRange wr{gw.get(), 0, w.bytes.size()};
  shader::Recorder rec(d);
  const int64_t n = rows * tokens;
  ASSERT_TRUE(
      shader::encode_matmul(rec, *kernel, TensorType::Q4_0, wr, whole(gx), whole(plain), shape)
          .is_ok());
  ASSERT_TRUE(shader::encode_elementwise(rec, shader::ElementwiseOp::kAdd, whole(plain), whole(gb),
                                         whole(plain), n, rows)
                  .is_ok());
  ASSERT_TRUE(shader::encode_elementwise(rec, shader::ElementwiseOp::kAdd, whole(plain), whole(gr),
                                         whole(plain), n, n)
                  .is_ok());
  ASSERT_TRUE(shader::encode_matmul(rec, *kernel, TensorType::Q4_0, wr, whole(gx), whole(fused),
                                    shape, "fused", {whole(gb), whole(gr), std::nullopt})
                  .is_ok());
  ASSERT_TRUE(shader::encode_matmul(rec, *kernel, TensorType::Q4_0, wr, whole(gx), whole(in_place),
                                    shape, "in place", {whole(gb), whole(in_place), std::nullopt})
                  .is_ok());
  ASSERT_TRUE(rec.submit_and_wait().is_ok());
  const auto want = download_floats(d, *plain, n);
  EXPECT_EQ(download_floats(d, *fused, n), want);
  EXPECT_EQ(download_floats(d, *in_place, n), want);
  // And against the host: matmul + bias + residual.
  auto ref = reference(w, x, rows, in_dim, tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) ref[t * rows + r] += double(bias[r]) + res[t * rows + r];
  }
  EXPECT_LT(max_abs_diff(want, ref), 1e-3);
  // A short bias is refused.
  EXPECT_FALSE(shader::encode_matmul(rec, *kernel, TensorType::Q4_0, wr, whole(gx), whole(fused),
                                     shape, "",
                                     {shader::BufferRange{gb.get(), 0, 8}, {}, std::nullopt})
                   .is_ok());
}

// A weight bound in two ranges of rows (as ShaderBackend binds one past
// maxStorageBufferRange): each dispatch writes its columns of a wider y
// (y_stride = all the rows), bias and residual read at the same columns. The
// two give the bits of the one whole product; a lone range leaves the other
// columns as they were.
TEST(VulkanMatmulTypes, RangesOfRowsWriteTheirColumnsOfAWiderOutput) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  const int64_t rows = 100, r0 = 64, in_dim = 896, tokens = 5;  // r0 * 4 bytes: 256
  const EpilogueCase c(d, TensorType::Q8_0, rows, in_dim, tokens, 31);
  const auto& [w, x, bias, res, gw, gx, gb, gr] = c;
  const uint64_t rb = quant::row_bytes(TensorType::Q8_0, in_dim).value();
  auto whole_y = zeros(d, rows * tokens * 4);
  auto halves = zeros(d, rows * tokens * 4);
  const std::vector<float> sentinel(rows * tokens, -7.0f);
  auto lone = upload_floats(d, sentinel);
  const auto kernel = shader::matmul_kernel(d, TensorType::Q8_0);
  ASSERT_TRUE(kernel.is_ok()) << kernel.message();
  const auto cols = [&](const std::unique_ptr<shader::Buffer>& b, int64_t from) {
    return shader::BufferRange{b.get(), uint64_t(from) * 4, uint64_t(rows * tokens - from) * 4};
  };
  shader::Recorder rec(d);
  const shader::BufferRange wr{gw.get(), 0, w.bytes.size()};
  ASSERT_TRUE(shader::encode_matmul(rec, *kernel, TensorType::Q8_0, wr, whole(gx), whole(whole_y),
                                    shader::MatmulShape{in_dim, rows, tokens}, "whole",
                                    {whole(gb), whole(gr), std::nullopt})
                  .is_ok());
  for (const auto& [y, from, n] :
       {std::tuple{&halves, int64_t{0}, r0}, std::tuple{&halves, r0, rows - r0},
        std::tuple{&lone, r0, rows - r0}}) {
    const shader::BufferRange range{gw.get(), from * rb, n * rb};
    const shader::MatmulEpilogue e{
        shader::BufferRange{gb.get(), uint64_t(from) * 4, uint64_t(n) * 4}, cols(gr, from),
        std::nullopt};
    const Status st =
        shader::encode_matmul(rec, *kernel, TensorType::Q8_0, range, whole(gx), cols(*y, from),
                              shader::MatmulShape{in_dim, n, tokens, rows}, "part", e);
    ASSERT_TRUE(st.is_ok()) << st.message();
  }
  ASSERT_TRUE(rec.submit_and_wait().is_ok());
  const auto want = download_floats(d, *whole_y, rows * tokens);
  EXPECT_EQ(download_floats(d, *halves, rows * tokens), want);
  const auto got = download_floats(d, *lone, rows * tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      const size_t i = t * rows + r;
      ASSERT_EQ(got[i], r < r0 ? -7.0f : want[i]) << "token " << t << " row " << r;
    }
  }
  // A stride below out_dim is refused.
  EXPECT_FALSE(shader::encode_matmul(rec, *kernel, TensorType::Q8_0, wr, whole(gx), whole(halves),
                                     shader::MatmulShape{in_dim, rows, tokens, rows - 1})
                   .is_ok());
}

TEST(VulkanMatmulTypes, TheFeatureProbePicksAnAvailableVariantPerType) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (TensorType t : kWeightTypes) {
    auto k = shader::matmul_kernel(device(), t);
    ASSERT_TRUE(k.is_ok()) << k.message();
    EXPECT_TRUE(device().kernel(*k).available);
    const bool storage = device().info().features.storage_buffer_8bit &&
                         device().info().features.storage_buffer_16bit;
    if (t != TensorType::F32) {
      EXPECT_EQ(shader::embedded_kernels()[*k].variant.ends_with("_packed"), !storage)
          << shader::embedded_kernels()[*k].label();
    }
  }
  for (TensorType t : {TensorType::Q8_K, TensorType::IQ4_NL, TensorType::I32}) {
    EXPECT_EQ(shader::matmul_kernel(device(), t).status().code(), StatusCode::kUnimplemented)
        << quant::type_name(t);
  }
}

TEST(VulkanMatmulTypes, EveryWeightTypeOfTheReferenceHasAKernel) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const quant::TypeTraits* t = quant::find_type_traits(raw);
    if (t == nullptr || !quant::is_weight_type(t->type)) continue;
    EXPECT_TRUE(shader::matmul_kernel(device(), t->type).is_ok()) << t->name;
  }
}

TEST(VulkanMatmulTypes, PartialBlocksAndShortBuffersAreRefused) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  auto buf = zeros(d, 4096);
  shader::Recorder rec(d);
  const uint32_t q4 = shader::matmul_kernel(d, TensorType::Q4_0).value();
  Status s = shader::encode_matmul(rec, q4, TensorType::Q4_0, whole(buf), whole(buf), whole(buf),
                                   {40, 2, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  s = shader::encode_matmul(rec, q4, TensorType::Q4_0, whole(buf), whole(buf), whole(buf),
                            {896, 300, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("W needs"), std::string::npos) << s.message();
  s = shader::encode_matmul(rec, q4, TensorType::F16, whole(buf), whole(buf), whole(buf),
                            {32, 1, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  // K-quant rows are whole 256-element super-blocks: 896 is not.
  const uint32_t q4k = shader::matmul_kernel(d, TensorType::Q4_K).value();
  s = shader::encode_matmul(rec, q4k, TensorType::Q4_K, whole(buf), whole(buf), whole(buf),
                            {896, 1, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  s = shader::encode_matmul(rec, q4k, TensorType::Q6_K, whole(buf), whole(buf), whole(buf),
                            {256, 1, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_EQ(rec.pending(), 0u);
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
