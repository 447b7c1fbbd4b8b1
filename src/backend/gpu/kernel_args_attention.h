// Push-constant structs of the attention kernels: part of kernel_args.h (include
// that, not this), under its rules: 4-byte scalar members only, every offset
// and the size pinned by static_asserts on the C++ side.
//   rope.comp      RopeArgs       rotary embedding, normal or NeoX pairs
//   kv_store.comp  KvStoreArgs    K/V rows f32 -> cache rows of F32/F16/Q8_0
//   attention.comp AttentionArgs  causal attention over the cache (paged or not)
#ifndef MINFER_BACKEND_GPU_KERNEL_ARGS_ATTENTION_H_
#define MINFER_BACKEND_GPU_KERNEL_ARGS_ATTENTION_H_

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
// -2/n_rot), computed on the host as the CPU does.
struct RopeArgs {
  u32 n_tokens;
  u32 n_heads;
  u32 head_dim;
  u32 n_rot;
  u32 neox;              // 0: pairs (2i, 2i+1); 1: pairs (i, i + n_rot/2)
  u32 has_freq_factors;  // 0: binding 2 is bound but not read
  f32 freq_scale;
  f32 theta_scale;
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

// attention.comp: one workgroup per (query token, query head), folded over x
// and y; K/V element types are the variant's.
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
};

#ifdef __cplusplus
static_assert(offsetof(RopeArgs, n_heads) == 4 && offsetof(RopeArgs, head_dim) == 8 &&
              offsetof(RopeArgs, n_rot) == 12 && offsetof(RopeArgs, neox) == 16 &&
              offsetof(RopeArgs, has_freq_factors) == 20 && offsetof(RopeArgs, freq_scale) == 24 &&
              offsetof(RopeArgs, theta_scale) == 28 && sizeof(RopeArgs) == 32);
static_assert(offsetof(KvStoreArgs, row_len) == 4 && offsetof(KvStoreArgs, n_ctx) == 8 &&
              offsetof(KvStoreArgs, k_type) == 12 && offsetof(KvStoreArgs, v_type) == 16 &&
              sizeof(KvStoreArgs) == 20);
static_assert(offsetof(AttentionArgs, n_head) == 4 && offsetof(AttentionArgs, n_head_kv) == 8 &&
              offsetof(AttentionArgs, head_dim) == 12 && offsetof(AttentionArgs, n_ctx) == 16 &&
              offsetof(AttentionArgs, scale) == 20 &&
              offsetof(AttentionArgs, sliding_window) == 24 &&
              offsetof(AttentionArgs, page_size) == 28 &&
              offsetof(AttentionArgs, max_pages) == 32 && offsetof(AttentionArgs, n_slots) == 36 &&
              sizeof(AttentionArgs) == 40);
#endif

#endif  // MINFER_BACKEND_GPU_KERNEL_ARGS_ATTENTION_H_
