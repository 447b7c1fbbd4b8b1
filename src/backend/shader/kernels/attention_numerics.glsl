// Numerics shared by the attention-family kernels (rope, kv_store,
// attention), written so that the results do not depend on the driver's
// precision choices:
//   - div_rn: a / b refined by one Newton step on the exact remainder,
//     correctly rounded in all but rare cases (Vulkan's OpFDiv may be 2.5
//     ulp off; the CPU's is exact);
//   - f16_bits: f32 -> IEEE binary16 bits, round to nearest even, in integer
//     arithmetic (quant/half.h's algorithm), so no conversion rounding mode
//     of the device matters;
//   - round_away: roundf (half away from zero), the Q8_0 quantizer's;
//   - reduce_angle: t minus the nearest multiple of 2 pi, with a three-part
//     constant, so sin/cos get an argument in [-pi, pi] where every device
//     is accurate;
//   - fold_sink: an attention sink folded into a finished softmax in the
//     CPU's order (backend/cpu/ops_attention.cpp), no fma contraction.

// The rounding error e of p = a * b (a * b == p + e exactly), by Dekker's
// splitting: no fma, which lavapipe would split into a multiply and an add.
float product_error(float a, float b, float p) {
  precise float ca = 4097.0 * a, cb = 4097.0 * b;
  precise float a_hi = ca - (ca - a), b_hi = cb - (cb - b);
  precise float a_lo = a - a_hi, b_lo = b - b_hi;
  precise float e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo;
  return e;
}

float div_rn(float a, float b) {
  precise float q0 = a / b;
  precise float p = q0 * b;
  precise float r = (a - p) - product_error(q0, b, p);  // a - q0 * b, exact
  precise float q1 = q0 + r / b;
  return q1;
}

uint f16_bits(float f) {
  const uint x = floatBitsToUint(f);
  const uint sign = (x >> 16) & 0x8000u;
  const uint ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u | ((ax >> 13) & 0x3ffu);  // NaN
  if (ax >= 0x38800000u) {  // f16 normal range (or inf)
    if (ax >= 0x7f800000u) return sign | 0x7c00u;
    const uint rounded = ax + 0xfffu + ((ax >> 13) & 1u);
    const uint h = (rounded - (112u << 23)) >> 13;
    return sign | min(h, 0x7c00u);
  }
  const uint e = ax >> 23;
  if (e < 102u) return sign;
  const uint mant = (ax & 0x7fffffu) | 0x800000u;
  const uint shift = 126u - e;  // 14..24
  uint q = mant >> shift;
  const uint rem = mant & ((1u << shift) - 1u);
  const uint half_point = 1u << (shift - 1u);
  if (rem > half_point || (rem == half_point && (q & 1u) != 0u)) ++q;
  return sign | q;
}

float round_away(float v) {
  const float t = trunc(v);
  precise float frac = abs(v - t);  // exact
  return frac >= 0.5 ? t + sign(v) : t;
}

float reduce_angle(float t) {
  // 2 pi in three parts (Cody-Waite) with no fma (lavapipe splits fma into a
  // multiply and an add): kPart1 has 8 mantissa bits, so k * kPart1 and the
  // subtraction from t are exact for |k| < 2^16; the other two products
  // only round at their own (small) magnitude: ~1e-7 absolute at |t| < 1e4.
  const float kPart1 = 6.28125;
  const float kPart2 = 1.93500518798828125e-3;
  const float kPart3 = 3.0199159795074593e-7;
  const float k = floor(t * 0.15915494309189535 + 0.5);
  precise float r = (t - k * kPart1) - k * kPart2;
  precise float r2 = r - k * kPart3;
  return r2;
}

// Folds a sink logit s into a finished online softmax of max m and sum of
// weights `sum`, as one more key without a value (llama.cpp's order, the
// CPU's fold_sink): when s is the new maximum the weights are rescaled to it
// and the sink adds exp(0) = 1, else it adds exp(s - m). Returns the factor
// the V sums are multiplied by (1 when s <= m: an exact no-op). With no key
// seen (m = the kernels' masked -3e38) the factor is 0 and sum becomes 1, so
// the output stays 0, as on the CPU.
float fold_sink(float s, float m, inout float sum) {
  if (s > m) {
    const float ms = exp(m - s);
    precise float rescaled = sum * ms + 1.0;
    sum = rescaled;
    return ms;
  }
  precise float added = sum + exp(s - m);
  sum = added;
  return 1.0;
}
