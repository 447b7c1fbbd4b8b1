// Exponential-based row kernels (SiLU, SwiGLU, softmax numerators) with the
// numerics of ggml's x86 AVX2+FMA build, for backend/cpu/ops.cpp.
//
// Contract: ggml evaluates these 8 elements at a time with its own vector
// expf (a range reduction plus a degree-5 polynomial, "adapted from ARM
// optimized routines", max error about 1.5 ulp) and only the n % 8 leftover
// elements with libm's expf. Both ISAs here reproduce that split exactly:
// the AVX2 kernels run the same instruction sequence, and the scalar kernels
// evaluate it lane by lane with std::fma, so results are bit-identical
// whichever ISA runs. Within a chunk of 8, the softmax sum is formed in f32
// in ggml's horizontal-add order and then added to a double total.
// y may alias x (and out may alias gate or up). Threading: pure functions.
#pragma once

#include <cstdint>

#include "backend/cpu/vec_dot.h"

namespace minfer::cpu::detail {

// ggml's vector expf for one lane.
float ggml_vec_expf_lane(float x);

void silu_f32(const float* x, int64_t n, float* y, Isa isa);
void swiglu_f32(const float* gate, const float* up, int64_t n, float* out, Isa isa);
// y[i] = exp(x[i] - max); returns the sum of the y[i] (double, ggml's order).
double softmax_exp_f32(const float* x, int64_t n, float max, float* y, Isa isa);

}  // namespace minfer::cpu::detail
