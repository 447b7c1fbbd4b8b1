// The weight side of matmul.comp: binding 0 in the variant's weight type and
// the units of a weight row, each kUnitChunks chunks of 4 weights:
//   Raw mm_load(row, u)              the unit's words (block scales applied)
//   vec4 mm_chunk(raw, c)            weights of chunk c, decoded
//   vec4 mm_x_chunk(xrow, u, c)      the 4 x values they multiply
// so that the kernel loads a unit of several rows at once and keeps only
// their words in registers, decoding a chunk where it multiplies.
//
// Units (mm_units_per_row(in_dim) of them, numbered u from 0 in a row):
//   - Q4_0, Q5_0, Q8_0: block u (32 elements), read as the aligned 32-bit
//     words that cover it (the blocks are 18, 22, 34 bytes: a block starts
//     at byte 0 or 2 of a word, and every field after the f16 scale starts
//     at byte 2 of the block, so each field word is one word or two halves);
//   - Q4_K: quants 16u .. 16u + 15 (mod 128) of block u / 8 and the block's
//     16-byte header, two uvec4 loads (144-byte blocks are 16-byte aligned):
//     16 elements of sub-block 2j and the same 16 of sub-block 2j + 1;
//   - Q6_K: 8 elements r .. r + 7 of each quarter r + {0, 32, 64, 96} of one
//     128-element half of block u / 8 (210-byte blocks: word pairs at even
//     bytes, read as three words);
//   - F16 with in_dim % 8 == 0: elements 8u .. 8u + 7, one uvec4 load;
//   - every other type and shape: weights.glsl's decode_unit() (8 weights;
//     x as vec4 where the elements are consecutive, else one load each).
// The decoded values are weights.glsl's (quant/reference*.cpp): the same f32
// operations in the same order, `precise` where the reference rounds twice.
// Rows are whole blocks (the host checks); an x row holds in_dim floats.
//
// x is read as vec4 where args.x_vec4 says the binding is 16-byte aligned
// (in_dim % 4 == 0 for every unit that does), else as scalars.

#if defined(WEIGHT_Q4_0) || defined(WEIGHT_Q5_0) || defined(WEIGHT_Q8_0) || \
    defined(WEIGHT_Q4_K) || defined(WEIGHT_Q6_K)
layout(std430, binding = 0) readonly buffer W { uint words[]; };
#if defined(WEIGHT_Q4_K)
layout(std430, binding = 0) readonly buffer WQuads { uvec4 quads[]; };
#endif
#else
#include "weights.glsl"
#if defined(WEIGHT_F16)
layout(std430, binding = 0) readonly buffer WQuads { uvec4 quads[]; };
#endif
#endif

// x as the rows multiply it: with the input norm (args.norm), each element
// times the token's RMS scale (mm_x_scale, which the kernel sets per token
// before it loads the token's x) and then, weighted, times norm_w[col]: the
// operations and order of rms_norm.comp.
float mm_x_scale = 1.0;

vec4 x_normed(vec4 v, uint col) {
  if (args.norm == 0u) return v;
  precise vec4 n = v * mm_x_scale;
  if (args.norm == MINFER_MATMUL_NORM_WEIGHTED) {
    n = n * vec4(norm_w[col], norm_w[col + 1u], norm_w[col + 2u], norm_w[col + 3u]);
  }
  return n;
}

// Columns col .. col + 3 of the x row at xrow (xrow + col % 4 == 0 where
// args.x_vec4 is set).
vec4 x_quad(uint xrow, uint col) {
  const uint i = xrow + col;
  if (args.x_vec4 != 0u) return x_normed(x4[i >> 2], col);
  return x_normed(vec4(x[i], x[i + 1u], x[i + 2u], x[i + 3u]), col);
}

// Column col of the x row at xrow.
float x_elem(uint xrow, uint col) {
  if (args.norm == 0u) return x[xrow + col];
  precise float n = x[xrow + col] * mm_x_scale;
  if (args.norm == MINFER_MATMUL_NORM_WEIGHTED) n = n * norm_w[col];
  return n;
}

// The 4 bytes at byte 2 + 4k of a block that starts at byte 0 (odd false) or
// byte 2 (odd true) of word a's position: words a, b are the window's words
// k and k + 1.
uint field_word(uint a, uint b, bool odd) {
  return odd ? b : (a >> 16) | (b << 16);
}

// Byte i (0..7) of two little-endian words.
uint byte8(uvec2 v, uint i) {
  return ((i < 4u ? v.x : v.y) >> (8u * (i % 4u))) & 0xffu;
}

#if defined(WEIGHT_Q4_0) || defined(WEIGHT_Q5_0) || defined(WEIGHT_Q8_0)
#if defined(WEIGHT_Q4_0)
const uint kBlockBytes = 18u, kWindowWords = 5u;
#elif defined(WEIGHT_Q5_0)
const uint kBlockBytes = 22u, kWindowWords = 6u;
#else
const uint kBlockBytes = 34u, kWindowWords = 9u;
#endif
const uint kUnitChunks = 8u;  // 32 elements: chunk c is elements 4c .. 4c + 3

uint mm_units_per_row(uint in_dim) {
  return in_dim / 32u;
}

struct Raw {
  float d;
#if defined(WEIGHT_Q5_0)
  uint qh;
#endif
#if defined(WEIGHT_Q8_0)
  uint qs[8];
#else
  uint qs[4];
#endif
};

Raw mm_load(uint row, uint u) {
  const uint byte0 = (row * (args.in_dim / 32u) + u) * kBlockBytes;
  const uint at = byte0 >> 2;
  const bool odd = (byte0 & 2u) != 0u;
  uint win[kWindowWords];
  for (uint i = 0; i < kWindowWords; ++i) win[i] = words[at + i];
  Raw r;
  r.d = unpackHalf2x16(odd ? win[0] >> 16 : win[0]).x;
#if defined(WEIGHT_Q5_0)
  r.qh = field_word(win[0], win[1], odd);
  for (uint k = 0; k < 4u; ++k) r.qs[k] = field_word(win[k + 1u], win[k + 2u], odd);
#else
  for (uint k = 0; k < r.qs.length(); ++k) r.qs[k] = field_word(win[k], win[k + 1u], odd);
#endif
  return r;
}

vec4 mm_chunk(Raw r, uint c) {
  vec4 w;
#if defined(WEIGHT_Q8_0)
  for (uint j = 0; j < 4u; ++j) w[j] = float(bitfieldExtract(int(r.qs[c]), int(8u * j), 8)) * r.d;
#else
  // Low nibbles of quant word c (elements 4c ..) or high ones of word c - 4.
  const uint q = r.qs[c % 4u] >> (c < 4u ? 0u : 4u);
  for (uint j = 0; j < 4u; ++j) {
    uint v = (q >> (8u * j)) & 15u;
#if defined(WEIGHT_Q5_0)
    v |= ((r.qh >> (4u * c + j)) & 1u) << 4;
    w[j] = float(int(v) - 16) * r.d;
#else
    w[j] = float(int(v) - 8) * r.d;
#endif
  }
#endif
  return w;
}

vec4 mm_x_chunk(uint xrow, uint u, uint c) {
  return x_quad(xrow, 32u * u + 4u * c);
}

#elif defined(WEIGHT_Q4_K)
const uint kUnitChunks = 8u;  // chunk c < 4: elements 4c.. of the low half, else of the high

uint mm_units_per_row(uint in_dim) {
  return in_dim / 256u * 8u;
}

// Byte k (0..11) of the scales, words y, z, w of the block's header.
uint k4_scale_byte(uvec4 h, uint k) {
  const uint word = k < 4u ? h.y : (k < 8u ? h.z : h.w);
  return (word >> (8u * (k % 4u))) & 0xffu;
}

// The 6-bit scale and minimum of sub-block sb (get_k4_scale_min).
uvec2 k4_scale_min(uvec4 h, uint sb) {
  if (sb < 4u) return uvec2(k4_scale_byte(h, sb) & 63u, k4_scale_byte(h, sb + 4u) & 63u);
  const uint packed = k4_scale_byte(h, sb + 4u);
  return uvec2((packed & 15u) | ((k4_scale_byte(h, sb - 4u) >> 6) << 4),
               (packed >> 4) | ((k4_scale_byte(h, sb) >> 6) << 4));
}

struct Raw {
  vec4 dm;  // d * scale and dmin * min of the low sub-block, then of the high one
  uvec4 q;
};

Raw mm_load(uint row, uint u) {
  const uint b = row * (args.in_dim / 256u) + u / 8u;
  const uint pair = (u % 8u) / 2u;
  const uvec4 h = quads[9u * b];
  Raw r;
  r.q = quads[9u * b + 1u + u % 8u];
  const float d = unpackHalf2x16(h.x).x, dmin = unpackHalf2x16(h.x >> 16).x;
  const uvec2 sm_lo = k4_scale_min(h, 2u * pair), sm_hi = k4_scale_min(h, 2u * pair + 1u);
  precise float dl_lo = d * float(sm_lo.x);
  precise float ml_lo = dmin * float(sm_lo.y);
  precise float dl_hi = d * float(sm_hi.x);
  precise float ml_hi = dmin * float(sm_hi.y);
  r.dm = vec4(dl_lo, ml_lo, dl_hi, ml_hi);
  return r;
}

vec4 mm_chunk(Raw r, uint c) {
  const uint q = r.q[c % 4u] >> (c < 4u ? 0u : 4u);
  const float dl = c < 4u ? r.dm.x : r.dm.z, ml = c < 4u ? r.dm.y : r.dm.w;
  vec4 w;
  for (uint j = 0; j < 4u; ++j) {
    precise float v = dl * float((q >> (8u * j)) & 15u) - ml;
    w[j] = v;
  }
  return w;
}

// Unit u: 16 elements from 64 pair + 16 (u % 2) (low nibbles) and 32 past them.
vec4 mm_x_chunk(uint xrow, uint u, uint c) {
  const uint p = u % 8u;
  return x_quad(xrow, 256u * (u / 8u) + 64u * (p / 2u) + 16u * (p % 2u) + 32u * (c / 4u) +
                          4u * (c % 4u));
}

#elif defined(WEIGHT_Q6_K)
const uint kUnitChunks = 8u;  // chunk c: elements 4 (c % 2) .. of quarter c / 2

uint mm_units_per_row(uint in_dim) {
  return in_dim / 256u * 8u;
}

// The 8 bytes at block offset `off` (off % 4 == 0) of the block at byte0.
uvec2 q6_pair(uint byte0, uint off, bool odd) {
  const uint at = (byte0 + off) >> 2;
  const uint w0 = words[at], w1 = words[at + 1u], w2 = words[at + 2u];
  return odd ? uvec2((w0 >> 16) | (w1 << 16), (w1 >> 16) | (w2 << 16)) : uvec2(w0, w1);
}

struct Raw {
  vec4 dl;  // d * scale of quarters 0..3
  uvec2 ql_a, ql_b, qh;
};

// Unit u: elements 128 h + 32 g + 8 c + i (i < 8) of block u / 8 for the
// quarters g = 0..3, with h = (u % 8) / 4 and c = u % 4.
Raw mm_load(uint row, uint u) {
  const uint byte0 = (row * (args.in_dim / 256u) + u / 8u) * 210u;
  const bool odd = (byte0 & 2u) != 0u;
  const uint h = (u % 8u) / 4u, c = u % 4u;
  Raw r;
  r.ql_a = q6_pair(byte0, 64u * h + 8u * c, odd);
  r.ql_b = q6_pair(byte0, 64u * h + 32u + 8u * c, odd);
  r.qh = q6_pair(byte0, 128u + 32u * h + 8u * c, odd);
  const uvec2 sc = q6_pair(byte0, 192u + 8u * h, odd);
  const uint dw = words[(byte0 + 208u) >> 2];
  const float d = unpackHalf2x16(odd ? dw >> 16 : dw).x;
  // Quarter g has scale byte c / 2 + 2g.
  for (uint g = 0; g < 4u; ++g) {
    const int scale = bitfieldExtract(int(byte8(sc, c / 2u + 2u * g)), 0, 8);
    precise float v = d * float(scale);
    r.dl[g] = v;
  }
  return r;
}

vec4 mm_chunk(Raw r, uint c) {
  const uint g = c / 2u, i0 = 4u * (c % 2u);
  // Quarters 0, 2 read ql_a, 1, 3 ql_b; 0, 1 low nibbles, 2, 3 high ones.
  const uvec2 ql = (g % 2u) == 0u ? r.ql_a : r.ql_b;
  vec4 w;
  for (uint j = 0; j < 4u; ++j) {
    const uint lo = (byte8(ql, i0 + j) >> (4u * (g / 2u))) & 15u;
    const uint hi = (byte8(r.qh, i0 + j) >> (2u * g)) & 3u;
    precise float v = r.dl[g] * float(int(lo | (hi << 4)) - 32);
    w[j] = v;
  }
  return w;
}

vec4 mm_x_chunk(uint xrow, uint u, uint c) {
  return x_quad(xrow, 256u * (u / 8u) + 128u * ((u % 8u) / 4u) + 8u * (u % 4u) +
                          32u * (c / 2u) + 4u * (c % 2u));
}

#else
// weights.glsl's units: 8 weights, two chunks.
const uint kUnitChunks = 2u;

uint mm_units_per_row(uint in_dim) {
  return units_per_row(in_dim);
}

struct Raw {
  vec4 w[2];
};

Raw mm_load(uint row, uint u) {
  Raw r;
#if defined(WEIGHT_F16)
  if (args.in_dim % 8u == 0u) {
    const uvec4 q = quads[(row * args.in_dim) / 8u + u];
    r.w[0] = vec4(unpackHalf2x16(q.x), unpackHalf2x16(q.y));
    r.w[1] = vec4(unpackHalf2x16(q.z), unpackHalf2x16(q.w));
    return r;
  }
#endif
  float wv[kUnitElements];
  uint k[kUnitElements];
  decode_unit(row, u, args.in_dim, wv, k);
  r.w[0] = vec4(wv[0], wv[1], wv[2], wv[3]);
  r.w[1] = vec4(wv[4], wv[5], wv[6], wv[7]);
  return r;
}

vec4 mm_chunk(Raw r, uint c) {
  return r.w[c];
}

// Element j of unit u (decode_unit's k[j]).
uint mm_element(uint u, uint j) {
#if defined(WEIGHT_LEGACY)
  return 32u * (u / 4u) + 4u * (u % 4u) + (j < 4u ? j : j + 12u);
#else
  return 8u * u + j;
#endif
}

vec4 mm_x_chunk(uint xrow, uint u, uint c) {
#if !defined(WEIGHT_LEGACY)
  if (args.in_dim % 4u == 0u) return x_quad(xrow, 8u * u + 4u * c);
#endif
  vec4 v = vec4(0.0);
  for (uint j = 0; j < 4u; ++j) {
    const uint k = mm_element(u, 4u * c + j);
    if (k < args.in_dim) v[j] = x_elem(xrow, k);
  }
  return v;
}
#endif
