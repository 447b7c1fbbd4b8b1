// Argument (push-constant) structs of the GPU kernels, declared once for the
// host (C++) and for the kernels (GLSL, through glslc's #include).
//
// Contract:
//   - Each struct is what one kernel's push-constant block holds; the kernel's
//     manifest (kernels/<name>.manifest, `args` line) names it, and the
//     embedded kernel table records sizeof() of it as the kernel's push size.
//   - Members are 4-byte scalars only (u32, i32, f32): their offsets are the
//     same under C++'s natural layout and GLSL's std430 push-constant layout,
//     with no padding. The static_asserts below pin every offset and size on
//     the C++ side; at device init the SPIR-V's push-constant block size is
//     compared with sizeof() (backend/shader/spirv_reflect.h), so a drifting
//     layout is a startup error naming the kernel.
//   - A GLSL kernel declares `layout(push_constant) uniform Push { XArgs args; };`.
// Threading: plain data.
#ifndef MINFER_BACKEND_SHADER_KERNEL_ARGS_H_
#define MINFER_BACKEND_SHADER_KERNEL_ARGS_H_

// The error words (MINFER_ERR_*), shared with the CUDA kernels.
#include "backend/device_errors.h"

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
namespace minfer::shader::args {
using u32 = uint32_t;
using i32 = int32_t;
using f32 = float;
#else
#define u32 uint
#define i32 int
#define f32 float
#endif

// elementwise.comp: out[i] = a[i] op b[i % n_b] for i < n (n_b > 0 divides
// nothing in particular: b is repeated, a bias row broadcast over tokens).
struct ElementwiseArgs {
  u32 n;
  u32 n_b;
};

// rms_norm.comp: y[r][i] = x[r][i] / sqrt(mean(x[r]^2) + eps) * (w[i] or 1),
// r < n_rows, i < dim; one workgroup per row.
struct RmsNormArgs {
  u32 dim;
  u32 n_rows;
  u32 has_weight;  // 0: binding 1 is bound but not read
  f32 eps;
};

// matmul.comp: y[t][r] = dot(W[r], x[t]) for r < out_dim, t < n_tokens; W is
// [out_dim][in_dim] in the variant's weight type, x [n_tokens][in_dim] f32.
// Each set of 2^lanes_log2 invocations (at most the workgroup size, chosen
// from the type and in_dim alone) computes lane_rows consecutive rows (1..
// MINFER_MATMUL_MAX_LANE_ROWS). Grid: one workgroup per workgroup-size /
// 2^lanes_log2 * lane_rows rows (folded over x and y) and per
// MINFER_MATMUL_TOKENS_PER_GROUP tokens (z). y[t][r] lies at t * y_stride
// + r (y_stride >= out_dim), as does residual[t][r]. x_vec4: 1 when x's binding
// offset and in_dim are multiples of 16 bytes and 4 elements (x read as
// vec4), else 0.
#define MINFER_MATMUL_TOKENS_PER_GROUP 8
#define MINFER_MATMUL_MAX_LANE_ROWS 4
struct MatmulArgs {
  u32 in_dim;
  u32 out_dim;
  u32 n_tokens;
  u32 lanes_log2;
  u32 lane_rows;
  u32 x_vec4;
  u32 has_bias;      // 1: y += bias[r] (binding 3, f32 [out_dim])
  u32 has_residual;  // 1: y += residual[t][r] after the bias (binding 4)
  // Input norm: 0 none; 1: x[t] / sqrt(mean(x[t]^2) + norm_eps) is what the
  // rows multiply (rms_norm.comp's bits); 2: that times norm_w (binding 5).
  u32 norm;
  f32 norm_eps;
  // GLU: 0 none; 1 SwiGLU, 2 GeGLU: W holds 2 * out_dim rows (gate rows, then
  // up rows) and y[t][r] = act(gate_r . x[t]) * (up_r . x[t]) (glu.comp's bits).
  u32 glu;
  // Floats from one token's row of y (and of the residual) to the next:
  // out_dim, or more where y's rows are a column range of a wider output.
  u32 y_stride;
};
#define MINFER_MATMUL_NORM_WEIGHTED 2u
#define MINFER_MATMUL_GLU_SWIGLU 1u
#define MINFER_MATMUL_GLU_GEGLU 2u

// spin.comp (test only): each workgroup loops until flag[0] != 0 or
// max_iterations pass; workgroup 0 writes its iteration count to count[0].
struct SpinArgs {
  u32 max_iterations;
};

// Error words (codes and layout: backend/device_errors.h, included above;
// kernels/errors.glsl reports them): a kernel that checks an index binds the
// MINFER_ERR_WORDS u32 words with access `atomic`.

// The argument structs of each kernel family, one header each (same rules;
// each keeps its own static_asserts under __cplusplus).
#include "kernel_args_activation.h"
#include "kernel_args_attention.h"
#include "kernel_args_moe.h"
#include "kernel_args_quant.h"
#include "kernel_args_tiled.h"

#ifdef __cplusplus
static_assert(offsetof(ElementwiseArgs, n_b) == 4 && sizeof(ElementwiseArgs) == 8);
static_assert(offsetof(RmsNormArgs, n_rows) == 4 && offsetof(RmsNormArgs, has_weight) == 8 &&
              offsetof(RmsNormArgs, eps) == 12 && sizeof(RmsNormArgs) == 16);
static_assert(offsetof(MatmulArgs, out_dim) == 4 && offsetof(MatmulArgs, n_tokens) == 8 &&
              offsetof(MatmulArgs, lanes_log2) == 12 && offsetof(MatmulArgs, lane_rows) == 16 &&
              offsetof(MatmulArgs, x_vec4) == 20 && offsetof(MatmulArgs, has_bias) == 24 &&
              offsetof(MatmulArgs, has_residual) == 28 && offsetof(MatmulArgs, norm) == 32 &&
              offsetof(MatmulArgs, norm_eps) == 36 && offsetof(MatmulArgs, glu) == 40 &&
              offsetof(MatmulArgs, y_stride) == 44 && sizeof(MatmulArgs) == 48);
static_assert(sizeof(SpinArgs) == 4);
}  // namespace minfer::shader::args
#else
#undef u32
#undef i32
#undef f32
#endif

#endif  // MINFER_BACKEND_SHADER_KERNEL_ARGS_H_
