// Encoders: one function per kernel family that checks an op's shapes,
// picks the kernel variant the device has (the feature probe's outcome),
// computes the grid and records the dispatch through a Recorder. The op
// table of a GPU backend calls these; they know nothing of graph nodes.
//
// Contract (every function):
//   - Shapes are checked and refused, not absorbed: sizes must be positive
//     and fit the kernels' 32-bit indices, each binding must hold what the
//     shapes say it holds (a range's size, or its buffer's capacity past the
//     offset), quantized rows must be whole blocks. Errors are
//     invalid_argument (a malformed call) or unimplemented (a weight type
//     with no kernel here), and name the op, the value and the limit.
//   - Device limits are checked by the Recorder (limits.h) with the numbers.
//   - Nothing runs until the recorder's submit_and_wait().
// Threading: as the Recorder.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "backend/shader/device.h"
#include "backend/shader/encode_activation.h"
#include "backend/shader/recorder.h"
#include "base/status.h"
#include "quant/tensor_type.h"

namespace minfer::shader {

enum class ElementwiseOp { kAdd, kMul };

// out[i] = a[i] op b[i % n_b] for i < n, f32 (n_b == n: same shape; n_b a
// row: broadcast). out may be a or b (in place).
Status encode_elementwise(Recorder& rec, ElementwiseOp op, const BufferRange& a,
                          const BufferRange& b, const BufferRange& out, int64_t n, int64_t n_b,
                          std::string_view note = {});

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for n_rows rows of dim f32;
// `w` with a null buffer: no weight. y may be x (in place).
Status encode_rms_norm(Recorder& rec, const BufferRange& x, const BufferRange& w,
                       const BufferRange& y, int64_t n_rows, int64_t dim, float eps,
                       std::string_view note = {});

struct MatmulShape {
  int64_t in_dim = 0;    // elements of a weight row and of an activation row
  int64_t out_dim = 0;   // weight rows
  int64_t n_tokens = 0;  // activation rows
  // Floats from one token's row of y (and of a residual) to the next; 0:
  // out_dim. More where y's rows are a column range of a wider output (a
  // weight bound in row ranges).
  int64_t y_stride = 0;

  int64_t stride() const { return y_stride > 0 ? y_stride : out_dim; }
  // The floats y spans: (n_tokens - 1) * stride() + out_dim.
  uint64_t y_floats() const { return uint64_t(n_tokens - 1) * stride() + out_dim; }
};

// The matmul kernel for weights of `type` on the recorder's device: the
// first variant it has, in order of preference (8/16-bit storage, then the
// packed words), or unimplemented naming the type and why each variant is
// not there.
Result<uint32_t> matmul_kernel(const Device& device, quant::TensorType type);

// y[t][r] = dot(W[r], x[t]): W [out_dim][in_dim] of `type` (F32, F16, BF16,
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: every weight
// type of quant::is_weight_type; K-quant rows are whole 256-element blocks),
// x [n_tokens][in_dim] f32, y [n_tokens][out_dim] f32 (rows shape.stride()
// floats apart, stride >= out_dim; the floats between are not written).
// `kernel` is matmul_kernel(type) or (tests) another available variant of
// the same type.
// `epilogue` adds, in this order and in f32 as separate element-wise adds
// would: a bias row (f32 [out_dim]) and a residual (f32 [n_tokens][out_dim],
// the same range as y or disjoint from it); a null buffer: none.
// With `glu`, W holds 2 * out_dim rows (the gate's, then the up's: two
// weights back to back) and y[t][r] = act(gate_r . x[t]) * (up_r . x[t]),
// the bits of two plain matmuls and encode_glu; no bias or residual then.
// `prologue` with norm set multiplies by x[t] / sqrt(mean(x[t]^2) + eps)
// (times weight, f32 [in_dim], when its buffer is not null) instead of x[t]:
// the bits of encode_rms_norm followed by the plain matmul.
struct MatmulEpilogue {
  BufferRange bias;
  BufferRange residual;
  std::optional<GluOp> glu;
};
struct MatmulPrologue {
  bool norm = false;
  BufferRange weight;
  float eps = 1e-6f;
};
Status encode_matmul(Recorder& rec, uint32_t kernel, quant::TensorType type, const BufferRange& w,
                     const BufferRange& x, const BufferRange& y, MatmulShape shape,
                     std::string_view note = {}, const MatmulEpilogue& epilogue = {},
                     const MatmulPrologue& prologue = {});

// The expert matmul of a mixture of experts (graph/ir.h's kMatMulId) on the
// row kernel (matmul.comp built with MATMUL_ID). W holds n_expert matrices
// of [out_dim][in_dim] of `type` back to back (the 3-D GGUF tensor); ids i32
// [n_tokens][n_used]; x f32 [n_tokens][in_dim], or [n_tokens * n_used]
// [in_dim] with per_row_input; y f32 [n_tokens * n_used][out_dim], row i =
// t * n_used + j = x row t (or i) times expert ids[i]'s matrix, plus its row
// of `bias` (f32 [n_expert][out_dim]; a null buffer: none). Each row sums in
// the order of a plain matmul of one token (type, in_dim and the subgroup
// size alone), so a row never depends on the rest of the batch. An id
// outside [0, n_expert) is reported as MINFER_ERR_EXPERT_ID through `err`
// (as encode_get_rows) and its row computed with expert 0. `kernel` is
// matmul_id_kernel(type) or (tests) another available variant of the type.
struct MatmulIdShape {
  int64_t in_dim = 0;
  int64_t out_dim = 0;  // rows of one expert's matrix
  int64_t n_expert = 0;
  int64_t n_used = 0;
  int64_t n_tokens = 0;
  bool per_row_input = false;
};
Result<uint32_t> matmul_id_kernel(const Device& device, quant::TensorType type);
Status encode_matmul_id(Recorder& rec, uint32_t kernel, quant::TensorType type,
                        const BufferRange& w, const BufferRange& x, const BufferRange& ids,
                        const BufferRange& bias, const BufferRange& y, const BufferRange& err,
                        const MatmulIdShape& shape, std::string_view note = {});

// Tests only: how every later encode_matmul and encode_matmul_id runs
// instead of its own choice (the defaults restore that choice). lanes: the invocations per row
// (rounded down to a power of two, at most the workgroup); lane_rows: the
// rows each set of them computes (1..4); scalar_x: x read element by element
// even where vec4 loads are possible; id_groups: encode_matmul_id's z groups
// at most this many (its kernel loops over the other rows, as past the
// device's limit). Not for use while other threads encode.
struct MatmulForTesting {
  uint32_t lanes = 0;
  uint32_t lane_rows = 0;
  bool scalar_x = false;
  uint32_t id_groups = 0;
};
void force_matmul_for_testing(MatmulForTesting how);

// The get_rows kernel for weights of `type` (every type the matmul has), or
// unimplemented; variants preferred as in matmul_kernel.
Result<uint32_t> get_rows_kernel(const Device& device, quant::TensorType type);

// out[i][:] = dequant(W[ids[i]]) * scale for i < n_ids (the embedding lookup):
// W [n_rows][row_len] of `type`, ids i32 [n_ids], out f32 [n_ids][row_len];
// each value is bit-exact with quant::dequantize_row times `scale` in f32.
// An id outside [0, n_rows) writes nothing for that row and reports
// MINFER_ERR_ROW_ID (value = the id, bound = n_rows) through `err`, the error
// words of backend/device_errors.h (at least MINFER_ERR_WORDS u32, zeroed by the
// caller; the first error is kept). `kernel` is get_rows_kernel(type) or
// (tests) another available variant of the same type.
// `range` (a table past one binding): `w` holds rows [first, first + rows)
// of the n_rows, and only the ids among them are written; the call whose
// range starts at row 0 reports the ids outside the table. Default: all.
struct RowRange {
  int64_t first = 0;
  int64_t rows = 0;  // 0: n_rows - first
};
Status encode_get_rows(Recorder& rec, uint32_t kernel, quant::TensorType type, const BufferRange& w,
                       const BufferRange& ids, const BufferRange& out, const BufferRange& err,
                       int64_t n_rows, int64_t row_len, int64_t n_ids, float scale,
                       std::string_view note = {}, RowRange range = {});

}  // namespace minfer::shader
