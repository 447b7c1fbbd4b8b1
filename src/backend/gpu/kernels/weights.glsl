// Weight decoding for matmul.comp: binding 0 in the variant's weight type
// and decode_unit(), which yields the 8 weights of one "unit" of a row with
// the element index of each. Blocks are the ggml layouts of src/quant/blocks.h
// and the arithmetic is the reference's (quant/reference.h): f32, d * q.
//   - WEIGHT_F32, WEIGHT_F16, WEIGHT_F16_PACKED: unit u holds elements
//     8u .. 8u + 7 (past in_dim: weight 0, element index past the row);
//   - WEIGHT_Q8_0[_PACKED]: the same 8 consecutive elements, a quarter block;
//   - WEIGHT_Q4_0[_PACKED]: byte quad j = u % 4 of block u / 4, that is
//     elements 4j .. 4j + 3 (low nibbles) and 16 + 4j .. 19 + 4j (high).
// The _PACKED variants read the blocks as 32-bit words (no 8/16-bit storage
// needed); the others use explicit 8/16-bit storage types, which the device
// must offer (the SPIR-V's capabilities decide at init).
const uint kUnitElements = 8;

#if defined(WEIGHT_F16) || defined(WEIGHT_Q8_0) || defined(WEIGHT_Q4_0)
#extension GL_EXT_shader_16bit_storage : require
#endif
#if defined(WEIGHT_Q8_0) || defined(WEIGHT_Q4_0)
#extension GL_EXT_shader_8bit_storage : require
#endif

#if defined(WEIGHT_F32)
layout(std430, binding = 0) readonly buffer W { float w[]; };
#elif defined(WEIGHT_F16)
layout(std430, binding = 0) readonly buffer W { float16_t w[]; };
#elif defined(WEIGHT_Q8_0)
struct BlockQ8_0 {
  float16_t d;
  int8_t qs[32];
};
layout(std430, binding = 0) readonly buffer W { BlockQ8_0 blocks[]; };
#elif defined(WEIGHT_Q4_0)
struct BlockQ4_0 {
  float16_t d;
  uint8_t qs[16];
};
layout(std430, binding = 0) readonly buffer W { BlockQ4_0 blocks[]; };
#else  // the packed variants
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
float load_f16_even(uint byte_offset) {
  return unpackHalf2x16(load_u16_even(byte_offset)).x;
}
#endif

// Units per row; quantized rows have in_dim % 32 == 0 (the host checks).
uint units_per_row(uint in_dim) {
#if defined(WEIGHT_Q4_0) || defined(WEIGHT_Q4_0_PACKED)
  return in_dim / 32u * 4u;
#else
  return (in_dim + kUnitElements - 1u) / kUnitElements;
#endif
}

void decode_unit(uint row, uint u, uint in_dim, out float wv[kUnitElements],
                 out uint k[kUnitElements]) {
#if defined(WEIGHT_F32) || defined(WEIGHT_F16) || defined(WEIGHT_F16_PACKED)
  for (uint j = 0; j < kUnitElements; ++j) {
    k[j] = u * kUnitElements + j;
    const uint idx = row * in_dim + k[j];
    float v = 0.0;
    if (k[j] < in_dim) {
#if defined(WEIGHT_F32)
      v = w[idx];
#elif defined(WEIGHT_F16)
      v = float(w[idx]);
#else
      const vec2 pair = unpackHalf2x16(words[idx >> 1]);
      v = (idx & 1u) == 0u ? pair.x : pair.y;
#endif
    }
    wv[j] = v;
  }
#elif defined(WEIGHT_Q8_0) || defined(WEIGHT_Q8_0_PACKED)
  const uint block = row * (in_dim / 32u) + u / 4u;
  const uint q0 = (u % 4u) * 8u;
#if defined(WEIGHT_Q8_0)
  const float d = float(blocks[block].d);
  for (uint j = 0; j < kUnitElements; ++j) wv[j] = d * float(int(blocks[block].qs[q0 + j]));
#else
  const uint offset = block * 34u;
  const float d = load_f16_even(offset);
  const uint lo = load_u32_even(offset + 2u + q0), hi = load_u32_even(offset + 6u + q0);
  for (uint j = 0; j < 4u; ++j) {
    wv[j] = d * float(bitfieldExtract(int(lo), int(8u * j), 8));
    wv[j + 4u] = d * float(bitfieldExtract(int(hi), int(8u * j), 8));
  }
#endif
  for (uint j = 0; j < kUnitElements; ++j) k[j] = u * kUnitElements + j;
#else  // Q4_0
  const uint block = row * (in_dim / 32u) + u / 4u;
  const uint quad = u % 4u;
#if defined(WEIGHT_Q4_0)
  const float d = float(blocks[block].d);
  uint bytes = 0u;
  for (uint j = 0; j < 4u; ++j) bytes |= uint(blocks[block].qs[4u * quad + j]) << (8u * j);
#else
  const uint offset = block * 18u;
  const float d = load_f16_even(offset);
  const uint bytes = load_u32_even(offset + 2u + 4u * quad);
#endif
  for (uint j = 0; j < 4u; ++j) {
    const uint byte_value = (bytes >> (8u * j)) & 0xffu;
    wv[j] = d * float(int(byte_value & 15u) - 8);
    wv[j + 4u] = d * float(int(byte_value >> 4) - 8);
    k[j] = (u / 4u) * 32u + 4u * quad + j;
    k[j + 4u] = k[j] + 16u;
  }
#endif
}
