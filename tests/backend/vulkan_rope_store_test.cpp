// rope_store (the decode FusedQKV's tail) against what it replaces, bit for
// bit: RoPE over the q and k heads of a packed [q | k | v] row, then the KV
// store of its k and v heads, for F32, F16 and Q8_0 caches, NeoX and normal
// pairs, partial rotation, frequency factors, YaRN, GQA and several tokens;
// and a position outside the cache, which stores nothing and is reported.
// YaRN (rope_pair.glsl, shared by rope and rope_store) against the CPU's
// cpu::rope with gpt-oss's constants (graph::apply_yarn: corr dims 8 and
// 18, mscale 1 + 0.1 ln 32) at positions 0 to 100000, both pair modes and
// with frequency factors; ext_factor 0 ignores the other YaRN fields.
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cpu/ops.h"
#include "backend/shader/encode_attention.h"
#include "backend/shader/kernel_args.h"
#include "backend/shader/recorder.h"
#include "backend/vulkan_testutil.h"
#include "graph/yarn.h"
#include "quant/tensor_type.h"

namespace minfer::vulkan::testing {
namespace {

using cpu::testing::random_floats;
using quant::TensorType;

struct Case {
  int64_t n_head, n_head_kv, head_dim, n_rot;
  bool neox, factors;
  TensorType k_type, v_type;
  bool yarn = false;
};

// gpt-oss's YaRN (docs/GPT_OSS.md, "YaRN RoPE") for n_rot rotated dims.
graph::RopeMeta gpt_oss_yarn(int64_t n_rot) {
  graph::RopeMeta m;
  graph::apply_yarn({n_rot, 4096, 150000.0f, 1.0f / 32.0f, 32.0f, 1.0f, 1.0f, 1.0f}, m);
  return m;
}

void set_yarn(const graph::RopeMeta& m, shader::RopeShape& shape) {
  shape.ext_factor = m.ext_factor;
  shape.corr_low = m.corr_low;
  shape.corr_high = m.corr_high;
  shape.mscale = m.mscale;
}

uint64_t region_bytes(TensorType t, int64_t row_len, int64_t n_ctx) {
  const uint64_t row = t == TensorType::F32   ? row_len * 4
                       : t == TensorType::F16 ? row_len * 2
                                              : row_len / 32 * 34;
  return row * n_ctx;
}

std::vector<uint8_t> download_bytes(shader::Device& d, const shader::Buffer& b, size_t n) {
  std::vector<uint8_t> out(n);
  EXPECT_TRUE(d.read_buffer(b, 0, std::as_writable_bytes(std::span(out))).is_ok());
  return out;
}

std::unique_ptr<shader::Buffer> upload_ints(shader::Device& d, const std::vector<int32_t>& v) {
  return upload(d, std::as_bytes(std::span(v)));
}

class VulkanRopeStore : public ::testing::TestWithParam<Case> {};

TEST_P(VulkanRopeStore, EqualsRopeThenKvStore) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const Case c = GetParam();
  shader::Device& d = device();
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
  const shader::BufferRange f = c.factors ? whole(g_ff) : shader::BufferRange{};
  shader::RopeShape rope{n_tokens, c.n_head + c.n_head_kv, hd, c.n_rot, c.neox, 10000.0f, 1.0f};
  if (c.yarn) {
    rope.freq_base = 150000.0f;
    rope.freq_scale = 1.0f / 32.0f;
    set_yarn(gpt_oss_yarn(c.n_rot), rope);
  }
  shader::Recorder rec(d);
  ASSERT_TRUE(shader::encode_rope(rec, whole(g_qk), whole(g_pos), f, whole(g_qk), rope).is_ok());
  // k heads out of the rotated rows, then the store.
  ASSERT_TRUE(rec.submit_and_wait().is_ok());
  const auto rotated = download_floats(d, *g_qk, qk.size());
  std::vector<float> k;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = rotated.data() + t * (q_dim + kv_dim);
    k.insert(k.end(), row + q_dim, row + q_dim + kv_dim);
  }
  g_k = upload_floats(d, k);
  const shader::KvStoreShape kv{n_tokens, c.n_head_kv, hd, n_ctx, c.k_type, c.v_type};
  ASSERT_TRUE(shader::encode_kv_store(rec, whole(g_k), whole(g_v), whole(g_pos), whole(k_want),
                                      whole(v_want), whole(err), kv)
                  .is_ok());
  shader::RopeStoreShape shape;
  shape.rope = rope;
  shape.rope.n_heads = c.n_head;
  shape.n_head_kv = c.n_head_kv;
  shape.row_stride = stride;
  shape.n_ctx = n_ctx;
  shape.k_type = c.k_type;
  shape.v_type = c.v_type;
  const Status s = shader::encode_rope_store(rec, whole(g_packed), whole(g_pos), f, whole(k_got),
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
                      Case{4, 2, 256, 256, true, false, TensorType::Q8_0, TensorType::F16},
                      // gpt-oss's heads (YaRN, NeoX) and YaRN with normal pairs.
                      Case{8, 2, 64, 64, true, false, TensorType::F32, TensorType::F32, true},
                      Case{4, 1, 128, 64, false, true, TensorType::F16, TensorType::Q8_0, true}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

// rope over x with `shape` (in place), read back.
std::vector<float> run_rope(const std::vector<float>& x, const std::vector<int32_t>& positions,
                            const std::vector<float>* factors, const shader::RopeShape& shape) {
  shader::Device& d = device();
  auto gx = upload_floats(d, x), gp = upload_ints(d, positions);
  auto gf = factors != nullptr ? upload_floats(d, *factors) : nullptr;
  shader::Recorder rec(d);
  const Status s = shader::encode_rope(rec, whole(gx), whole(gp),
                                       gf ? whole(gf) : shader::BufferRange{}, whole(gx), shape);
  EXPECT_TRUE(s.is_ok()) << s.message();
  EXPECT_TRUE(rec.submit_and_wait().is_ok());
  return download_floats(d, *gx, x.size());
}

TEST(VulkanRopeYarn, GptOssConstantsMatchTheCpu) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const graph::RopeMeta yarn = gpt_oss_yarn(64);
  ASSERT_EQ(yarn.corr_low, 8.0f);
  ASSERT_EQ(yarn.corr_high, 18.0f);
  const std::vector<int32_t> positions = {0, 1, 4095, 4096, 100000};
  const int64_t n_tokens = int64_t(positions.size()), n_heads = 3;
  std::vector<float> ff(40);
  for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0f + 0.25f * float(i % 3);
  struct Mode {
    int64_t head_dim, n_rot;
    bool neox, factors;
  };
  for (const Mode& m : {Mode{64, 64, true, false}, Mode{64, 64, false, false},
                        Mode{96, 80, true, true}, Mode{80, 64, false, true}}) {
    const graph::RopeMeta meta = gpt_oss_yarn(m.n_rot);
    const auto x = random_floats(n_tokens * n_heads * m.head_dim, 81);
    std::vector<float> want(x.size());
    const cpu::RopeYarn cpu_yarn{meta.ext_factor, meta.corr_low, meta.corr_high, meta.mscale};
    ASSERT_TRUE(cpu::rope(x.data(), n_tokens, n_heads, m.head_dim, m.n_rot, positions.data(),
                          150000.0f, 1.0f / 32.0f, m.factors ? ff.data() : nullptr,
                          m.neox ? cpu::RopeMode::kNeox : cpu::RopeMode::kNormal, want.data(),
                          cpu_yarn)
                    .is_ok());
    shader::RopeShape shape{n_tokens, n_heads,   m.head_dim,  m.n_rot,
                            m.neox,   150000.0f, 1.0f / 32.0f};
    set_yarn(meta, shape);
    const auto got = run_rope(x, positions, m.factors ? &ff : nullptr, shape);
    // The angle is the CPU's f32 value bit for bit; what differs is the
    // device's sin/cos after reduce_angle (angles up to 1e5 at position
    // 100000), times mscale ~1.35.
    EXPECT_LT(max_abs_diff(got, std::vector<double>(want.begin(), want.end())), 1e-5)
        << "head_dim " << m.head_dim << " n_rot " << m.n_rot << " neox " << m.neox;
  }
}

// ext_factor 0 is plain RoPE: the other YaRN fields are not read.
TEST(VulkanRopeYarn, ExtFactorZeroIgnoresTheOtherFields) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const std::vector<int32_t> positions = {0, 3, 300, 4095};
  const auto x = random_floats(4 * 2 * 128, 82);
  shader::RopeShape plain{4, 2, 128, 128, true, 10000.0f, 0.5f};
  shader::RopeShape odd = plain;
  odd.corr_low = 3.0f;
  odd.corr_high = 9.0f;
  odd.mscale = 2.0f;
  const auto a = run_rope(x, positions, nullptr, plain);
  const auto b = run_rope(x, positions, nullptr, odd);
  ASSERT_EQ(a.size(), x.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  // And a YaRN field that is not finite is refused.
  odd.ext_factor = 1.0f;
  odd.mscale = std::numeric_limits<float>::infinity();
  shader::Device& d = device();
  auto gx = upload_floats(d, x), gp = upload_ints(d, positions);
  shader::Recorder rec(d);
  EXPECT_EQ(shader::encode_rope(rec, whole(gx), whole(gp), {}, whole(gx), odd).code(),
            StatusCode::kInvalidArgument);
}

TEST(VulkanRopeStoreChecks, APositionOutsideTheCacheIsReportedAndStoresNothing) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  const int64_t hd = 32, n_ctx = 4, stride = 4 * hd;  // 2 q heads, 1 k, 1 v
  auto g_packed = upload_floats(d, random_floats(stride, 71));
  auto g_pos = upload_ints(d, {4});
  auto kc = zeros(d, n_ctx * hd * 4), vc = zeros(d, n_ctx * hd * 4);
  auto err = zeros(d, MINFER_ERR_WORDS * 4);
  shader::RopeStoreShape shape;
  shape.rope = {1, 2, hd, hd, true, 10000.0f, 1.0f};
  shape.n_head_kv = 1;
  shape.row_stride = stride;
  shape.n_ctx = n_ctx;
  shader::Recorder rec(d);
  ASSERT_TRUE(shader::encode_rope_store(rec, whole(g_packed), whole(g_pos), {}, whole(kc),
                                        whole(vc), whole(err), shape)
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
  const Status s = shader::encode_rope_store(rec, whole(g_packed), whole(g_pos), {}, whole(kc),
                                             whole(vc), whole(err), shape);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
