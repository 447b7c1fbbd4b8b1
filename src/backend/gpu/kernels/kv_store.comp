// The KV cache store: row t of k and of v (f32 [n_tokens][row_len]) into
// cache row rows[t] of the K and V regions, each in its own type
// (MINFER_KV_*): F32 copied, F16 rounded to nearest even, Q8_0 as the
// reference quantizer (quant/reference.cpp: d = amax / 127 stored as f16,
// q = roundf(x / d) with the f32 d). A row outside [0, n_ctx) is skipped and
// reported as MINFER_ERR_CACHE_ROW.
// One workgroup per token (folded over x and y), units of a row strided by
// the workgroup: an f32 element, an f16 pair (one word) or a Q8_0 block. The
// caches are 32-bit words (no 8/16-bit storage): a 34-byte block starts at
// an even byte, so a word it shares with the next block is written with
// atomicAnd/atomicOr on its own bytes only; words it covers are plain stores.
// Loops per invocation: ceil(row_len / 64) units, a Q8_0 unit ~75 iterations.
#version 450
#include "common.glsl"
#include "kernel_args.h"
#define MINFER_ERR_BINDING 5
#include "errors.glsl"
#include "attention_numerics.glsl"

layout(push_constant) uniform Push { KvStoreArgs args; };
layout(std430, binding = 0) readonly buffer K { float k_in[]; };
layout(std430, binding = 1) readonly buffer V { float v_in[]; };
layout(std430, binding = 2) readonly buffer Rows { int rows[]; };
layout(std430, binding = 3) buffer KCache { uint k_words[]; };
layout(std430, binding = 4) buffer VCache { uint v_words[]; };

float source(bool to_v, uint i) {
  return to_v ? v_in[i] : k_in[i];
}

void put_word(bool to_v, uint i, uint value) {
  if (to_v) {
    v_words[i] = value;
  } else {
    k_words[i] = value;
  }
}

// Replaces the bytes of word i under mask, leaving the others (a neighbour
// block's, which another invocation may be writing) as they are.
void put_masked(bool to_v, uint i, uint value, uint mask) {
  if (to_v) {
    atomicAnd(v_words[i], ~mask);
    atomicOr(v_words[i], value & mask);
  } else {
    atomicAnd(k_words[i], ~mask);
    atomicOr(k_words[i], value & mask);
  }
}

// Block b of the row starting at element src0, stored at byte `offset`.
void store_q8_0_block(bool to_v, uint src0, uint offset) {
  float amax = 0.0;
  for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(source(to_v, src0 + j)));
  const float d = div_rn(amax, 127.0);
  const float id = d != 0.0 ? div_rn(1.0, d) : 0.0;
  uint halves[17];
  halves[0] = f16_bits(d);
  for (uint j = 0u; j < 16u; ++j) {
    precise float v0 = source(to_v, src0 + 2u * j) * id;
    precise float v1 = source(to_v, src0 + 2u * j + 1u) * id;
    const int q0 = int(clamp(round_away(v0), -127.0, 127.0));
    const int q1 = int(clamp(round_away(v1), -127.0, 127.0));
    halves[j + 1u] = (uint(q0) & 0xffu) | ((uint(q1) & 0xffu) << 8);
  }
  // Word w covers halves a = 2w - lead and a + 1 (lead: the block starts at
  // the word's upper half).
  const uint first = offset >> 2;
  const int lead = (offset & 2u) != 0u ? 1 : 0;
  for (uint w = 0u; w < 9u; ++w) {
    const int a = int(2u * w) - lead;
    uint value = 0u, mask = 0u;
    if (a >= 0 && a < 17) {
      value |= halves[a];
      mask |= 0xffffu;
    }
    if (a + 1 < 17) {
      value |= halves[a + 1] << 16;
      mask |= 0xffff0000u;
    }
    if (mask == 0xffffffffu) {
      put_word(to_v, first + w, value);
    } else if (mask != 0u) {
      put_masked(to_v, first + w, value, mask);
    }
  }
}

void store_row(bool to_v, uint type, uint t, uint row) {
  const uint lid = gl_LocalInvocationIndex;
  const uint n = args.row_len;
  const uint src0 = t * n;
  if (type == MINFER_KV_F32) {
    for (uint e = lid; e < n; e += kWorkgroupInvocations) {
      put_word(to_v, row * n + e, floatBitsToUint(source(to_v, src0 + e)));
    }
  } else if (type == MINFER_KV_F16) {
    for (uint p = lid; p < n / 2u; p += kWorkgroupInvocations) {
      const uint lo = f16_bits(source(to_v, src0 + 2u * p));
      const uint hi = f16_bits(source(to_v, src0 + 2u * p + 1u));
      put_word(to_v, row * (n / 2u) + p, lo | (hi << 16));
    }
  } else {
    const uint blocks = n / 32u;
    for (uint b = lid; b < blocks; b += kWorkgroupInvocations) {
      store_q8_0_block(to_v, src0 + 32u * b, (row * blocks + b) * 34u);
    }
  }
}

void main() {
  const uint t = folded_group_index();
  if (t >= args.n_tokens) return;  // no barrier in this kernel
  const int row = rows[t];
  if (row < 0 || uint(row) >= args.n_ctx) {
    if (gl_LocalInvocationIndex == 0u) report_error(MINFER_ERR_CACHE_ROW, uint(row), args.n_ctx);
    return;
  }
  store_row(false, args.k_type, t, uint(row));
  store_row(true, args.v_type, t, uint(row));
}
