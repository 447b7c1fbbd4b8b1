// Part of weights.glsl (include that, not this): the 256-element K-quant
// super-blocks Q2_K..Q6_K, with quant/reference_kquants.cpp's numerics and
// quant/kquant_layout.h's bit placement. Each unit is 8 consecutive elements
// e0 .. e0 + 7 of one block, inside one sub-block (16 or 32 elements), so a
// unit needs one sub-block scale (and minimum) and reads its quants as two
// 32-bit words per field:
//   Q2_K (d * (sc & 15)) * q - (dmin * (sc >> 4))       q 2 bits
//   Q3_K (d * (sc6 - 32)) * (lo - (hbit ? 0 : 4))        lo 2 bits
//   Q4_K (d * sc6) * q - (dmin * m6)                      q 4 bits
//   Q5_K (d * sc6) * (q | hbit << 4) - (dmin * m6)
//   Q6_K (d * scale) * ((lo4 | hi2 << 4) - 32)            scale an int8
#if defined(WEIGHT_Q2_K)
const uint kBlockBytes = 84u, kOff_scales = 0u, kOff_qs = 16u, kOff_d = 80u, kOff_dmin = 82u;
BLOCK_STORAGE(uint8_t scales[16]; uint8_t qs[64]; float16_t d; float16_t dmin;)
#elif defined(WEIGHT_Q3_K)
const uint kBlockBytes = 110u, kOff_hmask = 0u, kOff_qs = 32u, kOff_scales = 96u, kOff_d = 108u;
BLOCK_STORAGE(uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; float16_t d;)
#elif defined(WEIGHT_Q4_K)
const uint kBlockBytes = 144u, kOff_d = 0u, kOff_dmin = 2u, kOff_scales = 4u, kOff_qs = 16u;
BLOCK_STORAGE(float16_t d; float16_t dmin; uint8_t scales[12]; uint8_t qs[128];)
#elif defined(WEIGHT_Q5_K)
const uint kBlockBytes = 176u, kOff_d = 0u, kOff_dmin = 2u, kOff_scales = 4u, kOff_qh = 16u,
           kOff_qs = 48u;
BLOCK_STORAGE(float16_t d; float16_t dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128];)
#else  // Q6_K
const uint kBlockBytes = 210u, kOff_ql = 0u, kOff_qh = 128u, kOff_scales = 192u, kOff_d = 208u;
BLOCK_STORAGE(uint8_t ql[128]; uint8_t qh[64]; uint8_t scales[16]; float16_t d;)
#endif

// Rows have in_dim % 256 == 0 (the host checks).
uint units_per_row(uint in_dim) {
  return in_dim / 256u * 32u;
}

// Byte j (0..7) of the 8 bytes held by two little-endian words.
uint byte_of(uint w0, uint w1, uint j) {
  return ((j < 4u ? w0 : w1) >> (8u * (j % 4u))) & 0xffu;
}

void decode_unit(uint row, uint u, uint in_dim, out float wv[kUnitElements],
                 out uint k[kUnitElements]) {
  const uint b = row * (in_dim / 256u) + u / 32u;
  const uint e0 = (u % 32u) * 8u;  // the unit's first element in its block
  for (uint j = 0; j < kUnitElements; ++j) k[j] = u * kUnitElements + j;
  const float d = W_F16(b, d);
#if defined(WEIGHT_Q4_K) || defined(WEIGHT_Q5_K)
  // The 6-bit (scale, min) pair of sub-block sb (get_k4_scale_min).
  const uint sb = e0 / 32u;
  uint sc, m;
  if (sb < 4u) {
    sc = W_U8(b, scales, sb) & 63u;
    m = W_U8(b, scales, sb + 4u) & 63u;
  } else {
    const uint packed = W_U8(b, scales, sb + 4u);
    sc = (packed & 15u) | ((W_U8(b, scales, sb - 4u) >> 6) << 4);
    m = (packed >> 4) | ((W_U8(b, scales, sb) >> 6) << 4);
  }
  const float dmin = W_F16(b, dmin);
  const uint q_at = 32u * (sb / 2u) + e0 % 32u, q_shift = 4u * (sb % 2u);
  const uint q0 = W_U32(b, qs, q_at), q1 = W_U32(b, qs, q_at + 4u);
#if defined(WEIGHT_Q5_K)
  const uint h0 = W_U32(b, qh, e0 % 32u), h1 = W_U32(b, qh, e0 % 32u + 4u);
#endif
  for (uint j = 0; j < kUnitElements; ++j) {
    uint q = (byte_of(q0, q1, j) >> q_shift) & 15u;
#if defined(WEIGHT_Q5_K)
    q |= ((byte_of(h0, h1, j) >> sb) & 1u) << 4;
#endif
    precise float dl = d * float(sc);
    precise float ml = dmin * float(m);
    precise float v = dl * float(q) - ml;
    wv[j] = v;
  }
#elif defined(WEIGHT_Q2_K) || defined(WEIGHT_Q3_K)
  // 2-bit quants: element e is bits 2 * (r / 32) of qs[32 * h + r % 32]
  // with h = e / 128, r = e % 128 (get_2bit).
  const uint sb = e0 / 16u, r = e0 % 128u;
  const uint q_at = 32u * (e0 / 128u) + r % 32u, q_shift = 2u * (r / 32u);
  const uint q0 = W_U32(b, qs, q_at), q1 = W_U32(b, qs, q_at + 4u);
#if defined(WEIGHT_Q2_K)
  const uint sc = W_U8(b, scales, sb);
  const float dmin = W_F16(b, dmin);
  for (uint j = 0; j < kUnitElements; ++j) {
    const uint q = (byte_of(q0, q1, j) >> q_shift) & 3u;
    precise float dl = d * float(sc & 15u);
    precise float ml = dmin * float(sc >> 4);
    precise float v = dl * float(q) - ml;
    wv[j] = v;
  }
#else
  // The 6-bit scale (get_q3_scale) and the high bit: bit e / 32 of hmask[e % 32].
  const uint sc = ((W_U8(b, scales, sb % 8u) >> (4u * (sb / 8u))) & 15u) |
                  (((W_U8(b, scales, 8u + sb % 4u) >> (2u * (sb / 4u))) & 3u) << 4);
  const uint h0 = W_U32(b, hmask, e0 % 32u), h1 = W_U32(b, hmask, e0 % 32u + 4u);
  const uint h_shift = e0 / 32u;
  for (uint j = 0; j < kUnitElements; ++j) {
    const int lo = int((byte_of(q0, q1, j) >> q_shift) & 3u);
    const int q = lo - (((byte_of(h0, h1, j) >> h_shift) & 1u) != 0u ? 0 : 4);
    precise float dl = d * float(int(sc) - 32);
    precise float v = dl * float(q);
    wv[j] = v;
  }
#endif
#else  // Q6_K
  // Low nibble: nibble r / 64 of ql[64 * h + r % 64]; high 2 bits: bits
  // 2 * (r / 32) of qh[32 * h + r % 32] (h = e / 128, r = e % 128).
  const uint h = e0 / 128u, r = e0 % 128u;
  const uint l_at = 64u * h + r % 64u, l_shift = 4u * (r / 64u);
  const uint h_at = 32u * h + r % 32u, h_shift = 2u * (r / 32u);
  const uint l0 = W_U32(b, ql, l_at), l1 = W_U32(b, ql, l_at + 4u);
  const uint hi0 = W_U32(b, qh, h_at), hi1 = W_U32(b, qh, h_at + 4u);
  const int scale = bitfieldExtract(int(W_U8(b, scales, e0 / 16u)), 0, 8);
  for (uint j = 0; j < kUnitElements; ++j) {
    const uint lo = (byte_of(l0, l1, j) >> l_shift) & 15u;
    const uint hi = (byte_of(hi0, hi1, j) >> h_shift) & 3u;
    precise float dl = d * float(scale);
    precise float v = dl * float(int(lo | (hi << 4)) - 32);
    wv[j] = v;
  }
#endif
}
