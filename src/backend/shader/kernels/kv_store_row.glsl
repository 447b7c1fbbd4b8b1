// Storing f32 values into a KV cache region of 32-bit words, shared by
// kv_store.comp and rope_store.comp: F32 copied, F16 rounded to nearest
// even, Q8_0 as the reference quantizer (quant/reference.cpp: d = amax / 127
// stored as f16, q = roundf(x / d) with the f32 d). A 34-byte Q8_0 block
// starts at an even byte, so a word it shares with the next block is written
// with atomicAnd/atomicOr on its own bytes only; words it covers are plain
// stores.
//
// The includer declares `uint k_words[]` and `uint v_words[]` (the K and V
// regions) and defines `float kv_source(bool to_v, uint i)`, the value at
// source index i.

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

// The 32 values from source index src0, as the Q8_0 block at byte `offset`.
void store_q8_0_block(bool to_v, uint src0, uint offset) {
  float amax = 0.0;
  for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(kv_source(to_v, src0 + j)));
  const float d = div_rn(amax, 127.0);
  const float id = d != 0.0 ? div_rn(1.0, d) : 0.0;
  uint halves[17];
  halves[0] = f16_bits(d);
  for (uint j = 0u; j < 16u; ++j) {
    precise float v0 = kv_source(to_v, src0 + 2u * j) * id;
    precise float v1 = kv_source(to_v, src0 + 2u * j + 1u) * id;
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

// Values src0 .. src0 + n into region elements dst0 .. dst0 + n (dst0 even
// for F16, a multiple of 32 for Q8_0, as n), by units: an f32 element, an
// f16 pair (one word) or a Q8_0 block; this invocation takes units first,
// first + stride, ...
void store_units(bool to_v, uint type, uint src0, uint dst0, uint n, uint first, uint stride) {
  if (type == MINFER_KV_F32) {
    for (uint e = first; e < n; e += stride) {
      put_word(to_v, dst0 + e, floatBitsToUint(kv_source(to_v, src0 + e)));
    }
  } else if (type == MINFER_KV_F16) {
    for (uint p = first; p < n / 2u; p += stride) {
      const uint lo = f16_bits(kv_source(to_v, src0 + 2u * p));
      const uint hi = f16_bits(kv_source(to_v, src0 + 2u * p + 1u));
      put_word(to_v, dst0 / 2u + p, lo | (hi << 16));
    }
  } else {
    for (uint b = first; b < n / 32u; b += stride) {
      store_q8_0_block(to_v, src0 + 32u * b, (dst0 / 32u + b) * 34u);
    }
  }
}
