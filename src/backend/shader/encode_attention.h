// Encoders of the attention family: RoPE, the KV-cache store and attention
// over the cache, with the semantics of the CPU backend (backend/cpu/ops.h:
// rope, KvType, attention; cpu_kernels.cpp: run_kv_store, paged_view).
//
// KV cache layout (each of the K and V regions, types independent): n_ctx
// rows of n_head_kv * head_dim elements, F32, F16 or Q8_0 (34-byte ggml
// blocks, d = amax / 127 as f16, q = roundf(x / d); head_dim % 32 == 0).
// Non-paged, token t's row is positions[t]; paged (page_size > 0), kv_store
// writes token t to row cells[t] and attention reads position j of query t's
// sequence from row page_table[seq_slots[t] * max_pages + j / page_size] *
// page_size + j % page_size.
//
// Contract (as encoders.h): shapes are checked and refused, not absorbed
// (invalid_argument naming the op, the value and the limit; unimplemented for
// a cache type with no kernel); each binding must hold what the shape says.
// Indices the host cannot see (positions, cells, slots, page entries) are
// checked by the kernels: a bad one is skipped (that row is not stored; a
// query with a bad position or slot keeps its output as it was; keys on a
// bad page are left out of the softmax) and reported in `err` (device_errors.h's
// MINFER_ERR_* words, bound with access `atomic`; MINFER_ERR_WORDS u32 words,
// zeroed by the caller, read after the wait). Nothing runs until the
// recorder's submit_and_wait(). Threading: as the Recorder.
//
// Numerics: rope is the CPU's theta recurrence with theta_scale from the
// host's powf (and YaRN's blend in the CPU's float steps), the angle reduced
// to [-pi, pi] before the device's sin/cos (max abs diff 4.8e-7 from
// cpu::rope on lavapipe, positions < 4096).
// kv_store is bit-exact for F32 and F16 and follows the reference Q8_0
// quantizer (its f32 d and roundf, divisions made exact in the kernel); an
// element at a rounding tie may differ by one code (none seen on lavapipe).
// attention scores q.k in f32 (Q8_0 keys dequantized, not the CPU's
// quantized query), with an online softmax per subgroup merged once per
// query, and the V sums in f32; how the keys are split depends only on the
// query's own position (and window) and the device's subgroup size, never on
// the other tokens of the batch, so a query's output is bit-identical in any
// batch.
//
// lavapipe (docs/VULKAN.md rule 7): attention runs at most
// attention_loop_bound() loop iterations per invocation (2589 at head_dim
// 256, Q8_0 K, 4096 keys on subgroups of 8); encode_attention refuses, on a
// CPU device, shapes whose worst case passes 60000.
#pragma once

#include <cstdint>
#include <string_view>

#include "backend/shader/device.h"
#include "backend/shader/recorder.h"
#include "base/status.h"
#include "quant/tensor_type.h"

namespace minfer::shader {

struct RopeShape {
  int64_t n_tokens = 0, n_heads = 0, head_dim = 0, n_rot = 0;
  bool neox = false;  // pairs (i, i + n_rot/2) instead of (2i, 2i + 1)
  float freq_base = 10000.0f, freq_scale = 1.0f;
  // YaRN, as graph::RopeMeta carries it (graph/yarn.h): ext_factor 0 is
  // plain RoPE, bit for bit; else pair i's angle blends between freq_scale *
  // theta and theta by its ramp over [corr_low, corr_high], and cos and sin
  // are multiplied by mscale (the CPU's rope_cache_f32).
  float ext_factor = 0.0f, corr_low = 0.0f, corr_high = 0.0f, mscale = 1.0f;
};

// x [n_tokens][n_heads * head_dim] f32 rotated into out (out may be x: in
// place, but not partly overlap it); positions i32 [n_tokens]; freq_factors:
// a null buffer (BufferRange{}) or f32 [n_rot / 2], dividing each pair's
// angle. Dims past n_rot are copied. Refused: n_rot odd, <= 0 or > head_dim,
// freq_base <= 0, a YaRN field not finite, short bindings.
Status encode_rope(Recorder& rec, const BufferRange& x, const BufferRange& positions,
                   const BufferRange& freq_factors, const BufferRange& out, const RopeShape& shape,
                   std::string_view note = {});

struct KvStoreShape {
  int64_t n_tokens = 0, n_head_kv = 0, head_dim = 0, n_ctx = 0;
  quant::TensorType k_type = quant::TensorType::F32, v_type = quant::TensorType::F32;
};

// k, v [n_tokens][n_head_kv * head_dim] f32 into cache rows rows[t] (i32
// [n_tokens]: positions, or cells of a paged cache) of k_cache and v_cache;
// a row outside [0, n_ctx) is skipped and reported as MINFER_ERR_CACHE_ROW
// (value: the row, bound: n_ctx). Tokens sharing a row leave it unspecified
// (their words may mix; the CPU keeps the last): callers give distinct rows.
Status encode_kv_store(Recorder& rec, const BufferRange& k, const BufferRange& v,
                       const BufferRange& rows, const BufferRange& k_cache,
                       const BufferRange& v_cache, const BufferRange& err,
                       const KvStoreShape& shape, std::string_view note = {});

// RoPE and the KV store of packed rows in one dispatch (a decode FusedQKV's
// tail): row t of `packed` (f32, row_stride floats apart, at least n_head +
// 2 n_head_kv heads) is [q heads | k heads | v heads]; the q and k heads are
// rotated in place as encode_rope would, then k and v go to cache row
// positions[t] as encode_kv_store would (the same bits); elements past n_rot
// are left as they are. A position outside [0, n_ctx) stores nothing and is
// reported as MINFER_ERR_CACHE_ROW. Refused: what encode_rope and
// encode_kv_store refuse, a row_stride shorter than the heads.
struct RopeStoreShape {
  RopeShape rope;  // n_heads: the q heads (n_head)
  int64_t n_head_kv = 0, row_stride = 0, n_ctx = 0;
  quant::TensorType k_type = quant::TensorType::F32, v_type = quant::TensorType::F32;
};
Status encode_rope_store(Recorder& rec, const BufferRange& packed, const BufferRange& positions,
                         const BufferRange& freq_factors, const BufferRange& k_cache,
                         const BufferRange& v_cache, const BufferRange& err,
                         const RopeStoreShape& shape, std::string_view note = {});

struct AttentionShape {
  int64_t n_tokens = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ctx = 0;
  float scale = 1.0f;          // multiplies q.k, usually 1 / sqrt(head_dim)
  int64_t sliding_window = 0;  // 0: none; else key j visible iff pos - j < window
  quant::TensorType k_type = quant::TensorType::F32, v_type = quant::TensorType::F32;
  int64_t page_size = 0, max_pages = 0, n_slots = 0;  // page_size 0: not paged
};

// The attention kernel for a cache of (k_type, v_type) on `device`, or
// unimplemented naming the types (only F32, F16, Q8_0) or why the device
// has no pipeline for it.
Result<uint32_t> attention_kernel(const Device& device, quant::TensorType k_type,
                                  quant::TensorType v_type);

// The most loop iterations one invocation of attention.comp runs for
// `shape` (every query at its furthest position) on subgroups of
// `subgroup_size`: what lavapipe's cap is compared with.
uint64_t attention_loop_bound(const AttentionShape& shape, uint32_t subgroup_size);

// out[t][h] = softmax over the visible keys of scale * q[t][h] . K[j][h / g]
// times V[j][h / g] (g = n_head / n_head_kv); q [n_tokens][n_head *
// head_dim] f32 -> out (same shape, must not overlap q); positions i32
// [n_tokens]; query t sees j <= positions[t] (and positions[t] - j <
// sliding_window when that is > 0). seq_slots i32 [n_tokens] and page_table
// i32 [n_slots][max_pages] only when page_size > 0 (null BufferRange{}
// otherwise; given without paging they are refused). A position, slot or
// page outside the cache or tables (n_ctx / page_size pages) is skipped and
// reported as MINFER_ERR_POSITION. head_dim: even, <= 256 (a multiple of 32
// with a Q8_0 region; <= 32 x the subgroup size on a device whose subgroups
// have fewer than 8 lanes, unimplemented past that). sinks: a null buffer
// (BufferRange{}: none) or f32 [n_head], one logit per query head that joins
// the softmax's denominator only (docs/GPT_OSS.md, "Attention sinks"): the
// weights then sum to less than 1, and the fold happens once per query after
// its keys, in the CPU's order.
Status encode_attention(Recorder& rec, const BufferRange& q, const BufferRange& positions,
                        const BufferRange& seq_slots, const BufferRange& page_table,
                        const BufferRange& k_cache, const BufferRange& v_cache,
                        const BufferRange& sinks, const BufferRange& out, const BufferRange& err,
                        const AttentionShape& shape, std::string_view note = {});

}  // namespace minfer::shader
