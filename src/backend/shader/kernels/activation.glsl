// Activation functions of unary.comp and glu.comp, with the CPU backend's
// formulas (src/backend/cpu/ops.cpp, vec_math.cpp) so that both backends
// agree to a few f32 ulps:
//   - exp_f32: the vector expf of the CPU backend (ggml's): round x*log2(e)
//     to n with the 1.5 * 2^23 shifter, reduce b = x - n*ln2 in two parts,
//     a degree-5 polynomial for exp(b) - 1, scaled by 2^n (in two steps where
//     2^n alone leaves the f32 exponent range). The device's own exp() is
//     not used: its precision differs per driver (Vulkan allows 3 + 2|x| ulp).
//   - silu_f32(x) = x / (1 + exp(-x)).
//   - swiglu_oai_f32(g, u): gpt-oss's x / (1 + exp(alpha * -x)) * (y + 1)
//     with x = min(g, limit), y = clamp(u, -limit, limit), a NaN input
//     passing through as through the CPU's comparisons. The CPU takes libm's
//     expf here, not the vector one: the two agree within an ulp or two.
//   - gelu_f32: the CPU's GELU_FP16 path: x <= -10 gives 0, x >= 10 gives x;
//     otherwise x is rounded to f16, the tanh-approximated GELU is taken in
//     f32 and the result rounded to f16 again (the CPU looks it up in a table
//     built that way). tanh_f32 is accurate to about half an ulp, as libm's
//     tanhf, so that the two agree after the f16 rounding: with IEEE f32
//     arithmetic this formula gives the CPU's table for every f16 input of
//     (-10, 10) (checked on the host and on lavapipe by
//     GeluOverEveryF16InputMatchesTheCpuTable); a device whose division or
//     fma rounds worse can land one f16 ulp off near a rounding midpoint.
// Every intermediate is `precise`: no contraction into fma, no reassociation
// (the CPU code is compiled with fp contract off).

float exp_f32(float x) {
  const float shift = uintBitsToFloat(0x4b400000u);  // 1.5 * 2^23
  const float log2e = uintBitsToFloat(0x3fb8aa3bu);
  const float ln2_hi = uintBitsToFloat(0x3f317200u);
  const float ln2_lo = uintBitsToFloat(0x35bfbe8eu);
  const float c1 = uintBitsToFloat(0x3f7ffff6u);
  const float c2 = uintBitsToFloat(0x3efffedbu);
  const float c3 = uintBitsToFloat(0x3e2aaf33u);
  const float c4 = uintBitsToFloat(0x3d2b9f17u);
  const float c5 = uintBitsToFloat(0x3c072010u);
  precise float z = fma(x, log2e, shift);
  precise float n = z - shift;
  precise float b = fma(-n, ln2_lo, fma(-n, ln2_hi, x));
  const uint e = floatBitsToUint(z) << 23;
  const float k = uintBitsToFloat(e + 0x3f800000u);
  precise float u = b * b;
  precise float c1b = c1 * b;
  precise float j = fma(fma(fma(c5, b, c4), u, fma(c3, b, c2)), u, c1b);
  const float abs_n = abs(n);
  if (!(abs_n > 126.0)) {
    precise float normal = fma(j, k, k);
    return normal;
  }
  const uint g = n <= 0.0 ? 0x82000000u : 0u;
  const float s1 = uintBitsToFloat(g + 0x7f000000u);
  const float s2 = uintBitsToFloat(e - g);
  precise float r = abs_n > 192.0 ? s1 * s1 : fma(s2, j, s2) * s1;
  return r;
}

float silu_f32(float x) {
  precise float d = 1.0 + exp_f32(0.0 - x);
  precise float r = x / d;
  return r;
}

float swiglu_oai_f32(float g, float u, float alpha, float limit) {
  // Comparisons, not min/clamp: GLSL leaves min(NaN, limit) undefined, the
  // CPU keeps the NaN (backend/cpu/ops.cpp, swiglu_oai).
  const float x = limit < g ? limit : g;
  const float y = u < -limit ? -limit : (limit < u ? limit : u);
  precise float d = 1.0 + exp_f32(alpha * (-x));
  precise float glu = x / d;
  precise float r = glu * (y + 1.0);
  return r;
}

// The f16 value nearest v (ties to even) as an f32, for |v| < 65504; NaN
// stays NaN. Integer arithmetic only, as quant::f32_to_f16.
float round_to_f16(float v) {
  const uint bits = floatBitsToUint(v);
  const uint sign = bits & 0x80000000u;
  const uint ax = bits & 0x7fffffffu;
  if (ax > 0x7f800000u) return v;
  if (ax >= 0x38800000u) {  // at least 2^-14: an f16 normal keeps 10 mantissa bits
    return uintBitsToFloat(sign | ((ax + 0xfffu + ((ax >> 13) & 1u)) & ~0x1fffu));
  }
  // The f16 subnormals are the multiples of 2^-24 (both scalings are exact).
  const float m = roundEven(uintBitsToFloat(ax) * 16777216.0) * (1.0 / 16777216.0);
  return uintBitsToFloat(sign | floatBitsToUint(m));
}

// tanh within about half an f32 ulp, as libm's tanhf: the odd Taylor series
// to u^19 below |u| = 0.55 (its next term is under 1e-8 of the sum there),
// 1 - 2 / (exp(2|u|) + 1) above (exp(2|u|) past the f32 range gives 1).
float tanh_f32(float u) {
  const float a = abs(u);
  precise float r;
  if (a < 0.55) {
    const float s = a * a;
    precise float q = uintBitsToFloat(0xb97abebcu);   // u^19: -0.000239129114
    q = q * s + uintBitsToFloat(0x3a1aac12u);         // u^17:  0.000590027441
    q = q * s + uintBitsToFloat(0xbabed1b2u);         // u^15: -0.00145583439
    q = q * s + uintBitsToFloat(0x3b6b69e8u);         // u^13:  0.00359212804
    q = q * s + uintBitsToFloat(0xbc11371bu);         // u^11: -0.00886323553
    q = q * s + uintBitsToFloat(0x3cb327a4u);         // u^9:   0.0218694885
    q = q * s + uintBitsToFloat(0xbd5d0dd1u);         // u^7:  -0.0539682540
    q = q * s + uintBitsToFloat(0x3e088889u);         // u^5:   2/15
    q = q * s + uintBitsToFloat(0xbeaaaaabu);         // u^3:  -1/3
    r = a + a * (s * q);
  } else {
    r = 1.0 - 2.0 / (exp_f32(2.0 * a) + 1.0);
  }
  return u < 0.0 ? -r : r;
}

float gelu_f32(float x) {
  if (x <= -10.0) return 0.0;
  if (x >= 10.0) return x;
  const float coef_a = uintBitsToFloat(0x3d372713u);         // 0.044715
  const float sqrt_2_over_pi = uintBitsToFloat(0x3f4c422au);  // sqrt(2 / pi)
  const float h = round_to_f16(x);
  precise float u = (sqrt_2_over_pi * h) * (1.0 + (coef_a * h) * h);
  precise float g = (0.5 * h) * (1.0 + tanh_f32(u));
  return round_to_f16(g);
}
