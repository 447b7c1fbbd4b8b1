// rope_store (the decode FusedQKV's tail) against what it replaces, bit for
// bit: RoPE over the q and k heads of a packed [q | k | v] row, then the KV
// store of its k and v heads, for F32, F16 and Q8_0 caches, NeoX and normal
// pairs, partial rotation, frequency factors, GQA and several tokens; and a
// position outside the cache, which stores nothing and is reported.
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/gpu/encode_attention.h"
#include "backend/gpu/kernel_args.h"
#include "backend/gpu/recorder.h"
#include "backend/vulkan_testutil.h"
#include "quant/tensor_type.h"

namespace minfer::vulkan::testing {
namespace {

using cpu::testing::random_floats;
using quant::TensorType;

struct Case {
  int64_t n_head, n_head_kv, head_dim, n_rot;
  bool neox, factors;
  TensorType k_type, v_type;
};

uint64_t region_bytes(TensorType t, int64_t row_len, int64_t n_ctx) {
  const uint64_t row = t == TensorType::F32   ? row_len * 4
                       : t == TensorType::F16 ? row_len * 2
                                              : row_len / 32 * 34;
  return row * n_ctx;
}

std::vector<uint8_t> download_bytes(gpu::Device& d, const gpu::Buffer& b, size_t n) {
  std::vector<uint8_t> out(n);
  EXPECT_TRUE(d.read_buffer(b, 0, std::as_writable_bytes(std::span(out))).is_ok());
  return out;
}

std::unique_ptr<gpu::Buffer> upload_ints(gpu::Device& d, const std::vector<int32_t>& v) {
  return upload(d, std::as_bytes(std::span(v)));
}

class VulkanRopeStore : public ::testing::TestWithParam<Case> {};

TEST_P(VulkanRopeStore, EqualsRopeThenKvStore) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const Case c = GetParam();
  gpu::Device& d = device();
  const int64_t n_tokens = 3, n_ctx = 16, hd = c.head_dim;
  const int64_t q_dim = c.n_head * hd, kv_dim = c.n_head_kv * hd, stride = q_dim + 2 * kv_dim;
  const std::vector<int32_t> positions = {5, 0, 11};
  const auto packed = random_floats(stride * n_tokens, 61, 2.0f);
  const auto factors = random_floats(c.n_rot / 2, 62, 0.5f);
  std::vector<float> ff(factors.size());
  for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0f + std::abs(factors[i]);
  // The separate kernels' inputs: q+k heads and v heads of each token apart.
  std::vector<float> qk, v;
  for (int64_t t = 0; t < n_tokens; ++t) {
    qk.insert(qk.end(), packed.begin() + t * stride, packed.begin() + t * stride + q_dim + kv_dim);
    v.insert(v.end(), packed.begin() + t * stride + q_dim + kv_dim,
             packed.begin() + (t + 1) * stride);
  }
  const uint64_t kb = region_bytes(c.k_type, kv_dim, n_ctx);
  const uint64_t vb = region_bytes(c.v_type, kv_dim, n_ctx);
  auto g_packed = upload_floats(d, packed), g_qk = upload_floats(d, qk);
  auto g_v = upload_floats(d, v), g_pos = upload_ints(d, positions);
  auto g_ff = upload_floats(d, ff), g_k = zeros(d, kv_dim * n_tokens * 4);
  auto k_want = zeros(d, kb), v_want = zeros(d, vb), k_got = zeros(d, kb), v_got = zeros(d, vb);
  auto err = zeros(d, MINFER_ERR_WORDS * 4);
  const gpu::BufferRange f = c.factors ? whole(g_ff) : gpu::BufferRange{};
  gpu::RopeShape rope{n_tokens, c.n_head + c.n_head_kv, hd, c.n_rot, c.neox, 10000.0f, 1.0f};
  gpu::Recorder rec(d);
  ASSERT_TRUE(gpu::encode_rope(rec, whole(g_qk), whole(g_pos), f, whole(g_qk), rope).is_ok());
  // k heads out of the rotated rows, then the store.
  ASSERT_TRUE(rec.submit_and_wait().is_ok());
  const auto rotated = download_floats(d, *g_qk, qk.size());
  std::vector<float> k;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = rotated.data() + t * (q_dim + kv_dim);
    k.insert(k.end(), row + q_dim, row + q_dim + kv_dim);
  }
  g_k = upload_floats(d, k);
  const gpu::KvStoreShape kv{n_tokens, c.n_head_kv, hd, n_ctx, c.k_type, c.v_type};
  ASSERT_TRUE(gpu::encode_kv_store(rec, whole(g_k), whole(g_v), whole(g_pos), whole(k_want),
                                   whole(v_want), whole(err), kv)
                  .is_ok());
  gpu::RopeStoreShape shape;
  shape.rope = rope;
  shape.rope.n_heads = c.n_head;
  shape.n_head_kv = c.n_head_kv;
  shape.row_stride = stride;
  shape.n_ctx = n_ctx;
  shape.k_type = c.k_type;
  shape.v_type = c.v_type;
  const Status s = gpu::encode_rope_store(rec, whole(g_packed), whole(g_pos), f, whole(k_got),
                                          whole(v_got), whole(err), shape);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_TRUE(rec.submit_and_wait().is_ok());
  EXPECT_EQ(download_bytes(d, *k_got, kb), download_bytes(d, *k_want, kb));
  EXPECT_EQ(download_bytes(d, *v_got, vb), download_bytes(d, *v_want, vb));
  // The packed rows: q and k heads rotated as rope did, v as it was.
  const auto got = download_floats(d, *g_packed, packed.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* g = got.data() + t * stride;
    EXPECT_EQ(0, std::memcmp(g, rotated.data() + t * (q_dim + kv_dim), (q_dim + kv_dim) * 4))
        << "token " << t;
    EXPECT_EQ(0, std::memcmp(g + q_dim + kv_dim, v.data() + t * kv_dim, kv_dim * 4))
        << "token " << t;
  }
  std::vector<uint32_t> words(MINFER_ERR_WORDS);
  ASSERT_TRUE(d.read_buffer(*err, 0, std::as_writable_bytes(std::span(words))).is_ok());
  EXPECT_EQ(words[0], 0u);
}

INSTANTIATE_TEST_SUITE_P(
    VulkanShapes, VulkanRopeStore,
    ::testing::Values(Case{14, 2, 64, 64, true, false, TensorType::F16, TensorType::F16},
                      Case{4, 1, 128, 64, false, true, TensorType::F32, TensorType::Q8_0},
                      Case{8, 8, 32, 32, true, true, TensorType::Q8_0, TensorType::F32},
                      Case{4, 2, 256, 256, true, false, TensorType::Q8_0, TensorType::F16}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

TEST(VulkanRopeStoreChecks, APositionOutsideTheCacheIsReportedAndStoresNothing) {
  MINFER_SKIP_WITHOUT_VULKAN();
  gpu::Device& d = device();
  const int64_t hd = 32, n_ctx = 4, stride = 4 * hd;  // 2 q heads, 1 k, 1 v
  auto g_packed = upload_floats(d, random_floats(stride, 71));
  auto g_pos = upload_ints(d, {4});
  auto kc = zeros(d, n_ctx * hd * 4), vc = zeros(d, n_ctx * hd * 4);
  auto err = zeros(d, MINFER_ERR_WORDS * 4);
  gpu::RopeStoreShape shape;
  shape.rope = {1, 2, hd, hd, true, 10000.0f, 1.0f};
  shape.n_head_kv = 1;
  shape.row_stride = stride;
  shape.n_ctx = n_ctx;
  gpu::Recorder rec(d);
  ASSERT_TRUE(gpu::encode_rope_store(rec, whole(g_packed), whole(g_pos), {}, whole(kc), whole(vc),
                                     whole(err), shape)
                  .is_ok());
  ASSERT_TRUE(rec.submit_and_wait().is_ok());
  std::vector<uint32_t> words(MINFER_ERR_WORDS);
  ASSERT_TRUE(d.read_buffer(*err, 0, std::as_writable_bytes(std::span(words))).is_ok());
  EXPECT_EQ(words[0], MINFER_ERR_CACHE_ROW);
  EXPECT_EQ(words[1], 4u);
  EXPECT_EQ(words[2], 4u);
  EXPECT_EQ(download_floats(d, *kc, n_ctx * hd), std::vector<float>(n_ctx * hd, 0.0f));
  // A row stride shorter than the heads is refused.
  shape.row_stride = stride - 1;
  const Status s = gpu::encode_rope_store(rec, whole(g_packed), whole(g_pos), {}, whole(kc),
                                          whole(vc), whole(err), shape);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
