// Push-constant structs of the attention kernels: part of kernel_args.h (include
// that, not this), under its rules: 4-byte scalar members only, every offset
// and the size pinned by static_asserts on the C++ side.
//   rope.comp      RopeArgs       rotary embedding, normal or NeoX pairs
//   kv_store.comp  KvStoreArgs    K/V rows f32 -> cache rows of F32/F16/Q8_0
//   rope_store.comp RopeStoreArgs RoPE + KV store of packed q|k|v rows (decode)
//   attention.comp AttentionArgs  causal attention over the cache (paged or not)
//   attention_tiled.comp AttentionTiledArgs  the same for blocks of queries (prefill)
#ifndef MINFER_BACKEND_SHADER_KERNEL_ARGS_ATTENTION_H_
#define MINFER_BACKEND_SHADER_KERNEL_ARGS_ATTENTION_H_

// Cache element types as kv_store.comp reads them from KvStoreArgs.
#define MINFER_KV_F32 0u
#define MINFER_KV_F16 1u
#define MINFER_KV_Q8_0 2u

// attention.comp's geometry. Each subgroup of its MINFER_ATTENTION_WG
// invocations is an independent worker over its own chunks of keys (one key
// per lane while scoring), with its own online softmax; the workgroup merges
// the subgroups' states once, at the end, through MINFER_ATTENTION_COMBINE
// floats of shared memory. head_dim <= MINFER_ATTENTION_MAX_HEAD_DIM; in the
// V sums a lane holds at most MINFER_ATTENTION_MAX_QUADS groups of four
// output dims (head_dim / 4 over subgroups of >= 8 lanes) and has the V rows
// of MINFER_ATTENTION_BATCH keys in flight at once.
#define MINFER_ATTENTION_WG 256
#define MINFER_ATTENTION_MAX_HEAD_DIM 256
#define MINFER_ATTENTION_MAX_QUADS 8
#define MINFER_ATTENTION_BATCH 8
#define MINFER_ATTENTION_COMBINE 2048

// rope.comp: x [n_tokens][n_heads * head_dim] f32 -> out (may alias x). One
// invocation per slot of a head: slot i < n_rot/2 rotates pair i, slot
// n_rot/2 + k copies element n_rot + k. theta_scale = powf(freq_base,
// -2/n_rot), computed on the host as the CPU does. YaRN (graph/yarn.h):
// ext_factor 0 is plain RoPE (the other three not read); else pair i's
// angle blends by its ramp between corr_low and corr_high, and cos and sin
// are multiplied by mscale (rope_pair.glsl).
struct RopeArgs {
  u32 n_tokens;
  u32 n_heads;
  u32 head_dim;
  u32 n_rot;
  u32 neox;              // 0: pairs (2i, 2i+1); 1: pairs (i, i + n_rot/2)
  u32 has_freq_factors;  // 0: binding 2 is bound but not read
  f32 freq_scale;
  f32 theta_scale;
  f32 ext_factor;
  f32 corr_low;
  f32 corr_high;
  f32 mscale;
};

// kv_store.comp: row t of k and v ([n_tokens][n_head_kv * head_dim] f32)
// into cache row rows[t] of the K and V regions; one workgroup per token.
struct KvStoreArgs {
  u32 n_tokens;
  u32 row_len;  // n_head_kv * head_dim (a multiple of 32 for a Q8_0 type)
  u32 n_ctx;    // cache rows
  u32 k_type;   // MINFER_KV_*
  u32 v_type;
};

// rope_store.comp: packed rows [q | k | v] (row_stride floats apart) of
// n_tokens tokens; one workgroup of 64 per (token, q or k head), folded over
// x and y. Rope fields (YaRN's too) as RopeArgs; the store's as KvStoreArgs.
struct RopeStoreArgs {
  u32 n_tokens;
  u32 n_head;
  u32 n_head_kv;
  u32 head_dim;
  u32 row_stride;
  u32 n_rot;
  u32 neox;
  u32 has_freq_factors;
  f32 freq_scale;
  f32 theta_scale;
  u32 n_ctx;
  u32 k_type;
  u32 v_type;
  f32 ext_factor;
  f32 corr_low;
  f32 corr_high;
  f32 mscale;
};

// attention.comp: one workgroup per (query token, query head), folded over x
// and y; K/V element types are the variant's. has_sinks: 1 when binding 8
// holds one f32 sink logit per query head (gpt-oss), folded into the
// softmax's denominator once after the keys (attention_numerics.glsl's
// fold_sink); 0: binding 8 is bound but not read.
struct AttentionArgs {
  u32 n_tokens;
  u32 n_head;
  u32 n_head_kv;
  u32 head_dim;
  u32 n_ctx;  // cache rows
  f32 scale;
  u32 sliding_window;  // 0: none
  u32 page_size;       // 0: not paged (bindings 2 and 3 bound, not read)
  u32 max_pages;
  u32 n_slots;
  u32 has_sinks;
};

// attention_tiled.comp's geometry (encode_attention_tiled.cpp derives the
// rest per head_dim): MINFER_ATTENTION_TILED_WG invocations; a block of at
// most MINFER_ATTENTION_TILED_MAX_ROWS query rows and tiles of at most
// MINFER_ATTENTION_TILED_MAX_KEYS keys, with rows x ceil(head_dim / 4) and
// keys x ceil(head_dim / 4) each at most MINFER_ATTENTION_TILED_TILE_QUADS
// groups of four dims (what its shared memory holds: < 32 KiB in all).
#define MINFER_ATTENTION_TILED_WG 128
#define MINFER_ATTENTION_TILED_MAX_ROWS 32
#define MINFER_ATTENTION_TILED_MAX_KEYS 32
#define MINFER_ATTENTION_TILED_TILE_QUADS 512
#define MINFER_ATTENTION_TILED_MAX_ROWS_PER_INVOCATION 4
#define MINFER_ATTENTION_TILED_MAX_KEYS_PER_PART 8

// attention_tiled.comp: one workgroup per (block of block_rows query rows,
// kv head), folded over x and y; a query row is a (token, q head of the kv
// head's group) pair, rows numbered token-major (row = t * group + h %
// group). The first ten members and has_sinks mean what AttentionArgs' do.
struct AttentionTiledArgs {
  u32 n_tokens;
  u32 n_head;
  u32 n_head_kv;
  u32 head_dim;
  u32 n_ctx;
  f32 scale;
  u32 sliding_window;
  u32 page_size;
  u32 max_pages;
  u32 n_slots;
  u32 row_blocks;           // blocks of rows per kv head: ceil(n_tokens * group / block_rows)
  u32 block_rows;           // rows_per_invocation x the row groups of the V sums (<= 32)
  u32 rows_per_invocation;  // 1, 2 or 4: output rows per invocation in the V sums
  u32 block_keys;           // keys per tile: a power of two, 8..32
  u32 dot_splits;           // invocations sharing one score block's dot (split by dims)
  u32 split_quads;          // groups of four dims per split
  u32 weigh_parts;          // invocations per row in the softmax step (a power of two)
  u32 has_sinks;
};

#ifdef __cplusplus
static_assert(offsetof(RopeArgs, n_heads) == 4 && offsetof(RopeArgs, head_dim) == 8 &&
              offsetof(RopeArgs, n_rot) == 12 && offsetof(RopeArgs, neox) == 16 &&
              offsetof(RopeArgs, has_freq_factors) == 20 && offsetof(RopeArgs, freq_scale) == 24 &&
              offsetof(RopeArgs, theta_scale) == 28 && offsetof(RopeArgs, ext_factor) == 32 &&
              offsetof(RopeArgs, corr_low) == 36 && offsetof(RopeArgs, corr_high) == 40 &&
              offsetof(RopeArgs, mscale) == 44 && sizeof(RopeArgs) == 48);
static_assert(offsetof(KvStoreArgs, row_len) == 4 && offsetof(KvStoreArgs, n_ctx) == 8 &&
              offsetof(KvStoreArgs, k_type) == 12 && offsetof(KvStoreArgs, v_type) == 16 &&
              sizeof(KvStoreArgs) == 20);
static_assert(offsetof(RopeStoreArgs, n_head) == 4 && offsetof(RopeStoreArgs, n_head_kv) == 8 &&
              offsetof(RopeStoreArgs, head_dim) == 12 &&
              offsetof(RopeStoreArgs, row_stride) == 16 && offsetof(RopeStoreArgs, n_rot) == 20 &&
              offsetof(RopeStoreArgs, neox) == 24 &&
              offsetof(RopeStoreArgs, has_freq_factors) == 28 &&
              offsetof(RopeStoreArgs, freq_scale) == 32 &&
              offsetof(RopeStoreArgs, theta_scale) == 36 && offsetof(RopeStoreArgs, n_ctx) == 40 &&
              offsetof(RopeStoreArgs, k_type) == 44 && offsetof(RopeStoreArgs, v_type) == 48 &&
              offsetof(RopeStoreArgs, ext_factor) == 52 &&
              offsetof(RopeStoreArgs, corr_low) == 56 && offsetof(RopeStoreArgs, corr_high) == 60 &&
              offsetof(RopeStoreArgs, mscale) == 64 && sizeof(RopeStoreArgs) == 68);
static_assert(offsetof(AttentionArgs, n_head) == 4 && offsetof(AttentionArgs, n_head_kv) == 8 &&
              offsetof(AttentionArgs, head_dim) == 12 && offsetof(AttentionArgs, n_ctx) == 16 &&
              offsetof(AttentionArgs, scale) == 20 &&
              offsetof(AttentionArgs, sliding_window) == 24 &&
              offsetof(AttentionArgs, page_size) == 28 &&
              offsetof(AttentionArgs, max_pages) == 32 && offsetof(AttentionArgs, n_slots) == 36 &&
              offsetof(AttentionArgs, has_sinks) == 40 && sizeof(AttentionArgs) == 44);
static_assert(offsetof(AttentionTiledArgs, n_head) == 4 &&
              offsetof(AttentionTiledArgs, n_head_kv) == 8 &&
              offsetof(AttentionTiledArgs, head_dim) == 12 &&
              offsetof(AttentionTiledArgs, n_ctx) == 16 &&
              offsetof(AttentionTiledArgs, scale) == 20 &&
              offsetof(AttentionTiledArgs, sliding_window) == 24 &&
              offsetof(AttentionTiledArgs, page_size) == 28 &&
              offsetof(AttentionTiledArgs, max_pages) == 32 &&
              offsetof(AttentionTiledArgs, n_slots) == 36 &&
              offsetof(AttentionTiledArgs, row_blocks) == 40 &&
              offsetof(AttentionTiledArgs, block_rows) == 44 &&
              offsetof(AttentionTiledArgs, rows_per_invocation) == 48 &&
              offsetof(AttentionTiledArgs, block_keys) == 52 &&
              offsetof(AttentionTiledArgs, dot_splits) == 56 &&
              offsetof(AttentionTiledArgs, split_quads) == 60 &&
              offsetof(AttentionTiledArgs, weigh_parts) == 64 &&
              offsetof(AttentionTiledArgs, has_sinks) == 68 && sizeof(AttentionTiledArgs) == 72);
#endif

#endif  // MINFER_BACKEND_SHADER_KERNEL_ARGS_ATTENTION_H_
