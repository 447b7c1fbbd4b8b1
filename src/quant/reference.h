// Scalar reference (de)quantization of tensor rows.
//
// Contract: the plain, readable definition of every supported format's
// numerics. Fast kernels (SIMD, GPU) are tested against these functions, so
// they favour exactness over speed:
//   - dequantize_row is bit-exact with ggml's reference dequantization (and the
//     gguf Python package): same operations, in the same order, in f32, never
//     fused into FMAs.
//   - quantize_row for F16/BF16/Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q8_1/Q8_K/MXFP4
//     produces the same bytes as ggml's reference quantizers (activations
//     quantized here therefore follow llama.cpp's numerics); MXFP4 differs
//     only for blocks whose largest |x| is below 2^-125, where ggml's exponent
//     is undefined and this one is clamped to 0 (docs/QUANT.md). The K-quant weight quantizers
//     (Q2_K..Q6_K) use this project's own least-squares fit; their output is a
//     valid encoding with the error listed in docs/QUANT.md, not ggml's bytes.
// Errors (as Status, never aborts): a type without a reference, n negative or
// not a multiple of the type's block size (the message names the type and n),
// a null buffer with n > 0, and for quantized destination types a non-finite
// input (the message names its index). On error dst is unspecified.
// Buffers need no particular alignment and must not overlap.
// Threading: no shared state; concurrent calls on disjoint buffers are safe.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "quant/tensor_type.h"

namespace minfer::quant {

bool has_reference_dequantize(TensorType type);
bool has_reference_quantize(TensorType type);

// The types a model's weights may have: those with a reference dequantizer
// (every backend's kernels are tested against it; the CPU backend computes
// all of them), less Q8_1 and Q8_K, which exist for activations only. A
// tensor of any other type (IQ*, TQ*, ...) is refused when the model loads.
bool is_weight_type(TensorType type);
// "F32, F16, BF16, Q4_0, ..." for messages.
std::string weight_type_names();

// Decodes n elements of `type` at src into n floats at dst.
Status dequantize_row(TensorType type, const void* src, float* dst, int64_t n);

// Encodes n floats at src into row_bytes(type, n) bytes at dst.
Status quantize_row(TensorType type, const float* src, void* dst, int64_t n);

}  // namespace minfer::quant
