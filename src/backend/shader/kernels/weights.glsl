// Weight decoding shared by matmul.comp and get_rows.comp: binding 0 in the
// variant's weight type and decode_unit(), which yields the 8 weights of one
// "unit" of a row with the element index of each, so that one decoder serves
// every kernel that reads weights. Blocks are the ggml layouts of
// src/quant/blocks.h and the arithmetic is the reference's
// (quant/reference_*.cpp): f32, the same operations in the same order, never
// contracted into FMAs (`precise`), so a decoded weight is bit-exact with
// quant::dequantize_row.
//
// The variant's defines: WEIGHT_<TYPE>=1 (F32, F16, BF16, Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), and WEIGHT_PACKED=1 for the
// variants that read the blocks as 32-bit words (no 8/16-bit storage needed);
// the others use explicit 8/16-bit storage types, which the device must offer
// (the SPIR-V's capabilities decide at init).
//
// Units (u counts the units of a row from 0; units_per_row(in_dim) of them):
//   - F32, F16, BF16: elements 8u .. 8u + 7 (past in_dim: weight 0 and the
//     element index past the row);
//   - Q8_0 and the K-quants: the same 8 consecutive elements (whole rows of
//     blocks, which the host checks);
//   - Q4_0, Q4_1, Q5_0, Q5_1, MXFP4: byte quad j = u % 4 of block u / 4,
//     that is elements 4j .. 4j + 3 (low nibbles) and 16 + 4j .. 19 + 4j
//     (high).
const uint kUnitElements = 8;

#if defined(WEIGHT_F32) || defined(WEIGHT_F16) || defined(WEIGHT_BF16)
#define WEIGHT_FLOAT 1
#elif defined(WEIGHT_Q4_0) || defined(WEIGHT_Q4_1) || defined(WEIGHT_Q5_0) || \
    defined(WEIGHT_Q5_1) || defined(WEIGHT_Q8_0) || defined(WEIGHT_MXFP4)
#define WEIGHT_LEGACY 1
#elif defined(WEIGHT_Q2_K) || defined(WEIGHT_Q3_K) || defined(WEIGHT_Q4_K) || \
    defined(WEIGHT_Q5_K) || defined(WEIGHT_Q6_K)
#define WEIGHT_KQUANT 1
#else
#error "weights.glsl: the variant defines no WEIGHT_<type>"
#endif

#if !defined(WEIGHT_PACKED) && !defined(WEIGHT_F32)
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#endif

#if defined(WEIGHT_PACKED)
layout(std430, binding = 0) readonly buffer W { uint words[]; };

// The 32 bits at an even byte offset (blocks are 2-byte aligned). The host
// binds whole 4-byte words, so the second word is inside the binding.
uint load_u32_even(uint byte_offset) {
  const uint w0 = words[byte_offset >> 2];
  if ((byte_offset & 3u) == 0u) return w0;
  return (w0 >> 16) | (words[(byte_offset >> 2) + 1u] << 16);
}
uint load_u16_even(uint byte_offset) {
  return (words[byte_offset >> 2] >> ((byte_offset & 2u) * 8u)) & 0xffffu;
}
uint load_u8(uint byte_offset) {
  return (words[byte_offset >> 2] >> ((byte_offset & 3u) * 8u)) & 0xffu;
}
float load_f16_even(uint byte_offset) {
  return unpackHalf2x16(load_u16_even(byte_offset)).x;
}

// Field access of block b: the block families below name each field's byte
// offset kOff_<field> and the block size kBlockBytes.
#define BLOCK_STORAGE(fields)
#define W_F16(b, field) load_f16_even((b) * kBlockBytes + kOff_##field)
#define W_U8(b, field, i) load_u8((b) * kBlockBytes + kOff_##field + (i))
#define W_U32(b, field, i) load_u32_even((b) * kBlockBytes + kOff_##field + (i))
#else
// The block as a struct of 8/16-bit members (std430: stride = kBlockBytes).
#define BLOCK_STORAGE(fields)   \
  struct WeightBlock {          \
    fields                      \
  };                            \
  layout(std430, binding = 0) readonly buffer W { WeightBlock blocks[]; };
#define W_F16(b, field) float(blocks[b].field)
#define W_U8(b, field, i) uint(blocks[b].field[i])
// 4 bytes from field[i], little-endian (i % 4 == 0).
#define W_U32(b, field, i)                                                   \
  (W_U8(b, field, i) | (W_U8(b, field, (i) + 1u) << 8) |                     \
   (W_U8(b, field, (i) + 2u) << 16) | (W_U8(b, field, (i) + 3u) << 24))
#endif

#if defined(WEIGHT_FLOAT)
#if defined(WEIGHT_F32)
layout(std430, binding = 0) readonly buffer W { float w[]; };
#elif !defined(WEIGHT_PACKED) && defined(WEIGHT_F16)
layout(std430, binding = 0) readonly buffer W { float16_t w[]; };
#elif !defined(WEIGHT_PACKED)  // BF16
layout(std430, binding = 0) readonly buffer W { uint16_t w[]; };
#endif

uint units_per_row(uint in_dim) {
  return (in_dim + kUnitElements - 1u) / kUnitElements;
}

// Element idx of the whole matrix (row * in_dim + column).
float load_float_weight(uint idx) {
#if defined(WEIGHT_F32)
  return w[idx];
#elif defined(WEIGHT_F16) && !defined(WEIGHT_PACKED)
  return float(w[idx]);
#elif defined(WEIGHT_F16)
  const vec2 pair = unpackHalf2x16(words[idx >> 1]);
  return (idx & 1u) == 0u ? pair.x : pair.y;
#elif !defined(WEIGHT_PACKED)  // BF16: the top half of an f32
  return uintBitsToFloat(uint(w[idx]) << 16);
#else
  const uint word = words[idx >> 1];
  return uintBitsToFloat((idx & 1u) == 0u ? word << 16 : word & 0xffff0000u);
#endif
}

void decode_unit(uint row, uint u, uint in_dim, out float wv[kUnitElements],
                 out uint k[kUnitElements]) {
  for (uint j = 0; j < kUnitElements; ++j) {
    k[j] = u * kUnitElements + j;
    wv[j] = 0.0;
    if (k[j] < in_dim) wv[j] = load_float_weight(row * in_dim + k[j]);
  }
}
#elif defined(WEIGHT_LEGACY)
#include "weights_legacy.glsl"
#else
#include "weights_kquant.glsl"
#endif
