// Row-wise f32 operators of the CPU backend, with the numerics of ggml's CPU
// implementation (ggml-cpu/ops.cpp and vec.h).
//
// Contract: activations are dense row-major f32 [n_rows][dim]. Unless noted,
// y may alias x (in-place), but must not partially overlap it. Functions
// returning void trust their arguments (non-negative sizes, buffers of the
// stated sizes); those returning Status validate shapes and report errors that
// name the offending values. Numerics, per function:
//   - rms_norm: sum of squares of f32 products accumulated in double (in
//     order on the scalar ISA, in 16 partial sums with AVX2), mean narrowed to
//     f32, scale = 1/sqrtf(mean + eps), y = (x * scale) * w
//     (backend/cpu/norm_rope.h).
//   - rope: ggml's rope cache: theta starts at the position, is multiplied by
//     theta_scale = powf(base, -2/n_rot) per pair, divided by the pair's freq
//     factor, times freq_scale; cosf/sinf in f32; dims past n_rot are copied.
//     With YaRN (RopeYarn::ext_factor != 0) the pair's angle blends the
//     scaled and unscaled thetas and cos/sin are multiplied by mscale, in
//     ggml's rope_yarn order (docs/GPT_OSS.md "YaRN RoPE").
//     The rotation is bit-identical on every ISA.
//   - gelu/geglu: ggml's GELU_FP16 path: x in (-10, 10) is rounded to f16 and
//     looked up in a table of f16-rounded tanh-approximation values.
//   - swiglu_oai: per element in f32 with libm's expf, ggml's order:
//     x = min(gate, limit), y = clamp(up, -limit, limit),
//     out = x / (1 + expf(alpha * -x)) * (y + 1); a NaN input gives NaN.
//   - silu/swiglu: x / (1 + exp(-x)); softmax: exp(x*scale - max) summed in
//     double, then multiplied by (float)(1/sum). exp is ggml's own vector
//     expf for whole chunks of 8 elements and libm's expf for the rest,
//     exactly as in ggml's x86 AVX2+FMA build (backend/cpu/vec_math.h).
//   - attention: ggml's flash-attention CPU path (see attention()).
// Threading: pure functions on caller buffers; attention runs on `pool`.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "base/thread_pool.h"

namespace minfer::cpu {

// y[r][i] = x[r][i] / rms(x[r]) * weight[i]; weight may be null (no multiply).
void rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps,
              float* y);

// Per-head norm (Qwen3/Gemma3 q/k norms): x is [n_tokens][n_heads * head_dim],
// each head_dim chunk is normalized on its own with the shared weight[head_dim].
void rms_norm_heads(const float* x, const float* weight, int64_t n_tokens, int64_t n_heads,
                    int64_t head_dim, float eps, float* y);

enum class RopeMode {
  kNormal,  // rotates adjacent pairs (x[2i], x[2i+1])
  kNeox,    // rotates (x[i], x[i + n_rot/2])
};

// YaRN's per-pair blend and magnitude scale: graph::RopeMeta's fields, as
// graph/yarn.h computes them. ext_factor 0 is plain RoPE (the others ignored).
// Else pair i's angle is theta_interp * (1 - mix) + theta_extrap * mix with
// theta_interp = freq_scale * theta_extrap, mix = ramp(i) * ext_factor,
// ramp(i) = 1 - clamp((i - corr_low) / max(0.001, corr_high - corr_low), 0, 1),
// and cos/sin are multiplied by mscale (the total magnitude scale).
struct RopeYarn {
  float ext_factor = 0.0f;
  float corr_low = 0.0f, corr_high = 0.0f;
  float mscale = 1.0f;
};

// x, y: [n_tokens][n_heads * head_dim]; positions: [n_tokens]; freq_factors
// (nullable): [n_rot / 2]. Errors: n_rot odd, non-positive or > head_dim,
// negative sizes, non-positive freq_base.
Status rope(const float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t n_rot,
            const int32_t* positions, float freq_base, float freq_scale, const float* freq_factors,
            RopeMode mode, float* y, const RopeYarn& yarn = {});

void silu(const float* x, int64_t n, float* y);
void gelu(const float* x, int64_t n, float* y);
// out = act(gate) * up; out may alias gate or up.
void swiglu(const float* gate, const float* up, int64_t n, float* out);
void geglu(const float* gate, const float* up, int64_t n, float* out);
// gpt-oss's clamped GLU (graph::GluMeta); out may alias gate or up.
void swiglu_oai(const float* gate, const float* up, int64_t n, float alpha, float limit,
                float* out);
void add(const float* a, const float* b, int64_t n, float* y);
void mul(const float* a, const float* b, int64_t n, float* y);
void scale(const float* x, int64_t n, float s, float* y);
// Row-wise softmax of x * scale over rows of n elements.
void softmax(const float* x, int64_t n_rows, int64_t n, float scale, float* y);

// Element type of KV cache rows. kQ8_0 rows are ggml Q8_0 blocks (32 values,
// an f16 scale d = amax/127 and int8 q = round(x/d)); head_dim must then be a
// multiple of 32 so that no block straddles two heads.
enum class KvType { kF32, kF16, kQ8_0 };

// Bytes of n elements of `type` (n a multiple of 32 for kQ8_0).
size_t kv_bytes(KvType type, int64_t n);

struct AttentionShape {
  int64_t n_tokens = 0;   // queries
  int64_t n_kv = 0;       // cached keys/values; key j sits at position j
  int64_t n_head = 0;     // query heads
  int64_t n_head_kv = 0;  // key/value heads; must divide n_head
  int64_t head_dim = 0;
  float scale = 1.0f;          // applied to q.k, usually 1/sqrt(head_dim)
  int64_t sliding_window = 0;  // 0: none; else key j is visible to a query at
                               // position p only if p - j < sliding_window
  // Optional (tiled path only): the batch's own keys and values in f32
  // ([n_batch][n_head_kv * head_dim], position batch_first + row). Keys at
  // positions >= batch_first are read from here instead of the cache, so a
  // prompt attends to itself at full precision with an f32 or f16 cache
  // (llama.cpp's prompt logits do not change between those either;
  // docs/PARITY.md).
  const float* batch_k = nullptr;
  const float* batch_v = nullptr;
  int64_t batch_first = 0;
  // Compute as llama.cpp's per-row CPU flash attention does (used there for
  // batches of fewer than 64 queries, i.e. decoding, and for every batch when
  // the cache is quantized or K and V types differ): every key read from the
  // cache (batch_k/batch_v ignored), the query converted to K's dot type.
  bool per_row = false;
  // Optional: a paged cache of many sequences. Query t belongs to page-table
  // row seq_slots[t]; its position j lives in cache row
  // page_table[row * max_pages + j / page_size] * page_size + j % page_size
  // (instead of row j). n_kv is then the number of positions, not rows.
  const int32_t* seq_slots = nullptr;
  const int32_t* page_table = nullptr;
  int64_t page_size = 0;
  int64_t max_pages = 0;
  // Optional: one f32 logit per query head ([n_head]) that joins each row's
  // softmax denominator as a key without a value (unscaled), so the weights
  // sum to less than 1. Null: no sink (and no change to the results).
  const float* sinks = nullptr;
};

// Causal multi-head attention over a KV cache, as llama.cpp's CPU flash
// attention computes it:
//   q: [n_tokens][n_head * head_dim] f32; k_cache: [n_kv][n_head_kv *
//   head_dim] of k_type, v_cache likewise of v_type; positions: [n_tokens];
//   out: [n_tokens][n_head * head_dim] f32 (must not alias q). Query head h
//   reads kv head h / (n_head / n_head_kv). Key j is visible to a query at
//   position p iff j <= p and (sliding_window == 0 or p - j < sliding_window);
//   masked keys are skipped. A query that sees no key gets zeros.
// Numerics: an online softmax in f32 (running max M, sum S, expf); the
// weighted V sum is divided by S at the end. A sink s (shape.sinks[h]) is
// folded in once after the key loop, in f32 on the f32 V sum: if s > M the
// sum and S are rescaled by expf(M - s) and S gains 1, else S gains
// expf(s - M) (llama.cpp's order; docs/GPT_OSS.md "Attention sinks").
// Two paths, as in llama.cpp:
//   - tiled (K and V both f32 or both f16, per_row false): K.Q in f32 (f16
//     rows widened), V accumulated in f32; batch rows may come from batch_k/v.
//   - per-row (per_row, or a q8_0 / mixed-type cache): the query converted
//     to K's dot type (f32; f16-rounded for f16; Q8_0-quantized for q8_0,
//     then the integer Q8_0 dot), and the V sum kept in f16 for an f16 V,
//     in f32 otherwise (q8_0 V rows dequantized to f32 as they are added);
//     an f16 sum is widened to f32 before the sink's rescale.
// Errors: non-positive head counts or head_dim, n_head not a multiple of
// n_head_kv, negative n_tokens/n_kv/sliding_window, null buffers, head_dim not
// a multiple of 32 with a q8_0 cache.
Status attention(const float* q, const void* k_cache, KvType k_type, const void* v_cache,
                 KvType v_type, const int32_t* positions, const AttentionShape& shape, float* out,
                 ThreadPool& pool);

}  // namespace minfer::cpu
