// Reading the KV cache for attention.comp: bindings 4 (K) and 5 (V) as 32-bit
// words in the variant's element types (K_F32 | K_F16 | K_Q8_0, V_F32 |
// V_F16 | V_Q8_0), so no 8/16-bit storage is needed. Q8_0 blocks (34 bytes,
// quant/blocks.h) start at even bytes; the host binds whole words, so a load
// of the word after a block's last one stays inside the binding.
//   k_dot(e0): q_s . K[e0 .. e0 + head_dim) in f32 (q_s: the query in shared);
//   v_pair(e): V[e], V[e + 1] for an even element index e.
// Element indices count elements of a region: row * row_len + kv_head *
// head_dim + i.
layout(std430, binding = 4) readonly buffer KCache { uint k_words[]; };
layout(std430, binding = 5) readonly buffer VCache { uint v_words[]; };

uint k_u32_even(uint b) {
  const uint w0 = k_words[b >> 2];
  if ((b & 3u) == 0u) return w0;
  return (w0 >> 16) | (k_words[(b >> 2) + 1u] << 16);
}
uint v_u16_even(uint b) {
  return (v_words[b >> 2] >> ((b & 2u) * 8u)) & 0xffffu;
}
float k_f16_even(uint b) {
  return unpackHalf2x16((k_words[b >> 2] >> ((b & 2u) * 8u)) & 0xffffu).x;
}

// Four signed bytes of a word times four query values.
float dot_bytes(uint word, uint qi) {
  return q_s[qi] * float(bitfieldExtract(int(word), 0, 8)) +
         q_s[qi + 1u] * float(bitfieldExtract(int(word), 8, 8)) +
         q_s[qi + 2u] * float(bitfieldExtract(int(word), 16, 8)) +
         q_s[qi + 3u] * float(bitfieldExtract(int(word), 24, 8));
}

float k_dot(uint e0) {
  const uint hd = args.head_dim;
  float s = 0.0;
#if defined(K_F32)
  uint i = 0u;
  for (; i + 4u <= hd; i += 4u) {
    const vec4 k = uintBitsToFloat(uvec4(k_words[e0 + i], k_words[e0 + i + 1u],
                                         k_words[e0 + i + 2u], k_words[e0 + i + 3u]));
    s += dot(vec4(q_s[i], q_s[i + 1u], q_s[i + 2u], q_s[i + 3u]), k);
  }
  if (i < hd) {  // head_dim % 4 == 2
    s += q_s[i] * uintBitsToFloat(k_words[e0 + i]) +
         q_s[i + 1u] * uintBitsToFloat(k_words[e0 + i + 1u]);
  }
#elif defined(K_F16)
  uint i = 0u;  // e0 is even: element pairs are whole words
  for (; i + 4u <= hd; i += 4u) {
    const vec2 a = unpackHalf2x16(k_words[(e0 + i) >> 1]);
    const vec2 b = unpackHalf2x16(k_words[((e0 + i) >> 1) + 1u]);
    s += dot(vec4(q_s[i], q_s[i + 1u], q_s[i + 2u], q_s[i + 3u]), vec4(a, b));
  }
  if (i < hd) {
    const vec2 a = unpackHalf2x16(k_words[(e0 + i) >> 1]);
    s += q_s[i] * a.x + q_s[i + 1u] * a.y;
  }
#else  // K_Q8_0: e0 and head_dim are multiples of 32
  for (uint b = 0u; b < hd / 32u; ++b) {
    const uint offset = (e0 / 32u + b) * 34u;
    float block_sum = 0.0;
    for (uint w = 0u; w < 8u; ++w) {
      block_sum += dot_bytes(k_u32_even(offset + 2u + 4u * w), 32u * b + 4u * w);
    }
    s += k_f16_even(offset) * block_sum;
  }
#endif
  return s;
}

vec2 v_pair(uint e) {
#if defined(V_F32)
  return uintBitsToFloat(uvec2(v_words[e], v_words[e + 1u]));
#elif defined(V_F16)
  return unpackHalf2x16(v_words[e >> 1]);
#else  // V_Q8_0
  const uint offset = (e / 32u) * 34u;
  const float d = unpackHalf2x16(v_u16_even(offset)).x;
  const int pair = int(v_u16_even(offset + 2u + e % 32u));
  return d * vec2(float(bitfieldExtract(pair, 0, 8)), float(bitfieldExtract(pair, 8, 8)));
#endif
}
