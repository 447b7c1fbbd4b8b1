#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/attention_testutil.h"
#include "backend/backend_testutil.h"
#include "backend/cpu/ops.h"
#include "backend/reference_ops.h"
#include "quant/half.h"

namespace minfer::cpu {
namespace {

using testing::attention_ref;
using testing::kv_type_name;
using testing::KvRegion;
using testing::make_kv_region;
using testing::random_floats;

struct Cache {
  KvRegion k, v;
};

Cache make_cache(int64_t n, uint32_t seed, KvType k_type, KvType v_type) {
  return {make_kv_region(random_floats(n, seed), k_type),
          make_kv_region(random_floats(n, seed + 1), v_type)};
}

Status run(const std::vector<float>& q, const Cache& c, const int32_t* pos, const AttentionShape& s,
           std::vector<float>& out, ThreadPool& pool) {
  return attention(q.data(), c.k.bytes.data(), c.k.type, c.v.bytes.data(), c.v.type, pos, s,
                   out.data(), pool);
}

double worst_diff(const std::vector<float>& out, const std::vector<double>& ref) {
  double worst = 0.0;
  for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]));
  return worst;
}

bool per_row_path(KvType k, KvType v, bool per_row) {
  return per_row || k != v || k == KvType::kQ8_0;
}

struct Case {
  KvType k, v;
  int64_t n_head, n_head_kv, head_dim, n_past, n_tokens, window;
  int threads = 1;
  bool per_row = false;
};

AttentionShape shape_of(const Case& c) {
  AttentionShape s;
  s.n_tokens = c.n_tokens;
  s.n_kv = c.n_past + c.n_tokens;
  s.n_head = c.n_head;
  s.n_head_kv = c.n_head_kv;
  s.head_dim = c.head_dim;
  s.scale = 1.0f / std::sqrt(float(c.head_dim));
  s.sliding_window = c.window;
  s.per_row = c.per_row;
  return s;
}

// Against the double reference over the values the cache rows hold, with the
// query as the kernel sees it: converted to K's dot type on the per-row path
// (f16-rounded for f16 K, Q8_0 blocks for q8_0 K, whose integer dot is then
// exact). What is left is f32 rounding (tolerance 5e-6), except for an f16 V
// on the per-row path, whose running sum is kept in f16 (1.5e-2; measured
// worst 5.4e-3 on outputs of magnitude ~0.3).
void run_case(const Case& c) {
  SCOPED_TRACE(std::string("K ") + kv_type_name(c.k) + " V " + kv_type_name(c.v) + " heads " +
               std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) + " hd " +
               std::to_string(c.head_dim) + " past " + std::to_string(c.n_past) + " tokens " +
               std::to_string(c.n_tokens) + " window " + std::to_string(c.window) +
               (c.per_row ? " per-row" : ""));
  const AttentionShape s = shape_of(c);
  const auto q = random_floats(c.n_tokens * c.n_head * c.head_dim, 21, 2.0f);
  const Cache cache = make_cache(s.n_kv * c.n_head_kv * c.head_dim, 31, c.k, c.v);
  std::vector<int32_t> pos(c.n_tokens);
  for (int64_t t = 0; t < c.n_tokens; ++t) pos[t] = static_cast<int32_t>(c.n_past + t);
  ThreadPool pool(c.threads);
  std::vector<float> out(q.size(), NAN);
  ASSERT_TRUE(run(q, cache, pos.data(), s, out, pool).is_ok());
  const bool rows = per_row_path(c.k, c.v, c.per_row);
  std::vector<float> q_seen = q;
  if (rows && c.k != KvType::kF32) q_seen = make_kv_region(q, c.k).seen;
  const auto ref = attention_ref(q_seen, cache.k.seen, cache.v.seen, pos, s);
  const double tol = rows && c.v == KvType::kF16 ? 1.5e-2 : 5e-6;
  EXPECT_LE(worst_diff(out, ref), tol);
}

const std::vector<std::pair<KvType, KvType>> kTypePairs = {
    {KvType::kF32, KvType::kF32},  {KvType::kF16, KvType::kF16},  {KvType::kQ8_0, KvType::kQ8_0},
    {KvType::kQ8_0, KvType::kF16}, {KvType::kF16, KvType::kQ8_0}, {KvType::kF32, KvType::kQ8_0},
    {KvType::kQ8_0, KvType::kF32},
};

TEST(cpu_Attention, MatchesDoubleReferenceAcrossShapes) {
  for (auto [k, v] : kTypePairs) {
    for (int64_t hd : {64, 128, 256}) {
      run_case({k, v, 4, 4, hd, 0, 5, 0, 1});    // plain multi-head, prefill from empty
      run_case({k, v, 14, 2, hd, 37, 3, 0, 2});  // GQA ratio 7
      run_case({k, v, 16, 2, hd, 50, 1, 0, 2});  // GQA ratio 8, decode step
    }
  }
}

TEST(cpu_Attention, PerRowPathForUnquantizedCaches) {
  for (KvType t : {KvType::kF32, KvType::kF16}) {
    run_case({t, t, 8, 2, 64, 30, 1, 0, 1, true});
    run_case({t, t, 14, 2, 128, 11, 4, 0, 2, true});
    run_case({t, t, 4, 1, 256, 3, 10, 4, 1, true});
  }
}

TEST(cpu_Attention, SlidingWindowMasksOldKeys) {
  for (auto [k, v] : kTypePairs) {
    run_case({k, v, 8, 1, 64, 40, 6, 16, 2});
    run_case({k, v, 4, 1, 256, 3, 10, 4, 1});  // window smaller than the prompt
    run_case({k, v, 4, 2, 128, 0, 3, 1, 1});   // window 1: each query sees only itself
  }
}

// A q8_0 cache against an f32 cache of the same (unquantized) K and V, for
// decoding and a 64-query prompt, with GQA and a sliding window: the output
// moves by the quantization of K, V and the query only. Measured worst
// |diff| 4.9e-2 (the first prompt rows, which see few keys; values ~N(0,1),
// query ~N(0,4)); 0.1 leaves headroom and fails for a misread row or block
// (an O(1) difference).
TEST(cpu_Attention, Q8_0CacheCloseToF32Cache) {
  for (auto [n_past, n_tokens, window] :
       {std::tuple{60, 1, 0}, std::tuple{0, 64, 0}, std::tuple{100, 3, 32}}) {
    SCOPED_TRACE("past " + std::to_string(n_past) + " tokens " + std::to_string(n_tokens) +
                 " window " + std::to_string(window));
    const Case c{KvType::kQ8_0, KvType::kQ8_0, 14, 2, 64, n_past, n_tokens, window, 2};
    const AttentionShape s = shape_of(c);
    const auto q = random_floats(n_tokens * c.n_head * c.head_dim, 3, 2.0f);
    const Cache q8 = make_cache(s.n_kv * c.n_head_kv * c.head_dim, 8, KvType::kQ8_0, KvType::kQ8_0);
    const Cache f32{make_kv_region(q8.k.exact, KvType::kF32),
                    make_kv_region(q8.v.exact, KvType::kF32)};
    std::vector<int32_t> pos(n_tokens);
    for (int t = 0; t < n_tokens; ++t) pos[t] = n_past + t;
    ThreadPool pool(2);
    std::vector<float> a(q.size(), NAN), b(q.size(), NAN);
    ASSERT_TRUE(run(q, q8, pos.data(), s, a, pool).is_ok());
    ASSERT_TRUE(run(q, f32, pos.data(), s, b, pool).is_ok());
    float worst = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    EXPECT_LE(worst, 0.1f);
    EXPECT_GT(worst, 0.0f);  // the cache really was quantized
  }
}

// The batch's own keys and values (AttentionShape::batch_k/v) are read at f32
// for the batch's positions, while earlier positions come from the f16 cache:
// the result equals the reference over a cache whose batch rows are exact.
TEST(cpu_Attention, BatchRowsAtFullPrecision) {
  const int64_t n_head = 8, n_head_kv = 2, hd = 64, n_past = 20, n_tokens = 6;
  const int64_t row = n_head_kv * hd;
  AttentionShape s;
  s.n_tokens = n_tokens;
  s.n_kv = n_past + n_tokens;
  s.n_head = n_head;
  s.n_head_kv = n_head_kv;
  s.head_dim = hd;
  s.scale = 0.125f;
  const auto q = random_floats(n_tokens * n_head * hd, 5, 2.0f);
  const Cache c = make_cache(s.n_kv * row, 7, KvType::kF16, KvType::kF16);  // rows f16-rounded
  const auto exact_k = random_floats(n_tokens * row, 9);
  const auto exact_v = random_floats(n_tokens * row, 10);
  std::vector<float> k = c.k.seen, v = c.v.seen;  // the reference sees exact batch rows
  std::copy(exact_k.begin(), exact_k.end(), k.begin() + n_past * row);
  std::copy(exact_v.begin(), exact_v.end(), v.begin() + n_past * row);
  s.batch_k = exact_k.data();
  s.batch_v = exact_v.data();
  s.batch_first = n_past;
  std::vector<int32_t> pos(n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) pos[t] = static_cast<int32_t>(n_past + t);
  ThreadPool pool(2);
  std::vector<float> out(q.size(), NAN);
  ASSERT_TRUE(run(q, c, pos.data(), s, out, pool).is_ok());
  EXPECT_LE(worst_diff(out, attention_ref(q, k, v, pos, s)), 5e-6);
  // And it differs from reading the rounded cache rows (the option matters).
  s.batch_k = s.batch_v = nullptr;
  std::vector<float> cached(q.size(), NAN);
  ASSERT_TRUE(run(q, c, pos.data(), s, cached, pool).is_ok());
  EXPECT_NE(cached, out);
  // A q8_0 cache ignores the batch rows: llama.cpp reads every key from a
  // quantized cache, whatever the batch size.
  const Cache c8 = make_cache(s.n_kv * row, 7, KvType::kQ8_0, KvType::kQ8_0);
  std::vector<float> with(q.size(), NAN), without(q.size(), NAN);
  ASSERT_TRUE(run(q, c8, pos.data(), s, without, pool).is_ok());
  s.batch_k = exact_k.data();
  s.batch_v = exact_v.data();
  ASSERT_TRUE(run(q, c8, pos.data(), s, with, pool).is_ok());
  EXPECT_EQ(with, without);
}

TEST(cpu_Attention, WindowOneReturnsOwnValue) {
  AttentionShape s{2, 2, 1, 1, 64, 0.125f, 1};
  const auto q = random_floats(2 * 64, 1);
  for (KvType t : {KvType::kF32, KvType::kQ8_0}) {
    const Cache c = make_cache(2 * 64, 2, t, t);
    const int32_t pos[2] = {0, 1};
    ThreadPool pool(1);
    std::vector<float> out(q.size());
    ASSERT_TRUE(run(q, c, pos, s, out, pool).is_ok());
    for (int i = 0; i < 128; ++i) EXPECT_EQ(out[i], c.v.seen[i]) << kv_type_name(t);
  }
}

TEST(cpu_Attention, QueryWithoutVisibleKeysGetsZeros) {
  AttentionShape s{1, 4, 2, 1, 64, 0.125f, 0};
  const auto q = random_floats(2 * 64, 1);
  for (KvType t : {KvType::kF32, KvType::kQ8_0}) {
    const Cache c = make_cache(4 * 64, 2, t, t);
    const int32_t pos = -1;
    ThreadPool pool(1);
    std::vector<float> out(q.size(), NAN);
    ASSERT_TRUE(run(q, c, &pos, s, out, pool).is_ok());
    for (float f : out) EXPECT_EQ(f, 0.0f);
  }
}

TEST(cpu_Attention, ThreadCountDoesNotChangeResults) {
  AttentionShape s{7, 30, 8, 1, 128, 0.09f, 0};
  const auto q = random_floats(7 * 8 * 128, 3);
  std::vector<int32_t> pos = {23, 24, 25, 26, 27, 28, 29};
  for (auto [k, v] : kTypePairs) {
    const Cache c = make_cache(30 * 128, 4, k, v);
    std::vector<float> a(q.size()), b(q.size());
    ThreadPool one(1), two(2);
    ASSERT_TRUE(run(q, c, pos.data(), s, a, one).is_ok());
    ASSERT_TRUE(run(q, c, pos.data(), s, b, two).is_ok());
    EXPECT_EQ(a, b) << kv_type_name(k) << "/" << kv_type_name(v);
  }
}

TEST(cpu_Attention, RejectsBadShapes) {
  ThreadPool pool(1);
  float buf[64] = {};
  const int32_t pos = 0;
  AttentionShape s{1, 1, 6, 4, 64, 1.0f, 0};
  const Status st = attention(buf, buf, KvType::kF32, buf, KvType::kF32, &pos, s, buf, pool);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("n_head_kv 4"), std::string::npos) << st.message();
  s = AttentionShape{1, 1, 4, 4, 0, 1.0f, 0};
  EXPECT_FALSE(attention(buf, buf, KvType::kF32, buf, KvType::kF32, &pos, s, buf, pool).is_ok());
  // q8_0 blocks must not straddle heads.
  s = AttentionShape{1, 1, 1, 1, 48, 1.0f, 0};
  for (auto [k, v] : {std::pair{KvType::kQ8_0, KvType::kF16}, {KvType::kF32, KvType::kQ8_0}}) {
    const Status q8 = attention(buf, buf, k, buf, v, &pos, s, buf, pool);
    ASSERT_FALSE(q8.is_ok());
    EXPECT_NE(q8.message().find("head_dim a multiple of 32"), std::string::npos) << q8.message();
  }
}

TEST(cpu_Attention, KvBytes) {
  EXPECT_EQ(kv_bytes(KvType::kF32, 128), 512u);
  EXPECT_EQ(kv_bytes(KvType::kF16, 128), 256u);
  EXPECT_EQ(kv_bytes(KvType::kQ8_0, 128), 4u * 34u);
}

}  // namespace
}  // namespace minfer::cpu
