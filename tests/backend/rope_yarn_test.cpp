// YaRN in the CPU rope cache (detail::rope_cache_f32 with RopeYarn, rope()
// and the kRope node) against the formulas of docs/GPT_OSS.md "YaRN RoPE"
// evaluated in double, with gpt-oss's values: n_rot 64, base 150000,
// freq_scale 1/32, n_ctx_orig 4096, beta_fast 32, beta_slow 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/norm_rope.h"
#include "backend/cpu/ops.h"
#include "graph/ir.h"
#include "graph/yarn.h"
#include "model/weights.h"

namespace minfer::cpu {
namespace {

using testing::random_floats;

constexpr int64_t kRot = 64;
constexpr float kBase = 150000.0f;
constexpr float kScale = 1.0f / 32.0f;
constexpr int32_t kPositions[] = {0, 1, 4095, 4096, 100000};

graph::YarnConfig gpt_oss_config() {
  graph::YarnConfig c;
  c.n_rot = kRot;
  c.n_ctx_orig = 4096;
  c.freq_base = kBase;
  c.freq_scale = kScale;
  c.beta_fast = 32.0f;
  c.beta_slow = 1.0f;
  c.ext_factor = 1.0f;
  return c;
}

RopeYarn gpt_oss_yarn() {
  graph::RopeMeta meta;
  graph::apply_yarn(gpt_oss_config(), meta);
  return {meta.ext_factor, meta.corr_low, meta.corr_high, meta.mscale};
}

// corr_dim(beta) = n_dims ln(n_ctx_orig / (beta 2 pi)) / (2 ln base), in double.
double corr_dim(double beta) {
  return double(kRot) * std::log(4096.0 / (beta * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(double(kBase)));
}

TEST(cpu_RopeYarn, CorrDimsAndScaleForGptOss) {
  const double low = std::max(0.0, std::floor(corr_dim(32.0)));
  const double high = std::min(double(kRot - 1), std::ceil(corr_dim(1.0)));
  EXPECT_EQ(low, 8.0);
  EXPECT_EQ(high, 18.0);
  const RopeYarn y = gpt_oss_yarn();
  EXPECT_EQ(y.ext_factor, 1.0f);
  EXPECT_EQ(y.corr_low, 8.0f);
  EXPECT_EQ(y.corr_high, 18.0f);
  EXPECT_NEAR(y.mscale, 1.0 + 0.1 * std::log(32.0), 1e-6);  // attn_factor ~1 times 1.3466
}

// The formulas in double: angle and magnitude scale of pair i at `pos`.
struct Pair {
  double theta, extrap, scale;
};

Pair yarn_pair(double pos, int64_t i) {
  const double extrap = pos * std::pow(double(kBase), -2.0 * double(i) / double(kRot));
  const double interp = double(kScale) * extrap;
  const double ramp = 1.0 - std::clamp((double(i) - 8.0) / std::max(0.001, 18.0 - 8.0), 0.0, 1.0);
  const double mix = ramp * 1.0;  // ext_factor 1
  return {interp * (1.0 - mix) + extrap * mix, extrap, 1.0 + 0.1 * std::log(1.0 / double(kScale))};
}

// How far ggml's float cache may be from the double formulas at pair i: the
// theta recurrence (one rounded multiply per pair by a rounded powf) drifts
// by up to ~i * 2^-22 of theta_extrap; the blend rounds three times, only
// strictly between corr_low and corr_high (elsewhere it is exact with
// freq_scale a power of two); then cosf/sinf and the mscale multiply add a
// few ulps. At position 100000 the low pairs' angles are ~1e5 rad, so their
// bound is ~1e-2: the f32 angles themselves are that coarse, in llama.cpp
// too. Small positions are held to ~1e-7.
double pair_tolerance(const Pair& p, int64_t i) {
  const double blend = (i > 8 && i < 18) ? 3.0 * 0x1p-24 : 0.0;
  return p.scale * (double(i) * 0x1p-22 + blend) * p.extrap + 4e-7;
}

TEST(cpu_RopeYarn, CacheMatchesDoubleFormulas) {
  const RopeYarn yarn = gpt_oss_yarn();
  for (int32_t pos : kPositions) {
    std::vector<float> c(kRot / 2), s(kRot / 2);
    detail::rope_cache_f32(float(pos), kRot, kBase, kScale, nullptr, c.data(), s.data(), yarn);
    for (int64_t i = 0; i < kRot / 2; ++i) {
      SCOPED_TRACE("pos " + std::to_string(pos) + " pair " + std::to_string(i));
      const Pair p = yarn_pair(pos, i);
      const double tol = pair_tolerance(p, i);
      EXPECT_NEAR(c[i], std::cos(p.theta) * p.scale, tol);
      EXPECT_NEAR(s[i], std::sin(p.theta) * p.scale, tol);
    }
  }
}

// Pairs below corr_low keep the trained frequency, pairs from corr_high are
// interpolated by freq_scale: at position 1 their angles differ by 32x, far
// beyond the tolerance, so a misplaced ramp cannot pass the test above.
TEST(cpu_RopeYarn, RampSeparatesExtrapolatedFromInterpolatedPairs) {
  std::vector<float> c(kRot / 2), s(kRot / 2);
  const RopeYarn yarn = gpt_oss_yarn();
  detail::rope_cache_f32(1.0f, kRot, kBase, kScale, nullptr, c.data(), s.data(), yarn);
  for (int64_t i : {0, 8, 13, 18, 31}) {
    const Pair p = yarn_pair(1.0, i);
    const double angle = std::asin(double(s[i]) / p.scale);
    const double want = i <= 8 ? p.extrap : i >= 18 ? p.extrap / 32.0 : p.theta;
    EXPECT_NEAR(angle, want, 1e-6 * want + 1e-9) << "pair " << i;
  }
}

// A head rotated by rope() in both modes against the rotation in double by
// the formulas' cos and sin.
void check_rotation(RopeMode mode) {
  const int64_t n_heads = 2, head_dim = kRot, n_tokens = std::size(kPositions);
  const auto x = random_floats(n_tokens * n_heads * head_dim, 7, 2.0f);
  std::vector<float> y(x.size(), NAN);
  ASSERT_TRUE(rope(x.data(), n_tokens, n_heads, head_dim, kRot, kPositions, kBase, kScale, nullptr,
                   mode, y.data(), gpt_oss_yarn())
                  .is_ok());
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      for (int64_t i = 0; i < kRot / 2; ++i) {
        const int64_t base = (t * n_heads + h) * head_dim;
        const int64_t i0 = base + (mode == RopeMode::kNeox ? i : 2 * i);
        const int64_t i1 = base + (mode == RopeMode::kNeox ? i + kRot / 2 : 2 * i + 1);
        const Pair p = yarn_pair(kPositions[t], i);
        const double c = std::cos(p.theta) * p.scale, s = std::sin(p.theta) * p.scale;
        const double x0 = x[i0], x1 = x[i1];
        const double tol = (std::fabs(x0) + std::fabs(x1)) * (pair_tolerance(p, i) + 4e-7);
        EXPECT_NEAR(y[i0], x0 * c - x1 * s, tol) << "pos " << kPositions[t] << " pair " << i;
        EXPECT_NEAR(y[i1], x0 * s + x1 * c, tol) << "pos " << kPositions[t] << " pair " << i;
      }
    }
  }
}

TEST(cpu_RopeYarn, RotationMatchesDoubleFormulasNeox) {
  check_rotation(RopeMode::kNeox);
}

TEST(cpu_RopeYarn, RotationMatchesDoubleFormulasNormal) {
  check_rotation(RopeMode::kNormal);
}

// The cache without YaRN, as ggml computes it in f32 (written out here): theta
// starts at pos, times powf(base, -2/n_rot) per pair, angle freq_scale *
// (theta / freq_factor), cosf/sinf.
void plain_cache(float pos, float base, float scale, const float* ff, std::vector<float>& c,
                 std::vector<float>& s) {
  const float theta_scale = std::pow(base, -2.0f / float(kRot));
  float theta = pos;
  for (int64_t i = 0; i < kRot / 2; ++i) {
    const float t = scale * (theta / (ff != nullptr ? ff[i] : 1.0f));
    c[i] = std::cos(t);
    s[i] = std::sin(t);
    theta *= theta_scale;
  }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ext_factor 0 is plain RoPE bit for bit, whatever the other YaRN fields hold.
TEST(cpu_RopeYarn, ExtFactorZeroIsThePlainCacheBitForBit) {
  std::vector<float> ff(kRot / 2);
  for (int64_t i = 0; i < kRot / 2; ++i) ff[i] = 1.0f + 0.25f * float(i % 5);
  const float* factors = ff.data();
  const RopeYarn off{0.0f, 8.0f, 18.0f, 1.3466f};
  for (int32_t pos : kPositions) {
    for (float scale : {1.0f, 0.25f, kScale}) {
      for (const float* f : {static_cast<const float*>(nullptr), factors}) {
        SCOPED_TRACE("pos " + std::to_string(pos) + " scale " + std::to_string(scale));
        std::vector<float> c0(kRot / 2), s0(kRot / 2), c1(kRot / 2), s1(kRot / 2), cw(kRot / 2),
            sw(kRot / 2);
        plain_cache(float(pos), kBase, scale, f, cw, sw);
        detail::rope_cache_f32(float(pos), kRot, kBase, scale, f, c0.data(), s0.data());
        detail::rope_cache_f32(float(pos), kRot, kBase, scale, f, c1.data(), s1.data(), off);
        EXPECT_TRUE(same_bits(c0, cw) && same_bits(s0, sw));
        EXPECT_TRUE(same_bits(c1, cw) && same_bits(s1, sw));
      }
    }
  }
}

graph::Node rope_node(const RopeYarn& y) {
  graph::RopeMeta m;
  m.n_heads = 2;
  m.head_dim = kRot;
  m.n_rot = kRot;
  m.mode = graph::RopeMode::kNeox;
  m.freq_base = kBase;
  m.freq_scale = kScale;
  m.ext_factor = y.ext_factor;
  m.corr_low = y.corr_low;
  m.corr_high = y.corr_high;
  m.mscale = y.mscale;
  graph::Node n;
  n.op = graph::Op::kRope;
  n.shape.ne = {2 * kRot, int64_t(std::size(kPositions))};
  n.inputs = {0, 1};
  n.meta = m;
  n.name = "blk.0.rope_q";
  return n;
}

backend::BufferId upload(CpuBackend& cpu, const void* data, size_t bytes) {
  Result<backend::BufferId> id = cpu.alloc_buffer(bytes);
  EXPECT_TRUE(id.is_ok());
  EXPECT_TRUE(cpu.write_host(*id, 0, {static_cast<const std::byte*>(data), bytes}).is_ok());
  return *id;
}

// The CPU backend runs a YaRN rope node, passing the node's fields: its result
// is rope()'s with the same RopeYarn.
TEST(cpu_RopeYarn, BackendRunsYarnRope) {
  model::Weights w;
  CpuBackend cpu(w, 1);
  const RopeYarn yarn = gpt_oss_yarn();
  const graph::Node node = rope_node(yarn);
  ASSERT_TRUE(cpu.supports_op(node));
  const int64_t n_tokens = node.shape.ne[1];
  const auto x = random_floats(node.shape.elements(), 3);
  const backend::BufferId in = upload(cpu, x.data(), x.size() * sizeof(float));
  const backend::BufferId pos = upload(cpu, kPositions, sizeof(kPositions));
  Result<backend::BufferId> out = cpu.alloc_buffer(node.bytes());
  ASSERT_TRUE(out.is_ok());
  const std::vector<backend::BufferId> inputs = {in, pos};
  const Status s = cpu.execute_node(node, inputs, *out, nullptr);
  ASSERT_TRUE(s.is_ok()) << s.message();
  std::vector<float> got(x.size()), want(x.size()), plain(x.size());
  ASSERT_TRUE(cpu.read_host(*out, 0, std::as_writable_bytes(std::span(got))).is_ok());
  ASSERT_TRUE(rope(x.data(), n_tokens, 2, kRot, kRot, kPositions, kBase, kScale, nullptr,
                   RopeMode::kNeox, want.data(), yarn)
                  .is_ok());
  ASSERT_TRUE(rope(x.data(), n_tokens, 2, kRot, kRot, kPositions, kBase, kScale, nullptr,
                   RopeMode::kNeox, plain.data())
                  .is_ok());
  EXPECT_TRUE(same_bits(got, want));
  EXPECT_FALSE(same_bits(got, plain));
}

}  // namespace
}  // namespace minfer::cpu
