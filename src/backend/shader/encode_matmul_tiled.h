// The tiled matmul (kernels/matmul_tiled.comp): y[t][r] = dot(W[r], x[t])
// as a GEMM for batches of many tokens (prefill), where matmul.comp's
// row-per-workgroup kernel would re-read each weight row n_tokens / 4 times.
// A workgroup computes a tile of 128 rows x 128 tokens (or 64 x 64 for
// shapes with few tiles) through shared memory; weights are decoded by
// weights.glsl, bit-exact with quant::dequantize_row, and the sums are f32 in
// an order that depends on the shapes alone but differs from encode_matmul's:
// use it where a batch need not be bit-identical to the same tokens decoded
// one by one. Many times encode_matmul's rate on prefill shapes
// (docs/PERFORMANCE.md, "Constants and their measurements").
//
// Contract: as encoders.h (shapes checked and refused with the op, the value
// and the limit; binding sizes checked; device limits by the Recorder;
// nothing runs before submit_and_wait()).
// Threading: as the Recorder.
#pragma once

#include <cstdint>
#include <string_view>

#include "backend/shader/device.h"
#include "backend/shader/encoders.h"
#include "backend/shader/recorder.h"
#include "base/status.h"
#include "quant/tensor_type.h"

namespace minfer::shader {

// The tiled GEMM for weights of `type` (every type encode_matmul takes: F32,
// F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K) on `device`, or
// unimplemented naming the type and why its kernel is not there.
Result<uint32_t> matmul_tiled_kernel(const Device& device, quant::TensorType type);

// The smallest n_tokens from which the tiled kernel beats encode_matmul on
// `device`, per decoder layer (docs/PERFORMANCE.md, "Constants and their
// measurements"; the benchmark of tests/backend/vulkan_matmul_tiled_test.cpp);
// below it, use encode_matmul.
// Narrow outputs (out_dim <= 256, the k/v projections) gain only from ~512
// tokens: one tile row cannot fill the GPU.
int64_t matmul_tiled_min_tokens(const Device& device);

// The variant and tile that encode_matmul_tiled dispatches for `kernel` and
// `shape`: the type's default variant (matmul_tiled_kernel) stands for "pick
// the tile from the shape" (128 x 128, or 64 x 64 where too few 128 x 128
// tiles would fill the device); any other variant is its own tile.
// invalid_argument when `kernel` is no matmul_tiled variant of `type`.
struct MatmulTile {
  uint32_t kernel = 0;
  uint32_t rows = 0, tokens = 0;
};
Result<MatmulTile> matmul_tiled_tile(const Device& device, uint32_t kernel, quant::TensorType type,
                                     MatmulShape shape);

// y[t][r] = dot(W[r], x[t]): W [out_dim][in_dim] of `type`, x
// [n_tokens][in_dim] f32, y [n_tokens][out_dim] f32; the same shapes, checks
// and errors as encode_matmul. `kernel` is matmul_tiled_kernel(type) or
// (tests, benchmarks) another available matmul_tiled variant of that type.
Status encode_matmul_tiled(Recorder& rec, uint32_t kernel, quant::TensorType type,
                           const BufferRange& w, const BufferRange& x, const BufferRange& y,
                           MatmulShape shape, std::string_view note = {});

}  // namespace minfer::shader
