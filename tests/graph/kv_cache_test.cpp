// The f16 KV cache through the real graph path (build_plan + execute on the
// CPU backend), compared with an f32 cache holding the same rounded values.
#include <gtest/gtest.h>

#include <span>
#include <vector>

#include "graph_testutil.h"
#include "quant/half.h"

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
    Forward f32 = Forward::make(m, {&c32}, 0, 256, DType::kF32);
    Forward f16 = Forward::make(m, {&c16}, 0, 256, DType::kF16);
    Forward raw = Forward::make(m, {&craw}, 0, 256, DType::kF32);
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

}  // namespace
}  // namespace minfer::graph
