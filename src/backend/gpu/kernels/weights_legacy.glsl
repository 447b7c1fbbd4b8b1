// Part of weights.glsl (include that, not this): the 32-element blocks Q4_0,
// Q4_1, Q5_0, Q5_1 and Q8_0 (quant/reference_legacy.cpp's numerics):
//   Q4_0 (q - 8) * d, Q5_0 (q - 16) * d, Q4_1 and Q5_1 q * d + m, Q8_0 q * d;
// bit 4 of a Q5 quant of element e is bit e of qh (a little-endian u32).
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
#else  // Q8_0
const uint kBlockBytes = 34u, kOff_d = 0u, kOff_qs = 2u;
BLOCK_STORAGE(float16_t d; uint8_t qs[32];)
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
}
