// Push-constant structs of the activation kernels: part of kernel_args.h (include
// that, not this), under its rules: 4-byte scalar members only, every offset
// and the size pinned by static_asserts on the C++ side.
#ifndef MINFER_BACKEND_SHADER_KERNEL_ARGS_ACTIVATION_H_
#define MINFER_BACKEND_SHADER_KERNEL_ARGS_ACTIVATION_H_

// unary.comp: out[i] = f(x[i]) for i < n (f: x * scale, silu, gelu; scale is
// read by the scale variant only). One invocation per element, folded grid.
struct UnaryArgs {
  u32 n;
  f32 scale;
};

// glu.comp: out[i] = act(gate[i]) * up[i] for i < n (act: silu, gelu); the
// swiglu_oai variant (gpt-oss, graph::GluMeta) clamps gate above and up on
// both sides at `limit` and gives x * sigmoid(alpha * x) * (y + 1). alpha and
// limit are read by that variant only.
struct GluArgs {
  u32 n;
  f32 alpha;
  f32 limit;
};

// argmax.comp: out[r] = the first index of the largest element of row r of
// x [n_rows][row_len] (NaN never wins; -1 when nothing beats -inf). One
// workgroup per row, folded grid.
struct ArgmaxArgs {
  u32 n_rows;
  u32 row_len;
};

// gather_rows.comp: out[i][c] = x[ids[i]][c] * scale for i < n_out, c <
// row_len, x holding n_src rows; an id outside [0, n_src) writes nothing for
// its row and reports MINFER_ERR_ROW_ID. The gather_rows variant runs one
// invocation per output element (folded grid); gather_rows_in_place, for out
// == x, one invocation per column that walks the rows in order.
struct GatherRowsArgs {
  u32 n_src;
  u32 row_len;
  u32 n_out;
  f32 scale;
};

#ifdef __cplusplus
static_assert(offsetof(UnaryArgs, scale) == 4 && sizeof(UnaryArgs) == 8);
static_assert(offsetof(GluArgs, alpha) == 4 && offsetof(GluArgs, limit) == 8 &&
              sizeof(GluArgs) == 12);
static_assert(offsetof(ArgmaxArgs, row_len) == 4 && sizeof(ArgmaxArgs) == 8);
static_assert(offsetof(GatherRowsArgs, row_len) == 4 && offsetof(GatherRowsArgs, n_out) == 8 &&
              offsetof(GatherRowsArgs, scale) == 12 && sizeof(GatherRowsArgs) == 16);
#endif

#endif  // MINFER_BACKEND_SHADER_KERNEL_ARGS_ACTIVATION_H_
