#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cpu/ops.h"
#include "quant/half.h"

namespace minfer::cpu {
namespace {

using testing::random_floats;

struct Cache {
  std::vector<float> k, v;  // the values the kernel sees (f16-rounded for f16)
  std::vector<uint16_t> k16, v16;
  const void* k_ptr(KvType t) const {
    return t == KvType::kF16 ? (const void*)k16.data() : k.data();
  }
  const void* v_ptr(KvType t) const {
    return t == KvType::kF16 ? (const void*)v16.data() : v.data();
  }
};

Cache make_cache(int64_t n, uint32_t seed, KvType type) {
  Cache c{random_floats(n, seed), random_floats(n, seed + 1), {}, {}};
  if (type == KvType::kF16) {
    for (auto* pair : {&c.k, &c.v}) {
      auto& dst = pair == &c.k ? c.k16 : c.v16;
      for (float& f : *pair) {
        dst.push_back(quant::f32_to_f16(f));
        f = quant::f16_to_f32(dst.back());
      }
    }
  }
  return c;
}

// Plain double-precision causal softmax attention.
std::vector<double> reference(const std::vector<float>& q, const Cache& c,
                              const std::vector<int32_t>& pos, const AttentionShape& s) {
  const int64_t d = s.head_dim, group = s.n_head / s.n_head_kv;
  std::vector<double> out(q.size(), 0.0);
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    for (int64_t h = 0; h < s.n_head; ++h) {
      const int64_t kvh = h / group;
      std::vector<std::pair<int64_t, double>> scores;
      for (int64_t j = 0; j < s.n_kv; ++j) {
        if (j > pos[t] || (s.sliding_window > 0 && pos[t] - j >= s.sliding_window)) continue;
        double dot = 0.0;
        for (int64_t i = 0; i < d; ++i) {
          dot += double(q[(t * s.n_head + h) * d + i]) * c.k[(j * s.n_head_kv + kvh) * d + i];
        }
        scores.emplace_back(j, dot * s.scale);
      }
      double mx = -INFINITY, sum = 0.0;
      for (auto& [j, sc] : scores) mx = std::max(mx, sc);
      for (auto& [j, sc] : scores) sum += std::exp(sc - mx);
      for (auto& [j, sc] : scores) {
        const double p = std::exp(sc - mx) / sum;
        for (int64_t i = 0; i < d; ++i) {
          out[(t * s.n_head + h) * d + i] += p * c.v[(j * s.n_head_kv + kvh) * d + i];
        }
      }
    }
  }
  return out;
}

void run_case(KvType type, int64_t n_head, int64_t n_head_kv, int64_t head_dim, int64_t n_past,
              int64_t n_tokens, int64_t window, int threads) {
  SCOPED_TRACE(std::string(type == KvType::kF16 ? "f16" : "f32") + " heads " +
               std::to_string(n_head) + "/" + std::to_string(n_head_kv) + " hd " +
               std::to_string(head_dim) + " past " + std::to_string(n_past) + " tokens " +
               std::to_string(n_tokens) + " window " + std::to_string(window));
  AttentionShape s;
  s.n_tokens = n_tokens;
  s.n_kv = n_past + n_tokens;
  s.n_head = n_head;
  s.n_head_kv = n_head_kv;
  s.head_dim = head_dim;
  s.scale = 1.0f / std::sqrt(float(head_dim));
  s.sliding_window = window;
  const auto q = random_floats(n_tokens * n_head * head_dim, 21, 2.0f);
  const Cache c = make_cache(s.n_kv * n_head_kv * head_dim, 31, type);
  std::vector<int32_t> pos(n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) pos[t] = static_cast<int32_t>(n_past + t);
  ThreadPool pool(threads);
  std::vector<float> out(q.size(), NAN);
  ASSERT_TRUE(
      attention(q.data(), c.k_ptr(type), c.v_ptr(type), type, pos.data(), s, out.data(), pool)
          .is_ok());
  const auto ref = reference(q, c, pos, s);
  // The reference reads the same (f16-rounded) cache values; the query stays
  // f32 and the V sum is accumulated in f32 for both cache types.
  const double tol = 5e-6;
  double worst = 0.0;
  for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]));
  EXPECT_LE(worst, tol);
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
  Cache c = make_cache(s.n_kv * row, 7, KvType::kF16);  // every row f16-rounded
  const auto exact_k = random_floats(n_tokens * row, 9);
  const auto exact_v = random_floats(n_tokens * row, 10);
  Cache expected = c;  // the reference sees exact values for the batch rows
  std::copy(exact_k.begin(), exact_k.end(), expected.k.begin() + n_past * row);
  std::copy(exact_v.begin(), exact_v.end(), expected.v.begin() + n_past * row);
  s.batch_k = exact_k.data();
  s.batch_v = exact_v.data();
  s.batch_first = n_past;
  std::vector<int32_t> pos(n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) pos[t] = static_cast<int32_t>(n_past + t);
  ThreadPool pool(2);
  std::vector<float> out(q.size(), NAN);
  ASSERT_TRUE(attention(q.data(), c.k_ptr(KvType::kF16), c.v_ptr(KvType::kF16), KvType::kF16,
                        pos.data(), s, out.data(), pool)
                  .is_ok());
  const auto ref = reference(q, expected, pos, s);
  double worst = 0.0;
  for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]));
  EXPECT_LE(worst, 5e-6);
  // And it differs from reading the rounded cache rows (the option matters).
  s.batch_k = s.batch_v = nullptr;
  std::vector<float> cached(q.size(), NAN);
  ASSERT_TRUE(attention(q.data(), c.k_ptr(KvType::kF16), c.v_ptr(KvType::kF16), KvType::kF16,
                        pos.data(), s, cached.data(), pool)
                  .is_ok());
  EXPECT_NE(cached, out);
}

TEST(cpu_Attention, MatchesDoubleReferenceAcrossShapes) {
  for (KvType type : {KvType::kF32, KvType::kF16}) {
    for (int64_t hd : {64, 128, 256}) {
      run_case(type, 4, 4, hd, 0, 5, 0, 1);    // plain multi-head, prefill from empty
      run_case(type, 14, 2, hd, 37, 3, 0, 2);  // GQA ratio 7
      run_case(type, 16, 2, hd, 50, 1, 0, 2);  // GQA ratio 8, decode step
    }
  }
}

TEST(cpu_Attention, SlidingWindowMasksOldKeys) {
  for (KvType type : {KvType::kF32, KvType::kF16}) {
    run_case(type, 8, 1, 64, 40, 6, 16, 2);
    run_case(type, 4, 1, 256, 3, 10, 4, 1);  // window smaller than the prompt
    run_case(type, 4, 2, 128, 0, 3, 1, 1);   // window 1: each query sees only itself
  }
}

TEST(cpu_Attention, WindowOneReturnsOwnValue) {
  AttentionShape s{2, 2, 1, 1, 64, 0.125f, 1};
  const auto q = random_floats(2 * 64, 1);
  const Cache c = make_cache(2 * 64, 2, KvType::kF32);
  const int32_t pos[2] = {0, 1};
  ThreadPool pool(1);
  std::vector<float> out(q.size());
  ASSERT_TRUE(
      attention(q.data(), c.k.data(), c.v.data(), KvType::kF32, pos, s, out.data(), pool).is_ok());
  for (int i = 0; i < 128; ++i) EXPECT_EQ(out[i], c.v[i]);
}

TEST(cpu_Attention, QueryWithoutVisibleKeysGetsZeros) {
  AttentionShape s{1, 4, 2, 1, 64, 0.125f, 0};
  const auto q = random_floats(2 * 64, 1);
  const Cache c = make_cache(4 * 64, 2, KvType::kF32);
  const int32_t pos = -1;
  ThreadPool pool(1);
  std::vector<float> out(q.size(), NAN);
  ASSERT_TRUE(
      attention(q.data(), c.k.data(), c.v.data(), KvType::kF32, &pos, s, out.data(), pool).is_ok());
  for (float f : out) EXPECT_EQ(f, 0.0f);
}

TEST(cpu_Attention, ThreadCountDoesNotChangeResults) {
  AttentionShape s{7, 30, 8, 1, 128, 0.09f, 0};
  const auto q = random_floats(7 * 8 * 128, 3);
  const Cache c = make_cache(30 * 128, 4, KvType::kF16);
  std::vector<int32_t> pos = {23, 24, 25, 26, 27, 28, 29};
  std::vector<float> a(q.size()), b(q.size());
  ThreadPool one(1), two(2);
  ASSERT_TRUE(
      attention(q.data(), c.k16.data(), c.v16.data(), KvType::kF16, pos.data(), s, a.data(), one)
          .is_ok());
  ASSERT_TRUE(
      attention(q.data(), c.k16.data(), c.v16.data(), KvType::kF16, pos.data(), s, b.data(), two)
          .is_ok());
  EXPECT_EQ(a, b);
}

TEST(cpu_Attention, RejectsBadShapes) {
  ThreadPool pool(1);
  float buf[64] = {};
  const int32_t pos = 0;
  AttentionShape s{1, 1, 6, 4, 64, 1.0f, 0};
  const Status st = attention(buf, buf, buf, KvType::kF32, &pos, s, buf, pool);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("n_head_kv 4"), std::string::npos) << st.message();
  s = AttentionShape{1, 1, 4, 4, 0, 1.0f, 0};
  EXPECT_FALSE(attention(buf, buf, buf, KvType::kF32, &pos, s, buf, pool).is_ok());
}

}  // namespace
}  // namespace minfer::cpu
