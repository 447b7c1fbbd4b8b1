// Attention on the CUDA backend against a plain double-precision statement
// of the GPU path's semantics (the CPU follows llama.cpp's half-precision
// decode rows for f16 caches), after a KV store checked byte for byte against
// the CPU's, at realistic shapes: GQA 7 and 8, head dims 32..256, sliding
// windows, f32/f16/q8_0 K and V caches (mixed too), the batch's own k/v or
// the batch read back from the cache. All three kernels: decode batches
// (< 8 tokens) per (token, head), or split over a thread block cluster when
// the pairs leave SMs idle and the cache is long (with MINFER_NO_SPLIT_KV=1
// too); prompt batches on the tiled flash kernel, split over the key range
// when its grid is small. Attention sinks (gpt-oss) in every one of them.
// Tolerance: max abs diff < 1e-3 everywhere (all kernels are f32; measured
// values are printed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cuda_testutil.h"

namespace minfer::cuda::testing {
namespace {

constexpr double kTol = 1e-3;
constexpr TensorType kF32 = TensorType::F32, kF16 = TensorType::F16, kQ8 = TensorType::Q8_0;

struct AttnCase {
  int64_t n_head, n_head_kv, head_dim;
  int64_t n_past, n_tokens;
  int64_t window;
  TensorType k, v;  // cache row types
  // Attention without the batch's own k/v: every key, the batch's too, is
  // read back from the cache (as after a non-consecutive batch).
  bool from_cache = false;
  int64_t n_ctx = 0;       // cache rows; 0: n_past + n_tokens + 8
  bool sinks = false;      // a sink logit per head (sink_logits)
  bool invariant = false;  // AttentionMeta::batch_invariant: the per-token kernels at any size
};

// One sink logit per head, cycling through values far above every score
// (|scores| stay below ~8 with these inputs), far below them, and among
// them, so that both branches of the fold (sink above or below the running
// max) run.
std::vector<float> sink_logits(int64_t n_head) {
  const float kCycle[] = {40.0f, -40.0f, 0.0f, 1.5f, -1.0f, 3.0f, 0.5f, -2.5f};
  std::vector<float> s(static_cast<size_t>(n_head));
  for (size_t h = 0; h < s.size(); ++h) s[h] = kCycle[h % std::size(kCycle)];
  return s;
}

// KV store of a batch after n_past cached rows, then attention; both backends.
void check_attention(const AttnCase& c) {
  Backends b;
  const std::vector<float> sinks = sink_logits(c.n_head);
  if (c.sinks) add_weight(b.weights, "sinks", kF32, 1, c.n_head, sinks);
  b.start();
  const int64_t n_ctx = c.n_ctx > 0 ? c.n_ctx : c.n_past + c.n_tokens + 8;
  const int64_t kv_row = c.n_head_kv * c.head_dim;
  // Earlier rows of the cache (positions < n_past), in the cache's types.
  const auto k_bytes = encode_rows(c.k, random_floats(n_ctx * kv_row, 10), kv_row);
  const auto v_bytes = encode_rows(c.v, random_floats(n_ctx * kv_row, 11), kv_row);
  KvRegions gpu_kv, cpu_kv;
  make_kv(*b.gpu, c.k, c.v, n_ctx, kv_row, k_bytes, v_bytes, gpu_kv);
  make_kv(*b.cpu, c.k, c.v, n_ctx, kv_row, k_bytes, v_bytes, cpu_kv);
  const auto q = random_floats(c.n_head * c.head_dim * c.n_tokens, 12);
  const auto k = random_floats(kv_row * c.n_tokens, 13);
  const auto v = random_floats(kv_row * c.n_tokens, 14);
  const auto pos = iota_positions(c.n_tokens, static_cast<int32_t>(c.n_past));

  Node store = make_node(Op::kKvStore, 0, 0,
                         graph::KvMeta{0, c.n_head_kv, c.head_dim, c.n_tokens, c.k, c.v});
  graph::AttentionMeta am = attention_meta(c.n_head, c.n_head_kv, c.head_dim, c.k, c.v);
  am.sliding_window = c.window;
  am.sinks = c.sinks ? "sinks" : "";
  am.batch_invariant = c.invariant;
  Node attn = make_node(Op::kAttention, c.n_head * c.head_dim, c.n_tokens, am);
  const std::vector<std::vector<std::byte>> store_in = {bytes_of(k), bytes_of(v), bytes_of(pos)};
  ASSERT_TRUE(b.gpu->supports_op(store));
  ASSERT_TRUE(b.gpu->supports_op(attn));
  auto stored = run_node(*b.gpu, store, store_in, &gpu_kv.pair);
  ASSERT_TRUE(stored.is_ok()) << stored.message();
  stored = run_node(*b.cpu, store, store_in, &cpu_kv.pair);
  ASSERT_TRUE(stored.is_ok()) << stored.message();
  // The stored bytes are the CPU's, bit for bit (q8_0: the reference quantizer).
  const auto cache_k_bytes = read_all(*b.gpu, gpu_kv.pair.k);
  const auto cache_v_bytes = read_all(*b.gpu, gpu_kv.pair.v);
  EXPECT_TRUE(cache_k_bytes == read_all(*b.cpu, cpu_kv.pair.k)) << "K bytes differ";
  EXPECT_TRUE(cache_v_bytes == read_all(*b.cpu, cpu_kv.pair.v)) << "V bytes differ";
  std::vector<std::vector<std::byte>> attn_in = {bytes_of(q), {}, bytes_of(pos)};
  if (!c.from_cache) {
    attn_in.push_back(bytes_of(k));
    attn_in.push_back(bytes_of(v));
  }
  auto got = run_node(*b.gpu, attn, attn_in, &gpu_kv.pair);
  ASSERT_TRUE(got.is_ok()) << got.message();
  // Reference: the GPU path's semantics (f32 query; keys at the batch's
  // positions from the batch's f32 k/v unless from_cache, others from the
  // cache as the reference decodes its bytes), with double sums; a sink s
  // joins the max and the denominator (docs/GPT_OSS.md "Attention sinks").
  const std::vector<float> cache_k = decode_rows(c.k, cache_k_bytes, kv_row);
  const std::vector<float> cache_v = decode_rows(c.v, cache_v_bytes, kv_row);
  const int64_t batch_from = c.from_cache ? n_ctx : c.n_past;
  std::vector<float> want(q.size());
  const int64_t group = c.n_head / c.n_head_kv;
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    const int64_t p = pos[t];
    const int64_t j0 = c.window > 0 ? std::max<int64_t>(0, p - c.window + 1) : 0;
    for (int64_t h = 0; h < c.n_head; ++h) {
      const float* qh = q.data() + (t * c.n_head + h) * c.head_dim;
      const int64_t off = (h / group) * c.head_dim;
      auto key = [&](int64_t j) {
        return j >= batch_from ? k.data() + (j - c.n_past) * kv_row + off
                               : cache_k.data() + j * kv_row + off;
      };
      auto val = [&](int64_t j) {
        return j >= batch_from ? v.data() + (j - c.n_past) * kv_row + off
                               : cache_v.data() + j * kv_row + off;
      };
      std::vector<double> sc;
      const double sink = c.sinks ? double(sinks[static_cast<size_t>(h)]) : -INFINITY;
      double mx = sink;
      for (int64_t j = j0; j <= p; ++j) {
        double d = 0;
        for (int64_t i = 0; i < c.head_dim; ++i) d += double(qh[i]) * key(j)[i];
        sc.push_back(d * am.scale);
        mx = std::max(mx, sc.back());
      }
      double sum = c.sinks ? std::exp(sink - mx) : 0.0;
      for (double& e : sc) sum += e = std::exp(e - mx);
      for (int64_t i = 0; i < c.head_dim; ++i) {
        double o = 0;
        for (int64_t j = j0; j <= p; ++j) o += sc[static_cast<size_t>(j - j0)] * val(j)[i];
        want[(t * c.n_head + h) * c.head_dim + i] = static_cast<float>(o / sum);
      }
    }
  }
  const double diff = max_abs_diff(*got, want);
  std::printf(
      "  attention heads %lld/%lld hd %lld past %lld n %lld n_ctx %lld window %lld k %s v "
      "%s%s%s%s: max diff %.2e\n",
      static_cast<long long>(c.n_head), static_cast<long long>(c.n_head_kv),
      static_cast<long long>(c.head_dim), static_cast<long long>(c.n_past),
      static_cast<long long>(c.n_tokens), static_cast<long long>(n_ctx),
      static_cast<long long>(c.window), std::string(quant::type_name(c.k)).c_str(),
      std::string(quant::type_name(c.v)).c_str(), c.from_cache ? " from cache" : "",
      c.sinks ? " sinks" : "", c.invariant ? " invariant" : "", diff);
  EXPECT_LT(diff, kTol);
}

TEST(cuda_Ops, KvStoreMatchesCpuAndAttentionItsReference) {
  MINFER_SKIP_WITHOUT_CUDA();
  const AttnCase cases[] = {
      {14, 2, 64, 0, 37, 0, kF32, kF32},    // qwen2.5-0.5b prompt (GQA 7)
      {14, 2, 64, 300, 1, 0, kF32, kF32},   // its decode step
      {14, 2, 64, 2000, 1, 0, kF16, kF16},  // a decode step deep into the context
      {28, 4, 128, 200, 1, 0, kF16, kF16},  // qwen2.5-7b decode, f16 cache (GQA 7)
      {28, 4, 128, 50, 20, 0, kF16, kF16},  // a prompt chunk after cached rows
      {32, 4, 128, 130, 3, 0, kF32, kF32},  // GQA 8
      {4, 1, 256, 90, 1, 64, kF32, kF32},   // gemma3 270m local layer: window
      {4, 1, 256, 10, 80, 64, kF16, kF16},  // window inside the batch
      {8, 8, 64, 5, 4, 0, kF32, kF32},      // no GQA
      // Prompt batches of >= 8 tokens run the tiled (flash) kernel:
      {14, 2, 64, 0, 1024, 0, kF16, kF16},     // 0.5b prompt, GQA 7, partial row tiles
      {28, 4, 128, 100, 300, 0, kF16, kF16},   // 7b prompt chunk after cached rows
      {32, 4, 128, 0, 256, 0, kF32, kF32},     // GQA 8
      {32, 8, 128, 40, 9, 0, kF32, kF32},      // short chunk: key range starts mid-tile
      {8, 1, 256, 0, 600, 128, kF16, kF16},    // gemma-like, window inside the batch
      {8, 1, 256, 200, 100, 128, kF32, kF32},  // window reaching into the cache
      {4, 4, 32, 3, 70, 0, kF32, kF32},        // head dim 32, no GQA
      {6, 2, 96, 0, 33, 20, kF32, kF32},       // head dim 96
      // Few blocks: the key range is split over several blocks, then merged.
      {14, 2, 64, 2000, 12, 0, kF16, kF16},    // prompt tail after a long context
      {28, 4, 128, 1500, 40, 0, kF32, kF32},   // 7b shape
      {8, 1, 256, 1000, 20, 128, kF16, kF16},  // window: most splits empty
  };
  for (const AttnCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "heads " << c.n_head << "/" << c.n_head_kv << " hd "
                                      << c.head_dim << " past " << c.n_past << " n " << c.n_tokens);
    check_attention(c);
  }
}

// q8_0 and mixed caches: the stored bytes equal the CPU quantizer's, and
// attention (both kernels, split or not) matches the reference reading the
// same dequantized rows.
TEST(cuda_Ops, QuantizedAndMixedKvCachesMatchTheirReference) {
  MINFER_SKIP_WITHOUT_CUDA();
  const AttnCase cases[] = {
      // Decode (per-token kernel).
      {14, 2, 64, 300, 1, 0, kQ8, kQ8},         // qwen2.5-0.5b decode, GQA 7
      {28, 4, 128, 2000, 1, 0, kQ8, kQ8},       // 7b decode deep into the context
      {32, 4, 128, 130, 3, 0, kQ8, kF16},       // GQA 8, mixed
      {4, 1, 256, 90, 1, 64, kQ8, kQ8},         // gemma3 270m local layer: window
      {8, 8, 64, 5, 4, 0, kF16, kQ8},           // no GQA, mixed
      {14, 2, 64, 200, 2, 0, kF32, kQ8},        // f32 K, q8_0 V
      {4, 1, 256, 40, 1, 0, kQ8, kF32},         // q8_0 K, f32 V
      {8, 2, 32, 50, 5, 0, kQ8, kQ8},           // head dim 32
      {6, 2, 96, 60, 3, 20, kQ8, kF16},         // head dim 96, window
      {14, 2, 64, 100, 4, 0, kQ8, kQ8, true},   // the batch read back from the cache
      {4, 1, 256, 70, 6, 32, kF16, kQ8, true},  // the same, window
      // Prefill (tiled kernel).
      {14, 2, 64, 0, 1024, 0, kQ8, kQ8},          // 0.5b prompt, GQA 7
      {28, 4, 128, 100, 300, 0, kQ8, kQ8},        // 7b prompt chunk after cached rows
      {32, 8, 128, 40, 9, 0, kQ8, kF16},          // short chunk: key range starts mid-tile
      {8, 1, 256, 200, 100, 128, kQ8, kQ8},       // window reaching into the cache
      {8, 1, 256, 0, 600, 128, kF16, kQ8},        // gemma-like, window inside the batch
      {32, 4, 128, 64, 256, 0, kF32, kQ8},        // GQA 8, f32 K
      {4, 4, 32, 3, 70, 0, kQ8, kF32},            // head dim 32, no GQA
      {6, 2, 96, 30, 33, 20, kQ8, kQ8},           // head dim 96
      {14, 2, 64, 50, 40, 0, kQ8, kQ8, true},     // the batch from the cache
      {8, 1, 256, 100, 64, 64, kQ8, kF16, true},  // the same, window
      {28, 4, 128, 20, 200, 0, kF16, kQ8, true},  // the same, mixed
      // Few blocks: the key range split over several blocks, then merged.
      {14, 2, 64, 2000, 12, 0, kQ8, kQ8},
      {28, 4, 128, 1500, 40, 0, kQ8, kF32},
      {8, 1, 256, 1000, 20, 128, kQ8, kQ8},
      {14, 2, 64, 1500, 16, 0, kF16, kQ8, true},
  };
  for (const AttnCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "heads " << c.n_head << "/" << c.n_head_kv << " hd " << c.head_dim << " past "
                 << c.n_past << " n " << c.n_tokens << " k " << quant::type_name(c.k) << " v "
                 << quant::type_name(c.v) << (c.from_cache ? " from cache" : ""));
    check_attention(c);
  }
}

// Decode (1 and 3 tokens) deep into caches of >= 4096 rows, where the
// (token, head) pairs leave most SMs idle: the split-KV cluster kernel, and
// the per-token kernel with MINFER_NO_SPLIT_KV=1, both against the reference.
TEST(cuda_Ops, SplitKvDecodeMatchesItsReference) {
  MINFER_SKIP_WITHOUT_CUDA();
  const AttnCase cases[] = {
      {14, 2, 64, 600, 1, 0, kF32, kF32, false, 4096},     // qwen2.5-0.5b (GQA 7)
      {14, 2, 64, 2000, 3, 0, kF16, kF16, false, 4096},    // 3 tokens: 42 pairs
      {14, 2, 64, 5000, 1, 0, kQ8, kQ8, false, 8192},      // deep, q8_0
      {14, 2, 64, 2000, 1, 512, kQ8, kF16, false, 4096},   // window 512, mixed
      {28, 4, 128, 2000, 1, 0, kF16, kF16, false, 4096},   // qwen2.5-7b (GQA 7)
      {28, 4, 128, 5000, 3, 0, kQ8, kF32, false, 8192},    // 84 pairs: 2 blocks each
      {32, 4, 128, 600, 3, 0, kF32, kQ8, false, 4096},     // GQA 8
      {32, 4, 128, 5000, 1, 0, kF16, kQ8, false, 8192},    // GQA 8, deep
      {8, 1, 256, 5000, 1, 512, kF16, kF16, false, 8192},  // gemma-like local layer
      {8, 1, 256, 2000, 3, 512, kQ8, kQ8, false, 4096},    // window over 3 tokens
      {4, 1, 256, 600, 1, 0, kF32, kF32, false, 4096},     // hd 256, global layer
      {2, 2, 128, 5000, 1, 0, kF32, kF32, false, 8192},    // 2 heads: 8 blocks each
      {2, 2, 64, 2000, 3, 512, kF16, kQ8, false, 4096},    // 2 heads, window
      {14, 2, 64, 2000, 3, 0, kQ8, kQ8, true, 4096},       // the batch from the cache
      {16, 2, 128, 600, 3, 512, kF16, kF16, true, 4096},   // the same, GQA 8, window
      {14, 2, 64, 4095, 1, 0, kF32, kF32, false, 4096},    // the cache's last row
  };
  for (const char* no_split : {static_cast<const char*>(nullptr), "1"}) {
    ScopedEnv env("MINFER_NO_SPLIT_KV", no_split);
    for (const AttnCase& c : cases) {
      SCOPED_TRACE(::testing::Message()
                   << "heads " << c.n_head << "/" << c.n_head_kv << " hd " << c.head_dim << " past "
                   << c.n_past << " n " << c.n_tokens << " window " << c.window << " k "
                   << quant::type_name(c.k) << " v " << quant::type_name(c.v)
                   << (c.from_cache ? " from cache" : "")
                   << (no_split != nullptr ? " MINFER_NO_SPLIT_KV=1" : ""));
      check_attention(c);
    }
  }
}

// Short contexts in long caches: the split kernel still runs (the split is
// fixed from the cache capacity), so many of a cluster's key chunks, and of
// its blocks' warps, have no key at all.
TEST(cuda_Ops, SplitKvDecodeWithEmptyChunks) {
  MINFER_SKIP_WITHOUT_CUDA();
  const AttnCase cases[] = {
      {14, 2, 64, 5, 1, 0, kF32, kF32, false, 4096},   // 6 keys, 8 chunks
      {14, 2, 64, 0, 1, 0, kF16, kF16, false, 4096},   // one key
      {2, 2, 128, 5, 3, 0, kQ8, kF16, false, 4096},    // 3 tokens, 6..8 keys
      {8, 1, 256, 3, 1, 512, kQ8, kQ8, false, 4096},   // window longer than the context
      {28, 4, 128, 30, 2, 0, kF32, kQ8, false, 4096},  // 30..31 keys
      {4, 1, 256, 5, 1, 0, kF16, kF16, true, 4096},    // from the cache
  };
  for (const char* no_split : {static_cast<const char*>(nullptr), "1"}) {
    ScopedEnv env("MINFER_NO_SPLIT_KV", no_split);
    for (const AttnCase& c : cases) {
      SCOPED_TRACE(::testing::Message()
                   << "heads " << c.n_head << "/" << c.n_head_kv << " hd " << c.head_dim << " past "
                   << c.n_past << " n " << c.n_tokens << " k " << quant::type_name(c.k) << " v "
                   << quant::type_name(c.v)
                   << (no_split != nullptr ? " MINFER_NO_SPLIT_KV=1" : ""));
      check_attention(c);
    }
  }
}

// Attention sinks (gpt-oss): each head's logit joins its rows' softmax
// denominator, folded in once after the keys by every kernel: the per-token
// kernel, the grouped one (batch-invariant batches that fill the SMs), the
// split-KV cluster kernel (on the merged state, never per split; and the
// per-token kernel again with MINFER_NO_SPLIT_KV=1), the tiled kernel and
// its split form (folded by the merge kernel); f32, f16 and q8_0 caches,
// windowed and full, the batch's own k/v or the cache's.
TEST(cuda_Ops, AttentionSinksMatchTheirReference) {
  MINFER_SKIP_WITHOUT_CUDA();
  const AttnCase cases[] = {
      // Decode: the per-token kernel.
      {8, 2, 64, 40, 1, 0, kF32, kF32, false, 0, true},
      {8, 2, 64, 40, 3, 8, kF16, kF16, false, 0, true},    // tiny-gpt-oss: window 8
      {64, 8, 64, 300, 1, 128, kQ8, kQ8, false, 0, true},  // gpt-oss-20b windowed layer
      {14, 2, 64, 300, 4, 0, kF16, kQ8, true, 0, true},    // from the cache, mixed
      // Batch-invariant batches whose (token, KV head) pairs fill half the
      // SMs: the grouped kernel (a block per KV head, 8 query heads).
      {64, 8, 64, 100, 20, 0, kF16, kF16, false, 0, true, true},
      {64, 8, 64, 100, 20, 128, kF32, kF32, true, 0, true, true},
      // Few pairs over a long cache: the split-KV cluster kernel.
      {64, 8, 64, 2000, 1, 0, kF16, kF16, false, 4096, true},
      {8, 2, 64, 3000, 1, 128, kQ8, kQ8, false, 4096, true},
      {16, 2, 64, 600, 3, 0, kF32, kF16, false, 4096, true},
      {8, 2, 64, 5, 1, 0, kF32, kF32, false, 4096, true},  // most chunks empty
      // Prompts: the tiled kernel (300 tokens fill the grid: unsplit), and
      // split over the key range when its grid is small.
      {64, 8, 64, 0, 300, 128, kF16, kF16, false, 0, true},
      {8, 2, 64, 50, 40, 0, kF32, kF32, false, 0, true},
      {8, 2, 64, 2000, 12, 0, kF16, kF16, false, 0, true},
      {8, 2, 64, 1000, 20, 128, kQ8, kQ8, false, 0, true},
      {8, 2, 64, 30, 40, 8, kF16, kF16, true, 0, true},  // from the cache, window 8
  };
  for (const char* no_split : {static_cast<const char*>(nullptr), "1"}) {
    ScopedEnv env("MINFER_NO_SPLIT_KV", no_split);
    for (const AttnCase& c : cases) {
      SCOPED_TRACE(::testing::Message()
                   << "heads " << c.n_head << "/" << c.n_head_kv << " past " << c.n_past << " n "
                   << c.n_tokens << " window " << c.window << " k " << quant::type_name(c.k)
                   << " v " << quant::type_name(c.v) << (c.from_cache ? " from cache" : "")
                   << (c.invariant ? " invariant" : "")
                   << (no_split != nullptr ? " MINFER_NO_SPLIT_KV=1" : ""));
      check_attention(c);
    }
  }
}

// With sinks, a batch-invariant node's rows are the same bits in a batch (20
// tokens: the grouped kernel) and alone (the per-head kernel), every key
// read from the cache.
TEST(cuda_Ops, AttentionSinksRowsAreBatchInvariantBitForBit) {
  MINFER_SKIP_WITHOUT_CUDA();
  constexpr int64_t kHeads = 64, kHeadsKv = 8, kDim = 64, kPast = 100, kTokens = 20, kCtx = 128;
  constexpr int64_t kKvRow = kHeadsKv * kDim, kQRow = kHeads * kDim;
  Backends b;
  add_weight(b.weights, "sinks", kF32, 1, kHeads, sink_logits(kHeads));
  b.start();
  const auto k_bytes = encode_rows(kF16, random_floats(kCtx * kKvRow, 50), kKvRow);
  const auto v_bytes = encode_rows(kF16, random_floats(kCtx * kKvRow, 51), kKvRow);
  KvRegions kv;
  make_kv(*b.gpu, kF16, kF16, kCtx, kKvRow, k_bytes, v_bytes, kv);
  const auto q = random_floats(kQRow * kTokens, 52);
  const auto pos = iota_positions(kTokens, static_cast<int32_t>(kPast));
  for (int64_t window : {0, 8}) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    graph::AttentionMeta am = attention_meta(kHeads, kHeadsKv, kDim, kF16, kF16);
    am.sliding_window = window;
    am.sinks = "sinks";
    am.batch_invariant = true;
    auto all = run_node(*b.gpu, make_node(Op::kAttention, kQRow, kTokens, am),
                        {bytes_of(q), {}, bytes_of(pos)}, &kv.pair);
    ASSERT_TRUE(all.is_ok()) << all.message();
    const Node one = make_node(Op::kAttention, kQRow, 1, am);
    for (int64_t t = 0; t < kTokens; ++t) {
      const std::vector<float> q_t(q.begin() + t * kQRow, q.begin() + (t + 1) * kQRow);
      const std::vector<int32_t> pos_t = {pos[static_cast<size_t>(t)]};
      auto row = run_node(*b.gpu, one, {bytes_of(q_t), {}, bytes_of(pos_t)}, &kv.pair);
      ASSERT_TRUE(row.is_ok()) << row.message();
      EXPECT_EQ(std::memcmp(row->data(), all->data() + t * kQRow, kQRow * sizeof(float)), 0)
          << "token " << t;
    }
  }
}

// A node with sinks runs on the GPU only when its sink weight is there as
// f32 [n_head]; otherwise supports_op refuses it and running it anyway is an
// error naming the node.
TEST(cuda_Ops, AttentionChecksTheSinkWeight) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  add_weight(b.weights, "sinks8", kF32, 1, 8, sink_logits(8));
  add_weight(b.weights, "sinks7", kF32, 1, 7, sink_logits(7));
  b.start();
  auto node = [](const std::string& sinks) {
    graph::AttentionMeta am = attention_meta(8, 2, 64);
    am.sinks = sinks;
    return make_node(Op::kAttention, 8 * 64, 1, am);
  };
  EXPECT_TRUE(b.gpu->supports_op(node("")));
  EXPECT_TRUE(b.gpu->supports_op(node("sinks8")));
  EXPECT_FALSE(b.gpu->supports_op(node("sinks7")));
  EXPECT_FALSE(b.gpu->supports_op(node("missing")));
  KvRegions kv;
  std::vector<float> zeros(4 * 2 * 64, 0.0f);
  make_kv(*b.gpu, graph::DType::kF32, 4, 2 * 64, bytes_of(zeros), bytes_of(zeros), kv);
  auto r =
      run_node(*b.gpu, node("sinks7"),
               {bytes_of(random_floats(8 * 64, 1)), {}, bytes_of(iota_positions(1, 0))}, &kv.pair);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("test.attention"), std::string::npos) << r.message();
}

// Paged attention (the engine's pool): two sequences whose positions live in
// scattered pages; each token reads only its own sequence through its
// page-table row. The GPU and the CPU against a double-precision reference
// that walks the same tables; batches of 10 tokens (past the flash kernel's
// threshold, which paged batches must not take) and of 2 (decode); with
// sinks too.
void check_paged(TensorType kv_type, int64_t n_tokens, double cpu_tol, bool with_sinks = false) {
  Backends b;
  const std::vector<float> sinks = sink_logits(4);
  if (with_sinks) add_weight(b.weights, "sinks", kF32, 1, 4, sinks);
  b.start();
  constexpr int64_t kHeads = 4, kHeadsKv = 2, kDim = 64, kPage = 4, kPages = 16, kMaxPages = 8;
  constexpr int64_t kRows = kPages * kPage, kKvRow = kHeadsKv * kDim;
  const auto k_bytes = encode_rows(kv_type, random_floats(kRows * kKvRow, 20), kKvRow);
  const auto v_bytes = encode_rows(kv_type, random_floats(kRows * kKvRow, 21), kKvRow);
  KvRegions gpu_kv, cpu_kv;
  make_kv(*b.gpu, kv_type, kv_type, kRows, kKvRow, k_bytes, v_bytes, gpu_kv);
  make_kv(*b.cpu, kv_type, kv_type, kRows, kKvRow, k_bytes, v_bytes, cpu_kv);
  const std::vector<int32_t> table = {5, 2, 9, 0,  14, 6, 0, 0,   // slot 0
                                      7, 1, 3, 11, 12, 4, 0, 0};  // slot 1
  std::vector<int32_t> slots, pos;
  for (int64_t t = 0; t < n_tokens; ++t) {
    slots.push_back(static_cast<int32_t>(t % 2));
    pos.push_back(static_cast<int32_t>(t % 2 == 0 ? 9 + t : 17 + t / 2));
  }
  const auto q = random_floats(kHeads * kDim * n_tokens, 22);
  graph::AttentionMeta am = attention_meta(kHeads, kHeadsKv, kDim, kv_type, kv_type);
  am.page_size = kPage;
  am.max_pages = kMaxPages;
  am.sinks = with_sinks ? "sinks" : "";
  Node attn = make_node(Op::kAttention, kHeads * kDim, n_tokens, am);
  ASSERT_TRUE(b.gpu->supports_op(attn));
  const std::vector<std::vector<std::byte>> in = {
      bytes_of(q), {}, bytes_of(pos), bytes_of(slots), bytes_of(table)};
  auto gpu = run_node(*b.gpu, attn, in, &gpu_kv.pair);
  ASSERT_TRUE(gpu.is_ok()) << gpu.message();
  auto cpu = run_node(*b.cpu, attn, in, &cpu_kv.pair);
  ASSERT_TRUE(cpu.is_ok()) << cpu.message();
  const std::vector<float> ck = decode_rows(kv_type, k_bytes, kKvRow);
  const std::vector<float> cv = decode_rows(kv_type, v_bytes, kKvRow);
  std::vector<float> want(q.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int32_t* pages = table.data() + slots[t] * kMaxPages;
    auto row = [&](int64_t j) { return pages[j / kPage] * kPage + j % kPage; };
    for (int64_t h = 0; h < kHeads; ++h) {
      const float* qh = q.data() + (t * kHeads + h) * kDim;
      const int64_t off = (h / (kHeads / kHeadsKv)) * kDim;
      std::vector<double> sc;
      const double sink = with_sinks ? double(sinks[static_cast<size_t>(h)]) : -INFINITY;
      double mx = sink;
      for (int64_t j = 0; j <= pos[t]; ++j) {
        double d = 0;
        for (int64_t i = 0; i < kDim; ++i) d += double(qh[i]) * ck[row(j) * kKvRow + off + i];
        sc.push_back(d * am.scale);
        mx = std::max(mx, sc.back());
      }
      double sum = with_sinks ? std::exp(sink - mx) : 0.0;
      for (double& e : sc) sum += e = std::exp(e - mx);
      for (int64_t i = 0; i < kDim; ++i) {
        double o = 0;
        for (int64_t j = 0; j <= pos[t]; ++j) o += sc[j] * cv[row(j) * kKvRow + off + i];
        want[(t * kHeads + h) * kDim + i] = static_cast<float>(o / sum);
      }
    }
  }
  const double gpu_diff = max_abs_diff(*gpu, want), cpu_diff = max_abs_diff(*cpu, want);
  std::printf("  paged attention %s, %lld tokens%s: gpu max diff %.2e, cpu %.2e\n",
              std::string(quant::type_name(kv_type)).c_str(), static_cast<long long>(n_tokens),
              with_sinks ? ", sinks" : "", gpu_diff, cpu_diff);
  EXPECT_LT(gpu_diff, kTol);
  EXPECT_LT(cpu_diff, cpu_tol);  // the CPU's per-row path rounds an f16 V sum
}

TEST(cuda_Ops, PagedAttentionReadsEachSequenceThroughItsPages) {
  MINFER_SKIP_WITHOUT_CUDA();
  check_paged(kF32, 10, kTol);
  check_paged(kF32, 2, kTol);
  check_paged(kF16, 10, 2e-2);
  check_paged(kF32, 10, kTol, true);
  check_paged(kF16, 2, 2e-2, true);
}

// The output rows of a paged batch come from an ids input.
TEST(cuda_Ops, GatherRowsByIdsInput) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  const auto x = random_floats(64 * 5, 30);
  const std::vector<int32_t> ids = {4, 0, 2};
  Node g = make_node(Op::kGetRows, 64, 3, graph::GetRowsMeta{});
  g.inputs = {0, 1};
  ASSERT_TRUE(b.gpu->supports_op(g));
  auto got = run_node(*b.gpu, g, {bytes_of(x), bytes_of(ids)}, nullptr);
  ASSERT_TRUE(got.is_ok()) << got.message();
  for (size_t r = 0; r < ids.size(); ++r) {
    for (int64_t i = 0; i < 64; ++i) EXPECT_EQ((*got)[r * 64 + i], x[ids[r] * 64 + i]);
  }
}

}  // namespace
}  // namespace minfer::cuda::testing
