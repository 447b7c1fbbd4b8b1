// Part of weights.glsl (include that, not this): the 32-element blocks Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0 (quant/reference_legacy.cpp's numerics) and MXFP4
// (quant/reference_mxfp4.cpp's):
//   Q4_0 (q - 8) * d, Q5_0 (q - 16) * d, Q4_1 and Q5_1 q * d + m, Q8_0 q * d,
//   MXFP4 kMxfp4Values[q] * 2^(e - 128) (twice the E2M1 value, an integer,
//   times half the E8M0 scale: one exact product);
// bit 4 of a Q5 quant of element e is bit e of qh (a little-endian u32).
// MXFP4's nibbles sit as Q4_0's (element e < 16 the low nibble of qs[e], e +
// 16 its high one), so the units are the same; its 17-byte blocks start at
// any byte, so its packed words are read at any byte offset.
#if defined(WEIGHT_Q4_0)
const uint kBlockBytes = 18u, kOff_d = 0u, kOff_qs = 2u;
BLOCK_STORAGE(float16_t d; uint8_t qs[16];)
#elif defined(WEIGHT_Q4_1)
const uint kBlockBytes = 20u, kOff_d = 0u, kOff_m = 2u, kOff_qs = 4u;
BLOCK_STORAGE(float16_t d; float16_t m; uint8_t qs[16];)
#elif defined(WEIGHT_Q5_0)
const uint kBlockBytes = 22u, kOff_d = 0u, kOff_qh = 2u, kOff_qs = 6u;
BLOCK_STORAGE(float16_t d; uint8_t qh[4]; uint8_t qs[16];)
#elif defined(WEIGHT_Q5_1)
const uint kBlockBytes = 24u, kOff_d = 0u, kOff_m = 2u, kOff_qh = 4u, kOff_qs = 8u;
BLOCK_STORAGE(float16_t d; float16_t m; uint8_t qh[4]; uint8_t qs[16];)
#elif defined(WEIGHT_MXFP4)
const uint kBlockBytes = 17u, kOff_e = 0u, kOff_qs = 1u;
BLOCK_STORAGE(uint8_t e[1]; uint8_t qs[16];)
#else  // Q8_0
const uint kBlockBytes = 34u, kOff_d = 0u, kOff_qs = 2u;
BLOCK_STORAGE(float16_t d; uint8_t qs[32];)
#endif

#if defined(WEIGHT_MXFP4)
// E2M1 code -> twice its value (quant/blocks.h's kMxfp4Values; bit 3 the sign).
const int kMxfp4Values[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);

// 2^(e - 128), half the E8M0 value (quant::mxfp4_half_scale, bit for bit):
// e 0 and 1 are the f32 subnormals 2^-128 and 2^-127 (a device that flushes
// subnormals reads those two scales as 0), the rest normals.
float mxfp4_half_scale(uint e) {
  return uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23);
}

#if defined(WEIGHT_PACKED)
// 4 bytes at any byte offset: the blocks are 17 bytes.
uint load_u32_any(uint byte_offset) {
  const uint shift = (byte_offset & 3u) * 8u;
  const uint w0 = words[byte_offset >> 2];
  if (shift == 0u) return w0;
  return (w0 >> shift) | (words[(byte_offset >> 2) + 1u] << (32u - shift));
}
#define MXFP4_QS_U32(b, i) load_u32_any((b) * kBlockBytes + kOff_qs + (i))
#else
#define MXFP4_QS_U32(b, i) W_U32(b, qs, i)
#endif
#endif

// Rows have in_dim % 32 == 0 (the host checks).
uint units_per_row(uint in_dim) {
  return in_dim / 32u * 4u;
}

void decode_unit(uint row, uint u, uint in_dim, out float wv[kUnitElements],
                 out uint k[kUnitElements]) {
  const uint b = row * (in_dim / 32u) + u / 4u;
  const uint quad = u % 4u;
  const uint e0 = (u / 4u) * 32u;  // the block's first element in the row
#if defined(WEIGHT_MXFP4)
  const float d = mxfp4_half_scale(W_U8(b, e, 0u));
  const uint bytes = MXFP4_QS_U32(b, 4u * quad);
  for (uint j = 0; j < 4u; ++j) {
    const uint e_lo = 4u * quad + j;
    wv[j] = float(kMxfp4Values[(bytes >> (8u * j)) & 15u]) * d;
    wv[j + 4u] = float(kMxfp4Values[(bytes >> (8u * j + 4u)) & 15u]) * d;
    k[j] = e0 + e_lo;
    k[j + 4u] = e0 + e_lo + 16u;
  }
#else
  const float d = W_F16(b, d);
#if defined(WEIGHT_Q8_0)
  const uint lo = W_U32(b, qs, 8u * quad), hi = W_U32(b, qs, 8u * quad + 4u);
  for (uint j = 0; j < 4u; ++j) {
    wv[j] = float(bitfieldExtract(int(lo), int(8u * j), 8)) * d;
    wv[j + 4u] = float(bitfieldExtract(int(hi), int(8u * j), 8)) * d;
  }
  for (uint j = 0; j < kUnitElements; ++j) k[j] = u * kUnitElements + j;
#else
  const uint bytes = W_U32(b, qs, 4u * quad);
#if defined(WEIGHT_Q4_1) || defined(WEIGHT_Q5_1)
  const float m = W_F16(b, m);
#endif
#if defined(WEIGHT_Q5_0) || defined(WEIGHT_Q5_1)
  const uint qh = W_U32(b, qh, 0u);
#endif
  for (uint j = 0; j < 4u; ++j) {
    const uint e_lo = 4u * quad + j, e_hi = e_lo + 16u;  // elements of the block
    uint q_lo = (bytes >> (8u * j)) & 15u, q_hi = (bytes >> (8u * j + 4u)) & 15u;
#if defined(WEIGHT_Q5_0) || defined(WEIGHT_Q5_1)
    q_lo |= ((qh >> e_lo) & 1u) << 4;
    q_hi |= ((qh >> e_hi) & 1u) << 4;
#endif
#if defined(WEIGHT_Q4_0)
    wv[j] = float(int(q_lo) - 8) * d;
    wv[j + 4u] = float(int(q_hi) - 8) * d;
#elif defined(WEIGHT_Q5_0)
    wv[j] = float(int(q_lo) - 16) * d;
    wv[j + 4u] = float(int(q_hi) - 16) * d;
#else
    precise float v_lo = float(q_lo) * d + m;
    precise float v_hi = float(q_hi) * d + m;
    wv[j] = v_lo;
    wv[j + 4u] = v_hi;
#endif
    k[j] = e0 + e_lo;
    k[j + 4u] = e0 + e_hi;
  }
#endif
#endif
}
