// Attention sinks on the GPU layer (encode_attention / encode_attention_tiled
// with a sinks binding; docs/GPT_OSS.md, "Attention sinks") against the
// double-precision host attention of vulkan_attention_testutil.h (the sink in
// the max and the denominator, no value row) and against the CPU backend's
// cpu::attention with the same sinks:
//   - both kernels (the decode kernel, the tiled one at every rows-per-
//     invocation setting), f32, f16 and q8_0 caches, full and windowed,
//     decode and prompts, a paged cache of two sequences;
//   - one sink far above every score (that head's output ~0), one far below
//     (that head as without a sink), the rest among the scores;
//   - a query's row alone equals its row in a batch, bit for bit (decode);
//   - a short sinks binding is refused.
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cpu/ops.h"
#include "backend/shader/encode_attention.h"
#include "backend/shader/encode_attention_tiled.h"
#include "backend/vulkan_attention_testutil.h"
#include "backend/vulkan_testutil.h"
#include "base/thread_pool.h"

namespace minfer::vulkan::testing {
namespace {

// Scores stay within about +-8 with these data: 40 is far above every one,
// -40 far below, the others among them (both branches of the fold run).
const std::vector<float> kSinks8 = {40.0f, -40.0f, 0.0f, 1.5f, -1.0f, 3.0f, 0.5f, -2.5f};

// The GPU's f32 softmax against the double reference: measured ~1e-7 on
// lavapipe; q8_0 keys add nothing here (both sides read the dequantized
// cache).
constexpr double kTolerance = 1e-5;

std::vector<float> sinks_for(int64_t n_head) {
  std::vector<float> s(static_cast<size_t>(n_head));
  for (size_t h = 0; h < s.size(); ++h) s[h] = kSinks8[h % kSinks8.size()];
  return s;
}

struct Data {
  std::vector<float> q;
  HostCache k, v;
};

Data make_data(const AttentionCase& c, uint32_t seed) {
  const shader::AttentionShape& s = c.shape;
  const int64_t row_len = s.n_head_kv * s.head_dim;
  return {random_floats(s.n_tokens * s.n_head * s.head_dim, seed),
          make_cache(s.k_type, s.n_ctx, row_len, seed + 1),
          make_cache(s.v_type, s.n_ctx, row_len, seed + 2)};
}

std::string label(const AttentionCase& c, AttentionKernel kernel) {
  const shader::AttentionShape& s = c.shape;
  return std::string(kernel == AttentionKernel::kTiled ? "tiled" : "decode") + " " +
         std::string(quant::type_name(s.k_type)) + "/" + std::string(quant::type_name(s.v_type)) +
         " tokens " + std::to_string(s.n_tokens) + " from " + std::to_string(c.positions[0]) +
         " window " + std::to_string(s.sliding_window) + " page " + std::to_string(s.page_size);
}

// The case with sinks against the host reference; returns the GPU's output.
std::vector<float> expect_sinks_match(const AttentionCase& c, const Data& d,
                                      AttentionKernel kernel) {
  const AttentionRun got = run_attention(c, d.q, d.k, d.v, kernel);
  EXPECT_EQ(got.out.size(), d.q.size()) << label(c, kernel);
  if (got.out.size() != d.q.size()) return {};
  EXPECT_EQ(got.err[0], 0u) << label(c, kernel);
  const std::vector<double> want = reference_attention(c, d.q, d.k, d.v);
  EXPECT_LT(max_abs_diff(got.out, want), kTolerance) << label(c, kernel);
  return got.out;
}

cpu::KvType kv_type(TensorType t) {
  return t == TensorType::F16 ? cpu::KvType::kF16
                              : (t == TensorType::Q8_0 ? cpu::KvType::kQ8_0 : cpu::KvType::kF32);
}

// The CPU backend's attention of the case (cache rows as the GPU reads them).
std::vector<float> cpu_attention(const AttentionCase& c, const Data& d) {
  const shader::AttentionShape& g = c.shape;
  cpu::AttentionShape s;
  s.n_tokens = g.n_tokens;
  s.n_kv = g.page_size > 0 ? g.page_size * g.max_pages : g.n_ctx;
  s.n_head = g.n_head;
  s.n_head_kv = g.n_head_kv;
  s.head_dim = g.head_dim;
  s.scale = g.scale;
  s.sliding_window = g.sliding_window;
  s.sinks = c.sinks.data();
  if (g.page_size > 0) {
    s.seq_slots = c.slots.data();
    s.page_table = c.table.data();
    s.page_size = g.page_size;
    s.max_pages = g.max_pages;
  }
  std::vector<float> out(d.q.size());
  ThreadPool pool(2);
  const Status st =
      cpu::attention(d.q.data(), d.k.bytes.data(), kv_type(g.k_type), d.v.bytes.data(),
                     kv_type(g.v_type), c.positions.data(), s, out.data(), pool);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return out;
}

void expect_near_cpu(const AttentionCase& c, const Data& d, const std::vector<float>& gpu_out,
                     AttentionKernel kernel) {
  const std::vector<float> want = cpu_attention(c, d);
  EXPECT_LT(max_abs_diff(gpu_out, std::vector<double>(want.begin(), want.end())), kTolerance)
      << label(c, kernel) << " against the CPU backend";
}

// `c` with data from `seed` against the reference, and against the CPU's f32
// paths (its q8_0 path quantizes the query: not comparable here).
void expect_matches_reference_and_cpu(const AttentionCase& c, uint32_t seed,
                                      AttentionKernel kernel) {
  const Data d = make_data(c, seed);
  const auto got = expect_sinks_match(c, d, kernel);
  if (c.shape.k_type != TensorType::Q8_0 && !got.empty()) expect_near_cpu(c, d, got, kernel);
}

struct Types {
  TensorType k, v;
};
constexpr Types kTypes[] = {{TensorType::F32, TensorType::F32},
                            {TensorType::F16, TensorType::F16},
                            {TensorType::Q8_0, TensorType::F16}};

TEST(VulkanAttentionSinks, DecodeKernelMatchesTheReferenceAndTheCpu) {
  MINFER_SKIP_WITHOUT_VULKAN();
  uint32_t seed = 700;
  for (const Types& t : kTypes) {
    for (int64_t window : {int64_t{0}, int64_t{5}}) {
      for (int64_t n_tokens : {int64_t{1}, int64_t{9}}) {
        AttentionCase c{shape_of(n_tokens, 8, 2, 64, 320, t.k, t.v),
                        consecutive(300 - int32_t(n_tokens) + 1, int32_t(n_tokens)),
                        {},
                        {},
                        sinks_for(8)};
        c.shape.sliding_window = window;
        expect_matches_reference_and_cpu(c, seed += 10, AttentionKernel::kDecode);
      }
    }
  }
}

TEST(VulkanAttentionSinks, TiledKernelMatchesTheReferenceAndTheCpu) {
  MINFER_SKIP_WITHOUT_VULKAN();
  uint32_t seed = 800;
  for (uint32_t rows : {1u, 2u, 4u}) {
    const ForcedRows forced(rows);
    for (const Types& t : kTypes) {
      for (int64_t window : {int64_t{0}, int64_t{7}}) {
        AttentionCase c = prompt(40, 20, 8, 2, 64, t.k, t.v);
        c.sinks = sinks_for(8);
        c.shape.sliding_window = window;
        expect_matches_reference_and_cpu(c, seed += 10, AttentionKernel::kTiled);
      }
    }
  }
}

TEST(VulkanAttentionSinks, PagedCacheOfTwoSequences) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (AttentionKernel kernel : {AttentionKernel::kDecode, AttentionKernel::kTiled}) {
    for (const Types& t : kTypes) {
      AttentionCase c = paged_case(t.k, t.v, 64);
      c.sinks = sinks_for(c.shape.n_head);
      const Data d = make_data(c, 900);
      expect_sinks_match(c, d, kernel);
    }
  }
}

// Head 0's sink (40) outweighs every key: its rows are ~0. Head 1's (-40)
// adds nothing visible: its rows are those of a run without sinks.
TEST(VulkanAttentionSinks, FarAboveSilencesAHeadFarBelowLeavesIt) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (AttentionKernel kernel : {AttentionKernel::kDecode, AttentionKernel::kTiled}) {
    AttentionCase c = prompt(33, 10, 8, 2, 64, TensorType::F32, TensorType::F32);
    const Data d = make_data(c, 950);
    const AttentionRun plain = run_attention(c, d.q, d.k, d.v, kernel);
    c.sinks = sinks_for(8);
    const AttentionRun sunk = run_attention(c, d.q, d.k, d.v, kernel);
    ASSERT_EQ(plain.out.size(), d.q.size());
    ASSERT_EQ(sunk.out.size(), d.q.size());
    double head0 = 0, head1 = 0;
    for (int64_t t = 0; t < c.shape.n_tokens; ++t) {
      for (int64_t i = 0; i < 64; ++i) {
        const size_t at0 = size_t((t * 8 + 0) * 64 + i), at1 = size_t((t * 8 + 1) * 64 + i);
        head0 = std::max(head0, std::abs(double(sunk.out[at0])));
        head1 = std::max(head1, std::abs(double(sunk.out[at1]) - plain.out[at1]));
      }
    }
    EXPECT_LT(head0, 1e-12) << (kernel == AttentionKernel::kTiled ? "tiled" : "decode");
    EXPECT_LT(head1, 1e-12) << (kernel == AttentionKernel::kTiled ? "tiled" : "decode");
  }
}

TEST(VulkanAttentionSinks, AQuerysOutputDoesNotDependOnItsBatch) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const int64_t width = 8 * 64, n_ctx = 1200;
  const std::vector<int32_t> positions = {5, 1100, 700, 0, 333, 1199, 64};
  AttentionCase batch{shape_of(7, 8, 2, 64, n_ctx, TensorType::F16, TensorType::F16),
                      positions,
                      {},
                      {},
                      sinks_for(8)};
  const Data d = make_data(batch, 960);
  const AttentionRun together = run_attention(batch, d.q, d.k, d.v, AttentionKernel::kDecode);
  ASSERT_EQ(together.out.size(), d.q.size());
  for (int64_t t = 0; t < 7; ++t) {
    const std::vector<float> q_one(d.q.begin() + t * width, d.q.begin() + (t + 1) * width);
    AttentionCase one{shape_of(1, 8, 2, 64, n_ctx, TensorType::F16, TensorType::F16),
                      {positions[size_t(t)]},
                      {},
                      {},
                      sinks_for(8)};
    const AttentionRun alone = run_attention(one, q_one, d.k, d.v, AttentionKernel::kDecode);
    ASSERT_EQ(alone.out.size(), q_one.size());
    EXPECT_EQ(std::memcmp(alone.out.data(), together.out.data() + t * width,
                          size_t(width) * sizeof(float)),
              0)
        << "token " << t << " at position " << positions[size_t(t)];
  }
}

TEST(VulkanAttentionSinks, AShortSinksBindingIsRefused) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  auto q = zeros(d, 1 << 16), out = zeros(d, 1 << 16), cache = zeros(d, 1 << 16);
  auto pos = zeros(d, 256), err = zeros(d, 16), sinks = zeros(d, 64);
  const auto s = shape_of(2, 8, 2, 64, 16, TensorType::F32, TensorType::F32);
  const shader::BufferRange short_sinks{sinks.get(), 0, 7 * 4};
  shader::Recorder rec(d);
  EXPECT_EQ(shader::encode_attention(rec, whole(q), whole(pos), {}, {}, whole(cache), whole(cache),
                                     short_sinks, whole(out), whole(err), s)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(shader::encode_attention_tiled(rec, whole(q), whole(pos), {}, {}, whole(cache),
                                           whole(cache), short_sinks, whole(out), whole(err), s)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(rec.pending(), 0u);
  const shader::BufferRange enough{sinks.get(), 0, 8 * 4};
  EXPECT_TRUE(shader::encode_attention(rec, whole(q), whole(pos), {}, {}, whole(cache),
                                       whole(cache), enough, whole(out), whole(err), s)
                  .is_ok());
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
