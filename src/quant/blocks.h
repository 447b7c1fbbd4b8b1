// Storage blocks of ggml's quantized tensor types, byte for byte.
//
// Contract: each struct's size equals the type_size in quant/tensor_type.cpp
// and its fields sit at the offsets the GGUF format uses, so a row of n
// elements is exactly n / block_size of these structs back to back. Scale
// fields named d/dmin/m/s are raw f16 bit patterns (quant/half.h converts)
// except Q8_K's d, which is an f32, and MXFP4's e, an E8M0 exponent byte. Everything is
// little-endian. Element e of a block means the e-th value of the block's slice of the row.
//
// Rows inside a mapped file need not be aligned for these structs; readers
// should memcpy a block out rather than cast the pointer. Threading: plain data.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace minfer::quant {

inline constexpr int kQK = 32;     // elements per block of the Q4_0..Q8_1 family
inline constexpr int kQK_K = 256;  // elements per K-quant super-block
inline constexpr int kKScaleBytes = 12;

// x[e] = d * (q[e] - 8). q[e] for e < 16 is the low nibble of qs[e]; q[e + 16]
// is the high nibble of qs[e] (first half of the block in low nibbles).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// x[e] = d * q[e] + m with q in [0, 15]; nibbles as in BlockQ4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// x[e] = d * (q[e] - 16), q 5 bits. Low 4 bits as in BlockQ4_0; bit 4 of q[e] is
// bit e of qh read as a little-endian uint32 (kept as bytes so the struct has
// no padding and the 2-byte alignment of the other blocks).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// x[e] = d * q[e] + m with q in [0, 31]; bits as in BlockQ5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// x[e] = d * qs[e].
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 34);

// x[e] = d * qs[e]; s = d * sum(qs) (rounded to f16) lets dot products with
// Q4_1/Q5_1 fold in the offset term without re-summing the quants.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_1) == 36);

// OCP microscaling FP4 (ggml's block_mxfp4): x[e] = kMxfp4Values[q[e]] * 2^(e - 128)
// with q 4 bits placed as in BlockQ4_0 (q[e] for e < 16 is the low nibble of
// qs[e], q[e + 16] its high nibble). kMxfp4Values holds the E2M1 values
// doubled (so they are integers) and the scale is halved to match: the
// element is E2M1(q) * 2^(e - 127). e is an E8M0 byte (a bare biased
// exponent); e = 0 and 1 give the f32 subnormals 2^-128 and 2^-127, and
// e = 255 (NaN in the OCP spec) is read as 2^127, as ggml does.
struct BlockMxfp4 {
  uint8_t e;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockMxfp4) == 17);

// E2M1 code -> 2 * value: codes 0..7 are +0, 0.5, 1, 1.5, 2, 3, 4, 6 and
// 8..15 the same values negated (bit 3 is the sign; code 8 is -0).
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// The block scale that multiplies kMxfp4Values: 2^(e - 128), half the E8M0
// value (ggml's ggml_e8m0_to_fp32_half, bit for bit). Exact for every e: the
// two smallest are f32 subnormals, the rest normals with exponent field e - 1.
constexpr float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// 16 sub-blocks of 16 elements; sub-block j = e / 16.
// x[e] = d * (scales[j] & 15) * q[e] - dmin * (scales[j] >> 4), q 2 bits.
// q[e]: with h = e / 128, r = e % 128, it is bits 2*(r / 32) of qs[32*h + r % 32]
// (each byte holds elements 32 apart within its 128-element half).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 sub-blocks of 16 elements; x[e] = d * (sc[j] - 32) * (lo[e] - (hi[e] ? 0 : 4)).
// lo[e]: 2 bits placed as q in BlockQ2_K. hi[e]: bit e / 32 of hmask[e % 32].
// sc[j] (6 bits): low 4 bits are nibble j / 8 of scales[j % 8]; high 2 bits are
// bits 2*(j / 4) of scales[8 + j % 4].
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kKScaleBytes];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// 8 sub-blocks of 32 elements; x[e] = d * sc[j] * q[e] - dmin * m[j], q 4 bits.
// q[e] for sub-block j: nibble j % 2 of qs[32 * (j / 2) + e % 32].
// sc/m (6 bits each) packed in scales: for j < 4, sc = scales[j] & 63 and
// m = scales[j + 4] & 63; for j >= 4, the low 4 bits come from scales[j + 4]
// (sc low nibble, m high nibble) and the top 2 bits from the spare top bits of
// scales[j - 4] (sc) and scales[j] (m).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// As BlockQ4_K with a fifth bit per element: bit 4 of q[e] is bit e / 32 of
// qh[e % 32]; q in [0, 31].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 16 sub-blocks of 16 elements; x[e] = d * scales[j] * (q[e] - 32), q 6 bits.
// With h = e / 128, r = e % 128: the low 4 bits of q[e] are nibble r / 64 of
// ql[64*h + r % 64]; the high 2 bits are bits 2*(r / 32) of qh[32*h + r % 32].
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Activation format for K-quant dot products: x[e] = d * qs[e] (d is f32);
// bsums[g] = sum of qs[16g .. 16g + 15] so dot products can apply the
// weight's per-sub-block minimum without touching the quants again.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

}  // namespace minfer::quant
