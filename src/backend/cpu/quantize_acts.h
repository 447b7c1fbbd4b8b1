// Activation rows quantized for the integer dot products: Q8_0, Q8_1 and Q8_K.
//
// Every quantized matmul and the Q8_0 KV cache quantize their f32 input once
// per call; on a one-token decode step that is ~250k elements for a 0.5B
// model, which the scalar reference (quant::quantize_row: one roundf call per
// element) takes about a tenth of the step to do. These run the same
// operations eight lanes at a time.
//
// Contract:
//   - quantize_activations(type, x, dst, n) writes exactly the bytes
//     quant::quantize_row(type, x, dst, n) writes, for every input, on any
//     CPU: Q8_0/Q8_1 with d = amax / 127, q = round half away from zero of
//     x * (1 / d); Q8_K with the first element of largest magnitude mapping to
//     -127 and the rest rounding half to even (ggml's reference quantizers).
//   - Errors are quant::quantize_row's, with its messages: a type other than
//     those three goes to quant::quantize_row (which may support it), n not a
//     multiple of the block size, a non-finite input (its index named).
// Dispatch: the AVX2 path where active_isa() is AVX2 (the CPU has it and no
// MINFER_* setting turned it off); elsewhere quant::quantize_row itself.
// Threading: no shared state; concurrent calls on disjoint buffers are safe.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "quant/tensor_type.h"

namespace minfer::cpu {

[[nodiscard]] Status quantize_activations(quant::TensorType type, const float* x, void* dst,
                                          int64_t n);

#if defined(__x86_64__)
namespace detail {
// The AVX2 path itself (tests put it against the reference). False when the
// row holds a non-finite value (dst is then unspecified). Preconditions: type
// is Q8_0, Q8_1 or Q8_K, n a multiple of its block size, the CPU has AVX2.
bool quantize_activations_avx2(quant::TensorType type, const float* x, void* dst, int64_t n);
}  // namespace detail
#endif

}  // namespace minfer::cpu
