// Push-constant structs of the mixture-of-experts kernels (graph/ir.h's
// kMoeTopK, kMoeWeights, kMatMulId, kMoeSum): part of kernel_args.h (include
// that, not this), under its rules: 4-byte scalar members only, every offset
// and the size pinned by static_asserts on the C++ side.
#ifndef MINFER_BACKEND_SHADER_KERNEL_ARGS_MOE_H_
#define MINFER_BACKEND_SHADER_KERNEL_ARGS_MOE_H_

// The routing kernels hold a token's scores in registers, a fixed share per
// invocation; these bound what one workgroup takes.
#define MINFER_MOE_MAX_EXPERTS 512
#define MINFER_MOE_MAX_USED 32
// graph::MoeGating's values.
#define MINFER_MOE_GATING_SOFTMAX 0u
#define MINFER_MOE_GATING_NORMALIZED 1u
#define MINFER_MOE_GATING_TOPK_SOFTMAX 2u

// moe_topk.comp: ids[t][j], j < n_used, the experts of token t by descending
// score (softmax of logits[t] for the softmax gatings, the logit itself for
// top-k softmax), a tie to the lower id; a NaN logit is reported
// (MINFER_ERR_ROUTER_NAN, value = the token) and the token gets ids 0..k-1.
// moe_weights.comp: weights[t][j] of expert ids[t][j] under `gating`; an id
// outside [0, n_expert) is reported (MINFER_ERR_EXPERT_ID) and read as 0.
// One workgroup per token, folded grid.
struct MoeRouteArgs {
  u32 n_tokens;
  u32 n_expert;  // 1..MINFER_MOE_MAX_EXPERTS
  u32 n_used;    // 1..min(n_expert, MINFER_MOE_MAX_USED)
  u32 gating;    // MINFER_MOE_GATING_*
};

// matmul.comp built with MATMUL_ID (matmul_id.manifest): MatmulArgs' members
// with the same meaning (n_tokens: the tokens T; norm and glu 0; y_stride
// out_dim), W holding n_expert matrices of out_dim rows, and output row i =
// t * n_used + j for i < n_tokens * n_used: x row t (or i with
// per_row_input) times expert ids[i]'s matrix (+ its row of bias
// [n_expert][out_dim]). One row per z group, looped past the grid's z.
struct MatmulIdArgs {
  u32 in_dim;
  u32 out_dim;
  u32 n_tokens;
  u32 lanes_log2;
  u32 lane_rows;
  u32 x_vec4;
  u32 has_bias;
  u32 has_residual;
  u32 norm;
  f32 norm_eps;
  u32 glu;
  u32 y_stride;
  u32 n_used;
  u32 n_expert;
  u32 per_row_input;  // 1: x holds one row per output row
};

// moe_sum.comp: out[t][d] = y[t*k][d] * w[t][0] + ... + y[t*k+k-1][d] *
// w[t][k-1] (k = n_used), each product and sum rounded in order of j. One
// invocation per output element, folded grid.
struct MoeSumArgs {
  u32 n_tokens;
  u32 n_used;
  u32 dim;
};

#ifdef __cplusplus
static_assert(offsetof(MoeRouteArgs, n_expert) == 4 && offsetof(MoeRouteArgs, n_used) == 8 &&
              offsetof(MoeRouteArgs, gating) == 12 && sizeof(MoeRouteArgs) == 16);
// The members matmul.comp reads through `args` lie where MatmulArgs has them.
static_assert(offsetof(MatmulIdArgs, out_dim) == offsetof(MatmulArgs, out_dim) &&
              offsetof(MatmulIdArgs, lane_rows) == offsetof(MatmulArgs, lane_rows) &&
              offsetof(MatmulIdArgs, has_residual) == offsetof(MatmulArgs, has_residual) &&
              offsetof(MatmulIdArgs, norm_eps) == offsetof(MatmulArgs, norm_eps) &&
              offsetof(MatmulIdArgs, y_stride) == offsetof(MatmulArgs, y_stride) &&
              offsetof(MatmulIdArgs, n_used) == sizeof(MatmulArgs) &&
              offsetof(MatmulIdArgs, n_expert) == 52 &&
              offsetof(MatmulIdArgs, per_row_input) == 56 && sizeof(MatmulIdArgs) == 60);
static_assert(offsetof(MoeSumArgs, n_used) == 4 && offsetof(MoeSumArgs, dim) == 8 &&
              sizeof(MoeSumArgs) == 12);
#endif

#endif  // MINFER_BACKEND_SHADER_KERNEL_ARGS_MOE_H_
