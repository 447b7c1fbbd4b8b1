// Push-constant struct of the tiled matmul: part of kernel_args.h (include
// that, not this), under its rules: 4-byte scalar members only, every offset
// and the size pinned by static_asserts on the C++ side.
#ifndef MINFER_BACKEND_SHADER_KERNEL_ARGS_TILED_H_
#define MINFER_BACKEND_SHADER_KERNEL_ARGS_TILED_H_

// matmul_tiled.comp: y[t][r] = dot(W[r], x[t]) for r < out_dim, t <
// n_tokens, the GEMM of prefill batches; W [out_dim][in_dim] in the
// variant's weight type, x [n_tokens][in_dim] f32, y [n_tokens][out_dim] f32.
// Grid: one workgroup per MINFER_MATMUL_TILED_ROWS rows (folded over x and y)
// and per MINFER_MATMUL_TILED_TOKENS tokens (z), 256 invocations each: the
// tile of the variants named "<type>"; "<type>_r<rows>t<tokens>" have theirs.
#define MINFER_MATMUL_TILED_ROWS 128
#define MINFER_MATMUL_TILED_TOKENS 128
struct MatmulTiledArgs {
  u32 in_dim;
  u32 out_dim;
  u32 n_tokens;
  u32 y_stride;  // y[t][r] lies at t * y_stride + r (y_stride >= out_dim)
};

#ifdef __cplusplus
static_assert(offsetof(MatmulTiledArgs, out_dim) == 4 && offsetof(MatmulTiledArgs, n_tokens) == 8 &&
              offsetof(MatmulTiledArgs, y_stride) == 12 && sizeof(MatmulTiledArgs) == 16);
#endif

#endif  // MINFER_BACKEND_SHADER_KERNEL_ARGS_TILED_H_
