// The f16 and q8_0 KV caches through the real graph path (build_plan +
// execute on the CPU backend), compared with an f32 cache holding the same
// (rounded) values; KvCache's type checks and the CLI-facing type parser.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "graph_testutil.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/reference.h"

namespace minfer::graph {
namespace {

using testing::Forward;
using testing::tiny_model;

// Rounds the first n_rows rows of an f32 KV cache to f16 precision in place
// (the rows past them were never written).
void round_cache_to_f16(backend::Backend& b, const runtime::KvCache& kv, const model::HParams& hp,
                        int64_t n_rows) {
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const backend::KvPair* p = kv.layer(il);
    for (backend::BufferId id : {p->k, p->v}) {
      std::vector<float> v(static_cast<size_t>(n_rows * hp.kv_dim()));
      ASSERT_TRUE(b.read_host(id, 0, std::as_writable_bytes(std::span(v))).is_ok());
      for (float& x : v) x = quant::f16_to_f32(quant::f32_to_f16(x));
      ASSERT_TRUE(b.write_host(id, 0, std::as_bytes(std::span(v))).is_ok());
    }
  }
}

// The f16 KV cache against an f32 cache whose rows are rounded to f16 after
// every step. A batch of 64 tokens or more reads its own keys at full
// precision and earlier rows widened from f16 (all sums in f32), so it must
// match bit for bit: any difference is a bug in the f16 store or read path,
// not rounding. Smaller batches take llama.cpp's half-precision row path
// (query and V sum in f16 too), checked here for closeness only.
TEST(KvCacheTest, F16CacheEqualsF32CacheOfRoundedValues) {
  for (const std::string& shape : testing::tiny_shapes()) {
    SCOPED_TRACE(shape);
    const model::Model& m = tiny_model(shape);
    cpu::CpuBackend c32(m.weights(), 1), c16(m.weights(), 1), craw(m.weights(), 1);
    Forward f32 = Forward::make(m, {&c32}, 0, 256, quant::TensorType::F32);
    Forward f16 = Forward::make(m, {&c16}, 0, 256, quant::TensorType::F16);
    Forward raw = Forward::make(m, {&craw}, 0, 256, quant::TensorType::F32);
    std::vector<int32_t> first, second;
    for (int i = 0; i < 70; ++i) first.push_back((i * 37 + 1) % 500);
    for (int i = 0; i < 64; ++i) second.push_back((i * 11 + 5) % 500);
    const std::vector<std::vector<int32_t>> batches = {first, second, {17}, {230}};
    for (const auto& batch : batches) {
      const std::vector<float> a = f32.run(m, batch);
      const std::vector<float> b = f16.run(m, batch);
      const std::vector<float> r = raw.run(m, batch);
      if (batch.size() >= 64) {
        // Bit for bit: the f16 path differs from f32 only by the rounding of
        // the stored rows (dot products and sums run in f32 on both paths).
        EXPECT_LE(testing::max_abs_diff(a, b), 1e-6f) << "batch of " << batch.size();
      } else {
        EXPECT_LE(testing::max_abs_diff(a, b), 0.05f * testing::max_abs(a)) << "batch of 1";
      }
      // While the unrounded f32 cache does differ once decode steps read it.
      if (batch.size() == 1) EXPECT_GT(testing::max_abs_diff(r, b), 0.0f);
      round_cache_to_f16(c32, f32.kv, m.hparams(), f32.n_past);
    }
  }
}

std::vector<std::byte> read_region(backend::Backend& b, backend::BufferId id, size_t bytes) {
  std::vector<std::byte> out(bytes);
  EXPECT_TRUE(b.read_host(id, 0, out).is_ok());
  return out;
}

// Store round trip: after each batch, every written q8_0 row holds exactly the
// bytes quant::quantize_row makes of the f32 cache's row (the same K and V
// reach both caches), and dequantizes to within half a quantization step of
// it (plus the rounding of the f16 scale). The attention output then stays close to the f32
// cache's.
TEST(KvCacheTest, Q8_0CacheStoresQuantizedRowsAndAttendsClose) {
  for (const std::string& shape : testing::tiny_shapes()) {
    SCOPED_TRACE(shape);
    const model::Model& m = tiny_model(shape);
    const model::HParams& hp = m.hparams();
    cpu::CpuBackend c32(m.weights(), 1), c8(m.weights(), 1);
    Forward f32 = Forward::make(m, {&c32}, 0, 256, quant::TensorType::F32);
    Forward f8 = Forward::make(m, {&c8}, 0, 256, quant::TensorType::Q8_0);
    ASSERT_EQ(f8.kv.k_type(), quant::TensorType::Q8_0);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 70; ++i) prompt.push_back((i * 37 + 1) % 500);
    const std::vector<std::vector<int32_t>> batches = {prompt, {17}, {230}, {5, 6, 7}};
    for (const auto& batch : batches) {
      const std::vector<float> a = f32.run(m, batch);
      const std::vector<float> b = f8.run(m, batch);
      ASSERT_EQ(a.size(), b.size());
      // Only layer 0's K/V inputs are identical in both runs; later layers see
      // activations that already passed through a q8_0 attention.
      const backend::KvPair* p32 = f32.kv.layer(0);
      const backend::KvPair* p8 = f8.kv.layer(0);
      const int64_t row = hp.kv_dim();
      const size_t row_q = static_cast<size_t>(row / quant::kQK) * sizeof(quant::BlockQ8_0);
      const int64_t n = f32.n_past;
      for (auto [id32, id8] : {std::pair{p32->k, p8->k}, std::pair{p32->v, p8->v}}) {
        std::vector<float> exact(static_cast<size_t>(n * row));
        ASSERT_TRUE(c32.read_host(id32, 0, std::as_writable_bytes(std::span(exact))).is_ok());
        const std::vector<std::byte> stored = read_region(c8, id8, row_q * n);
        std::vector<std::byte> want(row_q * n);
        ASSERT_TRUE(quant::quantize_row(quant::TensorType::Q8_0, exact.data(), want.data(), n * row)
                        .is_ok());
        EXPECT_EQ(stored, want);
        std::vector<float> back(exact.size());
        ASSERT_TRUE(
            quant::dequantize_row(quant::TensorType::Q8_0, stored.data(), back.data(), n * row)
                .is_ok());
        for (int64_t blk = 0; blk < n * row / quant::kQK; ++blk) {
          float amax = 0.0f;
          for (int i = 0; i < quant::kQK; ++i)
            amax = std::max(amax, std::fabs(exact[blk * 32 + i]));
          for (int i = 0; i < quant::kQK; ++i) {
            // Half a step d = amax/127, plus the f16 rounding of d (2^-11
            // relative) times |q| <= 127.
            ASSERT_LE(std::fabs(back[blk * 32 + i] - exact[blk * 32 + i]), amax / 127.0f * 0.57f)
                << "block " << blk;
          }
        }
      }
      // Logits of a q8_0 cache against an f32 one: measured max |diff| 3.5% of
      // the largest logit on these models (random weights); 10% leaves
      // headroom.
      EXPECT_LE(testing::max_abs_diff(a, b), 0.1f * testing::max_abs(a))
          << "batch of " << batch.size();
    }
  }
}

TEST(KvCacheTest, RejectsTypesItCannotHold) {
  const model::Model& m = tiny_model(testing::tiny_shapes().front());
  cpu::CpuBackend cpu(m.weights(), 1);
  runtime::KvCacheShape s{1, 8, 2, 64};
  for (auto t : {quant::TensorType::Q4_0, quant::TensorType::Q8_1, quant::TensorType::I32}) {
    auto kv = runtime::KvCache::create(&cpu, s, quant::TensorType::F16, t);
    ASSERT_FALSE(kv.is_ok());
    EXPECT_NE(kv.message().find("not supported (f32, f16, q8_0)"), std::string::npos)
        << kv.message();
  }
  s.head_dim = 80;  // q8_0 blocks of 32 would straddle heads
  auto kv = runtime::KvCache::create(&cpu, s, quant::TensorType::Q8_0, quant::TensorType::F16);
  ASSERT_FALSE(kv.is_ok());
  EXPECT_NE(kv.message().find("q8_0 needs head_dim a multiple of 32"), std::string::npos)
      << kv.message();
  EXPECT_NE(kv.message().find("head_dim is 80"), std::string::npos) << kv.message();
  // f16/f32 have no such constraint; K and V types may differ.
  auto ok = runtime::KvCache::create(&cpu, s, quant::TensorType::F32, quant::TensorType::F16);
  ASSERT_TRUE(ok.is_ok()) << ok.message();
  EXPECT_EQ(ok->bytes(), size_t{8 * 160 * 4 + 8 * 160 * 2});
  s.head_dim = 64;
  auto q8 = runtime::KvCache::create(&cpu, s, quant::TensorType::Q8_0, quant::TensorType::Q8_0);
  ASSERT_TRUE(q8.is_ok()) << q8.message();
  EXPECT_EQ(q8->bytes(), size_t{2 * 8 * (128 / 32) * 34});
}

TEST(KvCacheTest, ParsesCacheTypeNames) {
  EXPECT_EQ(*runtime::parse_cache_type("f32"), quant::TensorType::F32);
  EXPECT_EQ(*runtime::parse_cache_type("F16"), quant::TensorType::F16);
  EXPECT_EQ(*runtime::parse_cache_type("q8_0"), quant::TensorType::Q8_0);
  for (const char* bad : {"q4_0", "q8", "", "bf16"}) {
    auto t = runtime::parse_cache_type(bad);
    ASSERT_FALSE(t.is_ok()) << bad;
    EXPECT_EQ(t.message(),
              "cache type '" + std::string(bad) + "' is not supported (f32, f16, q8_0)");
  }
}

}  // namespace
}  // namespace minfer::graph
