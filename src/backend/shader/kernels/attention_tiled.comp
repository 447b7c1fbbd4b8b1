// Causal multi-head attention over the KV cache for blocks of queries
// (prefill): the semantics of attention.comp (query t, head h reads kv head
// h / group, keys j in [lo, hi] of its own sequence, hi = positions[t], lo =
// hi + 1 - sliding_window or 0; paged rows through page_table[seq_slots[t]];
// a bad position, slot or page skipped and reported as MINFER_ERR_POSITION;
// a query that sees no key gets zeros; with has_sinks, head h's sink logit
// sinks[h] folded into the row's denominator after its last tile), with
// each K/V row read once per block of queries instead of once per (query,
// head).
//
// One workgroup of MINFER_ATTENTION_TILED_WG invocations per (block of
// block_rows query rows, kv head), folded over x and y, the blocks of the
// latest tokens (the most keys) first. A row is a (token, q head of the kv
// head's group) pair, numbered token-major, so the group's heads share every
// K/V tile. The block's queries (pre-scaled) sit in shared memory as f32;
// the keys of the union of its rows' ranges go in tiles of block_keys:
//   1. the tile's K and V rows, fetched into registers during the previous
//      tile, are decoded to f32 into shared memory (keys past the range or
//      on a bad page: zeros, and marked invisible);
//   2. scores: each invocation dots 4 rows x 2 keys over its split of the
//      dims (dot_splits invocations per 4 x 2 block, so that every head_dim
//      keeps the workgroup busy), partial sums to shared memory;
//   3. weights: weigh_parts invocations per row add the partials of their
//      keys, mask the keys the row does not see and exchange their maxima
//      (one more barrier); each keeps the row's max m and its part's sum l
//      in registers: p = exp(s - m_new), corr = exp(m - m_new);
//   4. V sums: invocation (row group, quad) holds rows_per_invocation rows x
//      4 dims of the output in f32, scaled by corr and added p x V.
// A barrier follows each step. Paged blocks may mix sequences: the block's
// rows are taken one sequence (slot) at a time, each pass walking the union
// of that slot's rows' ranges through its page table (one pass when not
// paged). The sums run in an order fixed by the shape alone, but another
// than attention.comp's: results differ from it in the last bits (use it
// where a node need not be batch-invariant).
//
// Shared memory (< 32 KiB, lavapipe's limit): queries [row][quad] and keys
// [key][quad] with a pitch of quads + 1 vec4 (the score step's rows and
// keys fall on different banks), values [key][quad], and the scores
// [split][key][row] (vec4 over 4 rows), whose split 0 then holds the weights.
// No subgroup operation: correct for any subgroup size.
//
// Loop iterations per invocation (docs/VULKAN.md rule 7): counted by
// encode_attention_tiled.cpp's attention_tiled_loop_bound.
#version 450
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "kernel_args.h"
#define MINFER_ERR_BINDING 7
#include "errors.glsl"
#include "attention_numerics.glsl"

layout(push_constant) uniform Push { AttentionTiledArgs args; };
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer Positions { int positions[]; };
layout(std430, binding = 2) readonly buffer Slots { int seq_slots[]; };
layout(std430, binding = 3) readonly buffer Pages { int page_table[]; };
layout(std430, binding = 4) readonly buffer KCache { uint k_words[]; };
layout(std430, binding = 5) readonly buffer VCache { uint v_words[]; };
layout(std430, binding = 6) writeonly buffer Out { float out_values[]; };
layout(std430, binding = 8) readonly buffer Sinks { float sinks[]; };

#if WG_X * WG_Y * WG_Z != MINFER_ATTENTION_TILED_WG
#error "attention_tiled.comp: the invocation mapping assumes MINFER_ATTENTION_TILED_WG invocations"
#endif

const uint kWg = MINFER_ATTENTION_TILED_WG;
const uint kMaxRows = MINFER_ATTENTION_TILED_MAX_ROWS;
const uint kMaxKeys = MINFER_ATTENTION_TILED_MAX_KEYS;
const uint kTileQuads = MINFER_ATTENTION_TILED_TILE_QUADS;
const uint kMaxRowsPerInv = MINFER_ATTENTION_TILED_MAX_ROWS_PER_INVOCATION;
const uint kUnits = kTileQuads / kWg;  // quads of a tile's K (and V) per invocation
const uint kScoreVecs = 2u * kWg;      // 8 partial scores per invocation, as vec4
const uint kMaxKeysPerPart = MINFER_ATTENTION_TILED_MAX_KEYS_PER_PART;
const float kMasked = -3.0e38;

#if defined(K_F32)
const uint kKType = MINFER_KV_F32;
#elif defined(K_F16)
const uint kKType = MINFER_KV_F16;
#else
const uint kKType = MINFER_KV_Q8_0;
#endif
#if defined(V_F32)
const uint kVType = MINFER_KV_F32;
#elif defined(V_F16)
const uint kVType = MINFER_KV_F16;
#else
const uint kVType = MINFER_KV_Q8_0;
#endif

shared vec4 q_s[kTileQuads + kMaxRows];  // [row][quad], pitch quads + 1, times scale
shared vec4 k_s[kTileQuads + kMaxKeys];  // [key][quad], pitch quads + 1
shared vec4 v_s[kTileQuads];             // [key][quad]
shared vec4 s_s[kScoreVecs];             // [split][key][row / 4]: scores, then weights
shared int row_slot_s[kMaxRows];         // per row: its slot (0 unpaged); -1: no query
shared uint row_lo_s[kMaxRows];          // and its visible keys [lo, hi]
shared uint row_hi_s[kMaxRows];
shared float corr_s[kMaxRows];   // per row: the tile's rescaling of its V sums, at the end its max
shared float max_s[kWg];         // per (part, row): the max of its scores, or at the end its sum
shared uint key_ok_s[kMaxKeys];  // per key of the tile: 1 when read (in range, page ok)

// The tile being fetched: each invocation's kUnits quads of K and V as
// loaded (decoded in store_tile, so the loads stay in flight over a tile's
// arithmetic), and whether each quad's key was read.
uvec4 k_raw[kUnits];
uvec4 v_raw[kUnits];
bool unit_read[kUnits];

uint quads() {
  return (args.head_dim + 3u) / 4u;
}
// vec4 row groups of the score layout (rows rounded up to 4).
uint row_vecs() {
  return (args.block_rows + 3u) / 4u;
}

// The words of one quad of the cache (element e of the region, n = 4 or 2
// dims: the last quad of a head_dim % 4 == 2): F32 4 words, F16 2; Q8_0 the
// word(s) holding the 4 codes (e % 4 == 0), the scale's word and in .w
// where both sit in their words (blocks are 34 bytes: 2-byte aligned).
#define LOAD_QUAD(WORDS, TYPE, e, n, OUT)                                 \
  if (TYPE == MINFER_KV_F32) {                                            \
    OUT.x = WORDS[e];                                                     \
    OUT.y = WORDS[e + 1u];                                                \
    if (n == 4u) {                                                        \
      OUT.z = WORDS[e + 2u];                                              \
      OUT.w = WORDS[e + 3u];                                              \
    }                                                                     \
  } else if (TYPE == MINFER_KV_F16) {                                     \
    OUT.x = WORDS[e >> 1];                                                \
    if (n == 4u) OUT.y = WORDS[(e >> 1) + 1u];                            \
  } else {                                                                \
    const uint block_byte = (e / 32u) * 34u;                              \
    const uint code_byte = block_byte + 2u + e % 32u;                     \
    OUT.x = WORDS[code_byte >> 2];                                        \
    if ((code_byte & 2u) != 0u) OUT.y = WORDS[(code_byte >> 2) + 1u];     \
    OUT.z = WORDS[block_byte >> 2];                                       \
    OUT.w = ((code_byte >> 1) & 1u) | (block_byte & 2u);                  \
  }

// The f32 values of a quad loaded by LOAD_QUAD (all-zero words: zeros).
vec4 decode_quad(uint type, uvec4 w) {
  if (type == MINFER_KV_F32) return uintBitsToFloat(w);
  if (type == MINFER_KV_F16) return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
  const int codes = int((w.w & 1u) != 0u ? (w.x >> 16) | (w.y << 16) : w.x);
  const float d = unpackHalf2x16((w.w & 2u) != 0u ? w.z >> 16 : w.z).x;
  return d * vec4(float(bitfieldExtract(codes, 0, 8)), float(bitfieldExtract(codes, 8, 8)),
                  float(bitfieldExtract(codes, 16, 8)), float(bitfieldExtract(codes, 24, 8)));
}

// The cache row of position j of the sequence in `slot`, or -1 (a bad
// page, reported).
int cache_row(uint j, uint slot) {
  if (args.page_size == 0u) return int(j);
  const int page = page_table[slot * args.max_pages + j / args.page_size];
  const uint n_pages = args.n_ctx / args.page_size;
  if (page < 0 || uint(page) >= n_pages) {
    report_error(MINFER_ERR_POSITION, uint(page), n_pages);
    return -1;
  }
  return page * int(args.page_size) + int(j % args.page_size);
}

// Query row `row` (token row / group): its slot (0 when not paged) and
// visible keys [lo, hi], or slot -1 past the batch or (reported) for a
// position or slot outside the cache or the tables.
void check_row(uint row, uint group, out int slot, out uint lo, out uint hi) {
  slot = -1;
  lo = 0u;
  hi = 0u;
  if (row >= args.n_tokens * group) return;
  const uint t = row / group;
  const bool paged = args.page_size != 0u;
  const uint positions_max = paged ? args.max_pages * args.page_size : args.n_ctx;
  const int pos = positions[t];
  int s = 0;
  if (pos < 0 || uint(pos) >= positions_max) {
    report_error(MINFER_ERR_POSITION, uint(pos), positions_max);
    return;
  }
  if (paged) {
    s = seq_slots[t];
    if (s < 0 || uint(s) >= args.n_slots) {
      report_error(MINFER_ERR_POSITION, uint(s), args.n_slots);
      return;
    }
  }
  slot = s;
  hi = uint(pos);
  const uint w = args.sliding_window;
  lo = (w != 0u && hi + 1u > w) ? hi + 1u - w : 0u;
}

// The block's query rows, times scale, into q_s (zeros past the batch and
// for the padding rows up to a multiple of 4).
void load_queries(uint row0, uint kv_head, uint group) {
  const uint nq = quads(), pitch = nq + 1u, hd = args.head_dim;
  const uint padded_rows = row_vecs() * 4u;
  [[unroll]] for (uint u = 0u; u < kUnits; ++u) {
    const uint unit = gl_LocalInvocationIndex + kWg * u;
    const uint r = unit / nq, dq = unit % nq;
    const uint row = row0 + r;
    vec4 v = vec4(0.0);
    if (r < args.block_rows && row < args.n_tokens * group) {
      const uint h = kv_head * group + row % group;
      const uint e = ((row / group) * args.n_head + h) * hd + 4u * dq;
      v.x = q[e];
      v.y = q[e + 1u];
      if (4u * dq + 2u < hd) {
        v.z = q[e + 2u];
        v.w = q[e + 3u];
      }
    }
    if (r < padded_rows) q_s[r * pitch + dq] = args.scale * v;
  }
}

// Loads the K and V quads of this invocation for the tile of keys j0 ..
// j0 + block_keys - 1 (up to hi) of `slot` into k_raw / v_raw.
void fetch_tile(uint j0, uint hi, uint slot, uint head0) {
  const uint nq = quads(), row_len = args.n_head_kv * args.head_dim;
  [[unroll]] for (uint u = 0u; u < kUnits; ++u) {
    const uint unit = gl_LocalInvocationIndex + kWg * u;
    const uint key = unit / nq, dq = unit % nq;
    int row = -1;
    if (key < args.block_keys && j0 + key <= hi) row = cache_row(j0 + key, slot);
    uvec4 kw = uvec4(0u), vw = uvec4(0u);
    if (row >= 0) {
      const uint e = uint(row) * row_len + head0 + 4u * dq;
      const uint n = min(4u, args.head_dim - 4u * dq);
      LOAD_QUAD(k_words, kKType, e, n, kw);
      LOAD_QUAD(v_words, kVType, e, n, vw);
    }
    k_raw[u] = kw;
    v_raw[u] = vw;
    unit_read[u] = row >= 0;
  }
}

// Step 1: the fetched tile, decoded, into k_s, v_s and key_ok_s.
void store_tile() {
  const uint nq = quads(), pitch = nq + 1u;
  [[unroll]] for (uint u = 0u; u < kUnits; ++u) {
    const uint unit = gl_LocalInvocationIndex + kWg * u;
    const uint key = unit / nq, dq = unit % nq;
    if (key < args.block_keys) {
      k_s[key * pitch + dq] = decode_quad(kKType, k_raw[u]);
      v_s[key * nq + dq] = decode_quad(kVType, v_raw[u]);
      if (dq == 0u) key_ok_s[key] = unit_read[u] ? 1u : 0u;
    }
  }
}

// Step 2: rows 4 rg .. 4 rg + 3 against keys kp and kp + block_keys / 2,
// over this invocation's split of the dims, into s_s.
void score_tile() {
  const uint nq = quads(), pitch = nq + 1u, rv = row_vecs();
  const uint half_keys = args.block_keys / 2u;
  const uint n_blocks = half_keys * rv;
  const uint split = gl_LocalInvocationIndex / n_blocks;
  const uint b = gl_LocalInvocationIndex % n_blocks;
  if (split < args.dot_splits) {
    const uint kp = b % half_keys, rg = b / half_keys;
    const uint first = split * args.split_quads, end = min(nq, first + args.split_quads);
    const uint ka = kp * pitch, kb = (kp + half_keys) * pitch, q0 = rg * 4u * pitch;
    vec4 sa = vec4(0.0), sb = vec4(0.0);
    for (uint dq = first; dq < end; ++dq) {
      const vec4 key_a = k_s[ka + dq], key_b = k_s[kb + dq];
      [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        const vec4 qv = q_s[q0 + i * pitch + dq];
        sa[i] += dot(qv, key_a);
        sb[i] += dot(qv, key_b);
      }
    }
    s_s[(split * args.block_keys + kp) * rv + rg] = sa;
    s_s[(split * args.block_keys + kp + half_keys) * rv + rg] = sb;
  }
}

// Step 3a, by invocation (row r, part) = (lid % block_rows, lid /
// block_rows), part < weigh_parts: the row's scores of keys part, part +
// weigh_parts, ... of the tile at j0, summed over the splits into s (masked:
// bit kk of `seen` set where the row sees the key in this pass, `in_pass`
// saying its slot is the pass's); their max into max_s[lid].
void gather_scores(uint j0, bool in_pass, uint lo, uint hi, out float s[kMaxKeysPerPart],
                   out uint seen) {
  const uint rows = args.block_rows, parts = args.weigh_parts, rv = row_vecs();
  const uint r = gl_LocalInvocationIndex % rows, part = gl_LocalInvocationIndex / rows;
  const uint vec = r / 4u, c = r % 4u;
  float m_part = kMasked;
  seen = 0u;
  [[unroll]] for (uint kk = 0u; kk < kMaxKeysPerPart; ++kk) {
    const uint k = part + kk * parts;
    s[kk] = 0.0;
    if (k < args.block_keys) {
      for (uint split = 0u; split < args.dot_splits; ++split) {
        s[kk] += s_s[(split * args.block_keys + k) * rv + vec][c];
      }
      const uint j = j0 + k;
      if (in_pass && key_ok_s[k] != 0u && j >= lo && j <= hi) {
        seen |= 1u << kk;
        m_part = max(m_part, s[kk]);
      }
    }
  }
  max_s[gl_LocalInvocationIndex] = m_part;
}

// Step 3b, by the same invocations: the row's online softmax (max m, this
// part's sum l) advanced by the tile, its weights into split 0 of s_s
// (only this invocation touches them) and corr into corr_s.
void weigh_scores(float s[kMaxKeysPerPart], uint seen, inout float m, inout float l) {
  const uint rows = args.block_rows, parts = args.weigh_parts, rv = row_vecs();
  const uint r = gl_LocalInvocationIndex % rows, part = gl_LocalInvocationIndex / rows;
  float m_tile = kMasked;
  for (uint p = 0u; p < parts; ++p) m_tile = max(m_tile, max_s[p * rows + r]);
  const float m_new = max(m, m_tile);
  const float corr = exp(m - m_new);
  float added = 0.0;
  [[unroll]] for (uint kk = 0u; kk < kMaxKeysPerPart; ++kk) {
    const uint k = part + kk * parts;
    if (k < args.block_keys) {
      const float p = ((seen >> kk) & 1u) != 0u ? exp(s[kk] - m_new) : 0.0;
      s_s[k * rv + r / 4u][r % 4u] = p;
      added += p;
    }
  }
  m = m_new;
  l = l * corr + added;
  if (part == 0u) corr_s[r] = corr;
}

// Step 4: this invocation's rows x 4 dims of the V sums, rescaled and
// advanced by the tile's weights.
void accumulate_tile(inout vec4 acc[kMaxRowsPerInv]) {
  const uint nq = quads(), rv = row_vecs(), rpi = args.rows_per_invocation;
  const uint rg = gl_LocalInvocationIndex / nq, dq = gl_LocalInvocationIndex % nq;
  if (rg * rpi < args.block_rows) {
    const uint r0 = rg * rpi;
    [[unroll]] for (uint i = 0u; i < kMaxRowsPerInv; ++i) {
      if (i < rpi) acc[i] *= corr_s[r0 + i];
    }
    if (rpi == 4u) {  // the rows are one vec4 of weights (r0 / 4 == rg)
      for (uint k = 0u; k < args.block_keys; ++k) {
        const vec4 p = s_s[k * rv + rg];
        const vec4 v = v_s[k * nq + dq];
        acc[0] += p.x * v;
        acc[1] += p.y * v;
        acc[2] += p.z * v;
        acc[3] += p.w * v;
      }
    } else {
      for (uint k = 0u; k < args.block_keys; ++k) {
        const vec4 v = v_s[k * nq + dq];
        [[unroll]] for (uint i = 0u; i < kMaxRowsPerInv; ++i) {
          const uint r = r0 + i;
          if (i < rpi) acc[i] += s_s[k * rv + r / 4u][r % 4u] * v;
        }
      }
    }
  }
}

// The slot of the next pass: that of the first row not yet taken, whose
// rows (bits of `done`) are taken now, with the union [lo, hi] of their
// ranges; -1 when every row is done. The same in every invocation.
int next_pass(inout uint done, out uint lo, out uint hi) {
  int slot = -1;
  lo = 0xffffffffu;
  hi = 0u;
  for (uint r = 0u; r < args.block_rows; ++r) {
    const int s = row_slot_s[r];
    if (slot < 0 && s >= 0 && ((done >> r) & 1u) == 0u) slot = s;
    if (slot >= 0 && s == slot) {
      done |= 1u << r;
      lo = min(lo, row_lo_s[r]);
      hi = max(hi, row_hi_s[r]);
    }
  }
  return slot;
}

// The normalized output rows of this invocation (rows without a query are
// left as they were), each with its head's sink folded in first.
void write_rows(uint row0, uint kv_head, uint group, vec4 acc[kMaxRowsPerInv]) {
  const uint nq = quads(), rpi = args.rows_per_invocation, hd = args.head_dim;
  const uint rg = gl_LocalInvocationIndex / nq, dq = gl_LocalInvocationIndex % nq;
  if (rg * rpi < args.block_rows) {
    [[unroll]] for (uint i = 0u; i < kMaxRowsPerInv; ++i) {
      const uint r = rg * rpi + i;
      if (i < rpi && row_slot_s[r] >= 0) {
        const uint row = row0 + r;
        const uint h = kv_head * group + row % group;
        const uint e = ((row / group) * args.n_head + h) * hd + 4u * dq;
        float total = 0.0;
        for (uint p = 0u; p < args.weigh_parts; ++p) total += max_s[p * args.block_rows + r];
        vec4 a = acc[i];
        if (args.has_sinks != 0u) a *= fold_sink(sinks[h], corr_s[r], total);
        const vec4 o = total > 0.0 ? a / total : vec4(0.0);
        out_values[e] = o.x;
        out_values[e + 1u] = o.y;
        if (4u * dq + 2u < hd) {
          out_values[e + 2u] = o.z;
          out_values[e + 3u] = o.w;
        }
      }
    }
  }
}

void main() {
  const uint lid = gl_LocalInvocationIndex;
  const uint group = args.n_head / args.n_head_kv;
  const uint wg = folded_group_index();
  const uint kv_head = wg % args.n_head_kv;
  const uint block = wg < args.row_blocks * args.n_head_kv
                         ? args.row_blocks - 1u - wg / args.n_head_kv
                         : args.row_blocks;  // past the grid: no rows
  const uint row0 = block * args.block_rows;
  const uint head0 = kv_head * args.head_dim;
  if (lid < kMaxRows) {
    int slot = -1;
    uint lo = 0u, hi = 0u;
    if (lid < args.block_rows) check_row(row0 + lid, group, slot, lo, hi);
    row_slot_s[lid] = slot;
    row_lo_s[lid] = lo;
    row_hi_s[lid] = hi;
  }
  load_queries(row0, kv_head, group);
  barrier();

  // Step 3's row (lid % block_rows) and its softmax state; acc: step 4's.
  const bool weighs = lid < args.block_rows * args.weigh_parts;
  const uint my_row = lid % args.block_rows;
  const int my_slot = row_slot_s[my_row];
  const uint my_lo = row_lo_s[my_row], my_hi = row_hi_s[my_row];
  float m = kMasked, l = 0.0;
  vec4 acc[kMaxRowsPerInv];
  [[unroll]] for (uint i = 0u; i < kMaxRowsPerInv; ++i) acc[i] = vec4(0.0);
  uint done = 0u;
  for (uint pass = 0u; pass < kMaxRows; ++pass) {
    uint lo, hi;
    const int slot = next_pass(done, lo, hi);
    if (slot < 0) break;
    fetch_tile(lo, hi, uint(slot), head0);
    for (uint j0 = lo; j0 <= hi; j0 += args.block_keys) {
      store_tile();
      barrier();
      if (j0 + args.block_keys <= hi) fetch_tile(j0 + args.block_keys, hi, uint(slot), head0);
      score_tile();
      barrier();
      float s[kMaxKeysPerPart];
      uint seen = 0u;
      if (weighs) gather_scores(j0, my_slot == slot, my_lo, my_hi, s, seen);
      barrier();
      if (weighs) weigh_scores(s, seen, m, l);
      barrier();
      accumulate_tile(acc);
      barrier();  // the tile's shared memory is rewritten by the next one
    }
  }
  if (weighs) max_s[lid] = l;  // the parts' sums, added in write_rows
  if (weighs && lid < args.block_rows) corr_s[lid] = m;  // the row's max (every part has it)
  barrier();
  write_rows(row0, kv_head, group, acc);
}
