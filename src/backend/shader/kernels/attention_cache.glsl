// Reading the KV cache for attention.comp: bindings 4 (K) and 5 (V) as 32-bit
// words in the variant's element types (K_F32 | K_F16 | K_Q8_0, V_F32 |
// V_F16 | V_Q8_0), so no 8/16-bit storage is needed. Q8_0 blocks (34 bytes,
// quant/blocks.h) start at even bytes; the host binds whole words, so a load
// of the word after a block's last one stays inside the binding.
//   k_dot(e0): q_s . K[e0 .. e0 + head_dim) in f32 (q_s: the query in shared);
//   v_quad(e, n): V[e .. e + n) in .x.. (the rest 0) for an even e and n = 4
//   or 2 (the last group of a head_dim % 4 == 2); Q8_0: e % 4 == 0, n = 4.
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
uint v_u32_even(uint b) {
  const uint w0 = v_words[b >> 2];
  if ((b & 3u) == 0u) return w0;
  return (w0 >> 16) | (v_words[(b >> 2) + 1u] << 16);
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

// The dot goes in pieces of 32 dims whose loads are all issued before their
// products are summed (an unrolled, guarded inner loop), so that one lane's
// row costs about one memory latency per 32 dims, not one per 4.
float k_dot(uint e0) {
  const uint hd = args.head_dim;
  float s = 0.0;
#if defined(K_F32) || defined(K_F16)
  for (uint i0 = 0u; i0 < hd; i0 += 32u) {
    [[unroll]] for (uint u = 0u; u < 8u; ++u) {
      const uint i = i0 + 4u * u;
#if defined(K_F32)
      if (i + 4u <= hd) {
        const vec4 k = uintBitsToFloat(uvec4(k_words[e0 + i], k_words[e0 + i + 1u],
                                             k_words[e0 + i + 2u], k_words[e0 + i + 3u]));
        s += dot(vec4(q_s[i], q_s[i + 1u], q_s[i + 2u], q_s[i + 3u]), k);
      } else if (i < hd) {  // head_dim % 4 == 2
        s += q_s[i] * uintBitsToFloat(k_words[e0 + i]) +
             q_s[i + 1u] * uintBitsToFloat(k_words[e0 + i + 1u]);
      }
#else  // e0 is even: element pairs are whole words
      if (i + 4u <= hd) {
        const vec2 a = unpackHalf2x16(k_words[(e0 + i) >> 1]);
        const vec2 b = unpackHalf2x16(k_words[((e0 + i) >> 1) + 1u]);
        s += dot(vec4(q_s[i], q_s[i + 1u], q_s[i + 2u], q_s[i + 3u]), vec4(a, b));
      } else if (i < hd) {
        const vec2 a = unpackHalf2x16(k_words[(e0 + i) >> 1]);
        s += q_s[i] * a.x + q_s[i + 1u] * a.y;
      }
#endif
    }
  }
#else  // K_Q8_0: e0 and head_dim are multiples of 32
  for (uint b = 0u; b < hd / 32u; ++b) {
    const uint offset = (e0 / 32u + b) * 34u;
    float block_sum = 0.0;
    [[unroll]] for (uint w = 0u; w < 8u; ++w) {
      block_sum += dot_bytes(k_u32_even(offset + 2u + 4u * w), 32u * b + 4u * w);
    }
    s += k_f16_even(offset) * block_sum;
  }
#endif
  return s;
}

vec4 v_quad(uint e, uint n) {
#if defined(V_F32)
  if (n == 4u) {
    return uintBitsToFloat(uvec4(v_words[e], v_words[e + 1u], v_words[e + 2u], v_words[e + 3u]));
  }
  return vec4(uintBitsToFloat(uvec2(v_words[e], v_words[e + 1u])), 0.0, 0.0);
#elif defined(V_F16)
  const vec2 lo = unpackHalf2x16(v_words[e >> 1]);
  return n == 4u ? vec4(lo, unpackHalf2x16(v_words[(e >> 1) + 1u])) : vec4(lo, 0.0, 0.0);
#else  // V_Q8_0: the four codes e % 32 .. + 3 of block e / 32
  const uint offset = (e / 32u) * 34u;
  const float d = unpackHalf2x16(v_u16_even(offset)).x;
  const int codes = int(v_u32_even(offset + 2u + e % 32u));
  return d * vec4(float(bitfieldExtract(codes, 0, 8)), float(bitfieldExtract(codes, 8, 8)),
                  float(bitfieldExtract(codes, 16, 8)), float(bitfieldExtract(codes, 24, 8)));
#endif
}
