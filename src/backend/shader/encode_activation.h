// Encoders of the activation kernels (unary.comp, glu.comp, argmax.comp,
// gather_rows.comp): the scale / copy, SiLU and GELU, the gated
// feed-forward products, the greedy argmax and the activation gather. The op
// table of a GPU backend calls these; they know nothing of graph nodes.
//
// Contract (every function, as encoders.h):
//   - Shapes are checked and refused, not absorbed: sizes must be positive
//     and fit the kernels' 32-bit indices, each binding must hold what the
//     shapes say it holds (a range's size, or its buffer's capacity past the
//     offset). Errors are invalid_argument naming the op, the value and the
//     limit; device limits are checked by the Recorder (limits.h).
//   - Nothing runs until the recorder's submit_and_wait().
//   - Numerics are the CPU backend's (backend/cpu/ops.h): silu x / (1 +
//     exp(-x)) with the CPU's vector expf; gelu its GELU_FP16 path (x and the
//     result rounded to f16; the tanh approximation in between), equal to
//     the CPU's table for every input with IEEE f32 division and fma
//     (lavapipe), else at most one f16 ulp off near a rounding midpoint;
//     scale and the products exact f32 multiplies (kernels/activation.glsl).
// Threading: as the Recorder.
#pragma once

#include <cstdint>
#include <string_view>

#include "backend/shader/device.h"
#include "backend/shader/recorder.h"
#include "base/status.h"

namespace minfer::shader {

enum class UnaryOp { kScale, kSilu, kGelu };

// out[i] = f(x[i]) for i < n, f32: kScale x * scale, kSilu x * sigmoid(x),
// kGelu the tanh-approximated GELU (`scale` is read by kScale only). out may
// be x (in place). kScale with scale 1 is also the backend's copy.
Status encode_unary(Recorder& rec, UnaryOp op, const BufferRange& x, const BufferRange& out,
                    int64_t n, float scale, std::string_view note = {});

enum class GluOp { kSwiGLU, kGeGLU };

// out[i] = act(gate[i]) * up[i] for i < n, f32 (act = silu / gelu); out may
// be gate or up.
Status encode_glu(Recorder& rec, GluOp op, const BufferRange& gate, const BufferRange& up,
                  const BufferRange& out, int64_t n, std::string_view note = {});

// gpt-oss's swiglu_oai (graph::Op::kSwiGLUOai, docs/GPT_OSS.md): for i < n,
// x = min(gate[i], limit), y = clamp(up[i], -limit, limit), out[i] = x / (1
// + exp(alpha * -x)) * (y + 1), f32, in the CPU's order; a NaN gate or up
// gives NaN (the CPU's comparisons, not fminf). The exp is the vector expf
// of the other activations, where the CPU takes libm's: a few ulps apart.
// out may be gate or up. Refused as encode_glu, and a limit or alpha that
// is not finite.
Status encode_swiglu_oai(Recorder& rec, const BufferRange& gate, const BufferRange& up,
                         const BufferRange& out, int64_t n, float alpha, float limit,
                         std::string_view note = {});

// out[r] (i32) = index of the first largest element of row r of x (n_rows
// rows of row_len f32); NaN never wins; a row of only -inf (or NaN) gives -1.
// The CPU backend's argmax (CpuBackend::run_argmax).
Status encode_argmax(Recorder& rec, const BufferRange& x, const BufferRange& out, int64_t n_rows,
                     int64_t row_len, std::string_view note = {});

// The most rows an in-place gather (out == x) takes: its kernel walks the
// rows in order, one iteration per row in every invocation, and lavapipe
// ends any invocation's loops after 65535 iterations.
inline constexpr int64_t kMaxInPlaceGatherRows = 16384;

// Activation gather: out[i][:] = x[ids[i]][:] * scale for i < n_out, rows of
// row_len f32; ids i32 [n_out]; x holds n_src rows; err is the error-word
// buffer (MINFER_ERR_WORDS u32, backend/device_errors.h), which the caller zeroes
// before the submission and reads after its wait. An id outside [0, n_src)
// writes nothing for its row and reports MINFER_ERR_ROW_ID (value: the id as
// u32 bits, bound: n_src); only the first error of a submission is kept.
// Aliasing: out and x either do not overlap, or are the same range start
// (same buffer and offset: in place, n_out <= kMaxInPlaceGatherRows), which
// gives exactly the CPU's in-order memmove: row i gets what row ids[i] holds
// once rows 0 .. i-1 are written (so with ids[i] >= i, the input row). Any
// other overlap of out with x or ids, or of err with any binding, is
// refused.
Status encode_gather_rows(Recorder& rec, const BufferRange& x, const BufferRange& ids,
                          const BufferRange& out, const BufferRange& err, int64_t n_src,
                          int64_t row_len, int64_t n_out, float scale, std::string_view note = {});

}  // namespace minfer::shader
