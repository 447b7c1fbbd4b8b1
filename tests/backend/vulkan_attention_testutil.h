// Host references and runners for the Vulkan attention tests (the decode
// kernel's vulkan_attention_test.cpp and the tiled kernel's
// vulkan_attention_tiled_test.cpp): cache regions encoded as the CPU stores
// them (f16 by quant::f32_to_f16, q8_0 by its quantizer) with their
// dequantized values, attention cases (shape, positions, paged tables,
// sinks), the double-precision host attention over the dequantized cache,
// and for either kernel a runner, the refusals both share and a timer.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/shader/encode_attention.h"
#include "backend/shader/encode_attention_tiled.h"
#include "backend/shader/kernel_args.h"
#include "backend/shader/recorder.h"
#include "backend/vulkan_testutil.h"
#include "quant/half.h"

namespace minfer::vulkan::testing {

using cpu::testing::decode;
using cpu::testing::encode;
using cpu::testing::random_floats;
using quant::TensorType;

enum class AttentionKernel { kDecode, kTiled };

// Rows per invocation forced for a scope (shader::force_attention_tiled_rows_for_testing).
class ForcedRows {
 public:
  explicit ForcedRows(uint32_t rows) { shader::force_attention_tiled_rows_for_testing(rows); }
  ~ForcedRows() { shader::force_attention_tiled_rows_for_testing(0); }
  ForcedRows(const ForcedRows&) = delete;
  ForcedRows& operator=(const ForcedRows&) = delete;
};

// Encodes `kernel` (shader::encode_attention or encode_attention_tiled, which
// take the same bindings).
inline Status encode_attention_with(
    AttentionKernel kernel, shader::Recorder& rec, const shader::BufferRange& q,
    const shader::BufferRange& positions, const shader::BufferRange& slots,
    const shader::BufferRange& table, const shader::BufferRange& k_cache,
    const shader::BufferRange& v_cache, const shader::BufferRange& sinks,
    const shader::BufferRange& out, const shader::BufferRange& err,
    const shader::AttentionShape& s) {
  return kernel == AttentionKernel::kTiled
             ? shader::encode_attention_tiled(rec, q, positions, slots, table, k_cache, v_cache,
                                              sinks, out, err, s)
             : shader::encode_attention(rec, q, positions, slots, table, k_cache, v_cache, sinks,
                                        out, err, s);
}

template <typename T>
std::unique_ptr<shader::Buffer> upload_vec(shader::Device& d, const std::vector<T>& v) {
  return upload(d, std::as_bytes(std::span(v)));
}

inline std::vector<uint32_t> error_words(shader::Device& d, const shader::Buffer& err) {
  std::vector<uint32_t> out(MINFER_ERR_WORDS);
  EXPECT_TRUE(d.read_buffer(err, 0, std::as_writable_bytes(std::span(out))).is_ok());
  return out;
}

// A cache region on the host: rows encoded as the CPU stores them (f16 by
// quant::f32_to_f16, q8_0 by its quantizer) and their dequantized values.
struct HostCache {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

inline std::vector<uint8_t> cache_row(TensorType type, const float* src, int64_t n) {
  if (type != TensorType::F16) return encode(type, std::vector<float>(src, src + n));
  std::vector<uint8_t> out(size_t(n) * 2);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = quant::f32_to_f16(src[i]);
    std::memcpy(out.data() + i * 2, &h, 2);
  }
  return out;
}

inline HostCache make_cache(TensorType type, int64_t n_ctx, int64_t row_len, uint32_t seed) {
  HostCache c;
  const auto x = random_floats(n_ctx * row_len, seed);
  for (int64_t r = 0; r < n_ctx; ++r) {
    const auto row = cache_row(type, x.data() + r * row_len, row_len);
    const auto back = decode(type, row.data(), row_len);
    c.bytes.insert(c.bytes.end(), row.begin(), row.end());
    c.values.insert(c.values.end(), back.begin(), back.end());
  }
  return c;
}

struct AttentionCase {
  shader::AttentionShape shape;
  std::vector<int32_t> positions, slots, table;  // slots/table: paged only
  std::vector<float> sinks;                      // one logit per q head; empty: none
};

inline shader::AttentionShape shape_of(int64_t n_tokens, int64_t n_head, int64_t n_head_kv,
                                       int64_t hd, int64_t n_ctx, TensorType k_type,
                                       TensorType v_type) {
  shader::AttentionShape s;
  s.n_tokens = n_tokens;
  s.n_head = n_head;
  s.n_head_kv = n_head_kv;
  s.head_dim = hd;
  s.n_ctx = n_ctx;
  s.scale = 1.0f / std::sqrt(float(hd));
  s.k_type = k_type;
  s.v_type = v_type;
  return s;
}

inline std::vector<int32_t> consecutive(int32_t first, int32_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), first);
  return p;
}

// A prompt chunk: n_tokens queries at first, first + 1, ... of one sequence.
inline AttentionCase prompt(int64_t n_tokens, int32_t first, int64_t n_head, int64_t n_head_kv,
                            int64_t hd, TensorType k_type, TensorType v_type) {
  return {shape_of(n_tokens, n_head, n_head_kv, hd, first + n_tokens + 3, k_type, v_type),
          consecutive(first, int32_t(n_tokens)),
          {},
          {},
          {}};
}

inline int64_t host_row(const AttentionCase& c, int64_t t, int64_t j) {
  const shader::AttentionShape& s = c.shape;
  if (s.page_size == 0) return j;
  return int64_t(c.table[size_t(c.slots[t] * s.max_pages + j / s.page_size)]) * s.page_size +
         j % s.page_size;
}

inline std::vector<double> reference_attention(const AttentionCase& c, const std::vector<float>& q,
                                               const HostCache& k, const HostCache& v) {
  const shader::AttentionShape& s = c.shape;
  const int64_t hd = s.head_dim, row_len = s.n_head_kv * hd, group = s.n_head / s.n_head_kv;
  std::vector<double> out(q.size(), 0.0);
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    const int64_t pos = c.positions[t];
    const int64_t lo = s.sliding_window > 0 ? std::max<int64_t>(0, pos + 1 - s.sliding_window) : 0;
    for (int64_t h = 0; h < s.n_head; ++h) {
      const float* qh = q.data() + (t * s.n_head + h) * hd;
      const int64_t kv0 = (h / group) * hd;
      std::vector<double> scores;
      for (int64_t j = lo; j <= pos; ++j) {
        const float* kr = k.values.data() + host_row(c, t, j) * row_len + kv0;
        double dot = 0;
        for (int64_t i = 0; i < hd; ++i) dot += double(qh[i]) * kr[i];
        scores.push_back(dot * s.scale);
      }
      // A sink joins the max and the denominator, with no value row
      // (docs/GPT_OSS.md, "Attention sinks").
      const bool sink = !c.sinks.empty();
      double m = *std::max_element(scores.begin(), scores.end());
      if (sink) m = std::max(m, double(c.sinks[size_t(h)]));
      double sum = sink ? std::exp(double(c.sinks[size_t(h)]) - m) : 0.0;
      for (double& x : scores) sum += (x = std::exp(x - m));
      double* o = out.data() + (t * s.n_head + h) * hd;
      for (int64_t j = lo; j <= pos; ++j) {
        const float* vr = v.values.data() + host_row(c, t, j) * row_len + kv0;
        for (int64_t i = 0; i < hd; ++i) o[i] += scores[size_t(j - lo)] / sum * vr[i];
      }
    }
  }
  return out;
}

struct AttentionRun {
  std::vector<float> out;
  std::vector<uint32_t> err;
};

// Uploads the case's buffers, runs the kernel with out prefilled with 7, and
// reads out and the error words back.
inline AttentionRun run_attention(const AttentionCase& c, const std::vector<float>& q,
                                  const HostCache& k, const HostCache& v, AttentionKernel kernel) {
  shader::Device& d = device();
  const bool paged = c.shape.page_size > 0;
  auto gq = upload_floats(d, q), gp = upload_vec(d, c.positions);
  auto gs = paged ? upload_vec(d, c.slots) : nullptr, gt = paged ? upload_vec(d, c.table) : nullptr;
  auto gk = upload_vec(d, k.bytes), gv = upload_vec(d, v.bytes);
  auto go = upload_floats(d, std::vector<float>(q.size(), 7.0f));
  auto gsink = c.sinks.empty() ? nullptr : upload_floats(d, c.sinks);
  const shader::BufferRange sinks = c.sinks.empty() ? shader::BufferRange{} : whole(gsink);
  auto err = zeros(d, MINFER_ERR_WORDS * 4);
  const shader::BufferRange slots = paged ? whole(gs) : shader::BufferRange{};
  const shader::BufferRange table = paged ? whole(gt) : shader::BufferRange{};
  const shader::BufferRange kc{gk.get(), 0, k.bytes.size()}, vc{gv.get(), 0, v.bytes.size()};
  shader::Recorder rec(d);
  const Status s = encode_attention_with(kernel, rec, whole(gq), whole(gp), slots, table, kc, vc,
                                         sinks, whole(go), whole(err), c.shape);
  EXPECT_TRUE(s.is_ok()) << s.message();
  if (!s.is_ok()) return {};
  const Status w = rec.submit_and_wait();
  EXPECT_TRUE(w.is_ok()) << w.message();
  return {download_floats(d, *go, q.size()), error_words(d, *err)};
}

inline void expect_matches_reference(const AttentionCase& c, uint32_t seed,
                                     AttentionKernel kernel) {
  const shader::AttentionShape& s = c.shape;
  const int64_t row_len = s.n_head_kv * s.head_dim;
  const auto q = random_floats(s.n_tokens * s.n_head * s.head_dim, seed);
  const HostCache k = make_cache(s.k_type, s.n_ctx, row_len, seed + 1);
  const HostCache v = make_cache(s.v_type, s.n_ctx, row_len, seed + 2);
  const AttentionRun got = run_attention(c, q, k, v, kernel);
  ASSERT_EQ(got.out.size(), q.size());
  EXPECT_EQ(got.err[0], 0u);
  EXPECT_LT(max_abs_diff(got.out, reference_attention(c, q, k, v)), 1e-3)
      << quant::type_name(s.k_type) << " K, " << quant::type_name(s.v_type) << " V, head_dim "
      << s.head_dim << ", heads " << s.n_head << "/" << s.n_head_kv << ", tokens " << s.n_tokens
      << " from " << c.positions[0] << ", window " << s.sliding_window << ", page_size "
      << s.page_size;
}

template <typename T>
std::vector<T> download_vec(shader::Device& d, const shader::Buffer& b, size_t n) {
  std::vector<T> out(n);
  const Status s = d.read_buffer(b, 0, std::as_writable_bytes(std::span(out)));
  EXPECT_TRUE(s.is_ok()) << s.message();
  return out;
}

// Two sequences in shuffled pages of 16 rows: slot 2 holds 70 positions
// (5 pages), slot 0 holds 40 (3 pages); their queries are interleaved, so
// every block of rows mixes the two slots.
inline AttentionCase paged_case(TensorType k_type, TensorType v_type, int64_t hd) {
  AttentionCase c{shape_of(20, 8, 2, hd, 256, k_type, v_type), {}, {}, {}, {}};
  c.shape.page_size = 16;
  c.shape.max_pages = 6;
  c.shape.n_slots = 3;
  std::vector<int32_t> pages(16);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937(5));
  c.table.assign(size_t(3 * 6), -1);
  for (int p = 0; p < 5; ++p) c.table[size_t(2 * 6 + p)] = pages[size_t(p)];
  for (int p = 0; p < 3; ++p) c.table[size_t(0 * 6 + p)] = pages[size_t(5 + p)];
  for (int i = 0; i < 10; ++i) {
    c.positions.push_back(60 + i);
    c.slots.push_back(2);
    c.positions.push_back(30 + i);
    c.slots.push_back(0);
  }
  return c;
}

// paged_case against the host: f16 caches at head_dim 64 (seed), and q8_0 K
// with f32 V at head_dim 128 in a window of 21 (seed + 10).
inline void expect_paged_cases_match(AttentionKernel kernel, uint32_t seed) {
  expect_matches_reference(paged_case(TensorType::F16, TensorType::F16, 64), seed, kernel);
  AttentionCase windowed = paged_case(TensorType::Q8_0, TensorType::F32, 128);
  windowed.shape.sliding_window = 21;
  expect_matches_reference(windowed, seed + 10, kernel);
}

// A position past the cache, a slot past the tables and a page past the
// cache are skipped and reported (MINFER_ERR_POSITION with the value and its
// bound); the query past the cache keeps its output, the one before it is
// computed.
inline void expect_bad_indices_reported(AttentionKernel kernel) {
  struct Bad {
    AttentionCase c;
    uint32_t value, bound;
  };
  AttentionCase past = {
      shape_of(2, 4, 2, 32, 64, TensorType::F32, TensorType::F32), {3, 64}, {}, {}, {}};
  AttentionCase slot = paged_case(TensorType::F32, TensorType::F32, 32);
  slot.slots[5] = 3;
  AttentionCase page = paged_case(TensorType::F32, TensorType::F32, 32);
  page.table[size_t(2 * 6 + 4)] = 16;  // read by the queries at 64..69 of slot 2
  for (const Bad& b : {Bad{past, 64, 64}, Bad{slot, 3, 3}, Bad{page, 16, 16}}) {
    const shader::AttentionShape& s = b.c.shape;
    const auto q = random_floats(s.n_tokens * s.n_head * s.head_dim, 9);
    const HostCache k = make_cache(s.k_type, s.n_ctx, s.n_head_kv * s.head_dim, 10);
    const HostCache v = make_cache(s.v_type, s.n_ctx, s.n_head_kv * s.head_dim, 11);
    const AttentionRun got = run_attention(b.c, q, k, v, kernel);
    ASSERT_EQ(got.err.size(), size_t(MINFER_ERR_WORDS));
    EXPECT_EQ(got.err[0], MINFER_ERR_POSITION);
    EXPECT_EQ(got.err[1], b.value);
    EXPECT_EQ(got.err[2], b.bound);
  }
  // The query past the cache is left as it was; the one before it is computed.
  const auto q = random_floats(2 * 4 * 32, 9);
  const HostCache k = make_cache(TensorType::F32, 64, 64, 10),
                  v = make_cache(TensorType::F32, 64, 64, 11);
  const AttentionRun got = run_attention(past, q, k, v, kernel);
  const auto want = reference_attention({past.shape, {3, 3}, {}, {}, {}}, q, k, v);
  for (size_t i = 0; i < 128; ++i) EXPECT_NEAR(got.out[i], want[i], 1e-3);
  for (size_t i = 128; i < 256; ++i) EXPECT_EQ(got.out[i], 7.0f);
}

// What both kernels refuse, each refusal recording nothing: heads that do not
// divide, head_dim past 256 or odd, q8_0 with head_dim % 32 != 0, a cache
// type without a kernel (unimplemented), out aliasing q, a short K cache,
// tables unpaged, paged without tables or with a page larger than the cache,
// a negative window, and on lavapipe a loop past its cap (unimplemented).
inline void expect_malformed_shapes_refused(AttentionKernel kernel) {
  shader::Device& d = device();
  auto qb = zeros(d, 1 << 16), ob = zeros(d, 1 << 16), cache = zeros(d, 1 << 16);
  auto small = zeros(d, 256), err = zeros(d, 16);
  shader::Recorder rec(d);
  auto code = [&](shader::AttentionShape s, const std::unique_ptr<shader::Buffer>& out,
                  const std::unique_ptr<shader::Buffer>& kc, shader::BufferRange tables = {}) {
    return encode_attention_with(kernel, rec, whole(qb), whole(small), tables, tables, whole(kc),
                                 whole(cache), {}, whole(out), whole(err), s)
        .code();
  };
  const auto ok_shape = shape_of(2, 8, 2, 64, 16, TensorType::F32, TensorType::F32);
  EXPECT_EQ(code(ok_shape, ob, cache), StatusCode::kOk);  // the baseline is accepted
  auto bad = ok_shape;
  bad.n_head_kv = 3;  // 8 heads over 3 kv heads
  EXPECT_EQ(code(bad, ob, cache), StatusCode::kInvalidArgument);
  bad = ok_shape;
  bad.head_dim = 258;
  EXPECT_EQ(code(bad, ob, cache), StatusCode::kInvalidArgument);
  bad.head_dim = 63;
  EXPECT_EQ(code(bad, ob, cache), StatusCode::kInvalidArgument);
  bad = ok_shape;
  bad.head_dim = 48;
  bad.k_type = TensorType::Q8_0;
  EXPECT_EQ(code(bad, ob, cache), StatusCode::kInvalidArgument);
  bad.k_type = TensorType::Q4_0;
  bad.head_dim = 64;
  EXPECT_EQ(code(bad, ob, cache), StatusCode::kUnimplemented);
  EXPECT_EQ(code(ok_shape, qb, cache), StatusCode::kInvalidArgument);  // out aliases q
  EXPECT_EQ(code(ok_shape, ob, small), StatusCode::kInvalidArgument);  // short K
  EXPECT_EQ(code(ok_shape, ob, cache, whole(small)),
            StatusCode::kInvalidArgument);  // tables unpaged
  bad = ok_shape;
  bad.page_size = 8;  // paged without tables
  bad.max_pages = 2;
  bad.n_slots = 1;
  EXPECT_EQ(code(bad, ob, cache), StatusCode::kInvalidArgument);
  bad.page_size = 32;  // a page larger than the cache
  EXPECT_EQ(code(bad, ob, cache, whole(small)), StatusCode::kInvalidArgument);
  bad = ok_shape;
  bad.sliding_window = -1;
  EXPECT_EQ(code(bad, ob, cache), StatusCode::kInvalidArgument);
  EXPECT_EQ(rec.pending(), 1u);  // only the baseline was recorded
  if (d.info().type == "cpu") {  // lavapipe's loop cap
    bad = ok_shape;
    bad.n_ctx = 200000;
    bad.head_dim = 4;
    bad.n_head = bad.n_head_kv = 1;
    EXPECT_EQ(code(bad, ob, cache), StatusCode::kUnimplemented);
  }
}

// Microseconds per call of `kernel` on `c` (GPU timestamps around `calls`
// calls, each after a barrier as in the engine; the best of 3 rounds after a
// warm-up round), or -1 on a device without timestamps. `out`, when given,
// gets the last call's output.
inline double time_attention(const AttentionCase& c, AttentionKernel kernel, int calls,
                             std::vector<float>* out = nullptr) {
  shader::Device& d = device();
  const shader::AttentionShape& s = c.shape;
  const int64_t row_len = s.n_head_kv * s.head_dim;
  const auto q = random_floats(s.n_tokens * s.n_head * s.head_dim, 71);
  const HostCache k = make_cache(s.k_type, s.n_ctx, row_len, 72);
  const HostCache v = make_cache(s.v_type, s.n_ctx, row_len, 73);
  auto gq = upload_floats(d, q), gp = upload_vec(d, c.positions);
  auto gk = upload_vec(d, k.bytes), gv = upload_vec(d, v.bytes);
  auto go = zeros(d, q.size() * 4), err = zeros(d, MINFER_ERR_WORDS * 4);
  double best = -1;
  for (int round = 0; round < 4; ++round) {
    shader::Recorder rec(d);
    if (!rec.timestamp().is_ok()) return -1;
    for (int i = 0; i < calls; ++i) {
      const Status st = encode_attention_with(kernel, rec, whole(gq), whole(gp), {}, {}, whole(gk),
                                              whole(gv), {}, whole(go), whole(err), s);
      EXPECT_TRUE(st.is_ok()) << st.message();
      if (!st.is_ok()) return -1;
    }
    if (!rec.timestamp().is_ok() || !rec.submit_and_wait().is_ok()) return -1;
    const std::vector<double>& ts = rec.timestamps_s();
    if (ts.size() != 2) return -1;
    const double us = (ts[1] - ts[0]) / calls * 1e6;
    if (round > 0 && (best < 0 || us < best)) best = us;
  }
  if (out != nullptr) *out = download_floats(d, *go, q.size());
  return best;
}

}  // namespace minfer::vulkan::testing
