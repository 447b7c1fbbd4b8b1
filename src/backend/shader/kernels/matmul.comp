// y[t][r] = dot(W[r], x[t]): W [out_dim][in_dim] in the variant's weight type
// (matmul_units.glsl), x [n_tokens][in_dim] f32, y [n_tokens][out_dim] f32
// (token t's row at t * args.y_stride).
//
// A set of 2^args.lanes_log2 lanes (the host picks the count from the type
// and in_dim alone) computes args.lane_rows consecutive rows (1..
// MINFER_MATMUL_MAX_LANE_ROWS), so a workgroup covers WG_X / lanes *
// lane_rows rows (folded over x and y) and MINFER_MATMUL_TOKENS_PER_GROUP
// tokens (z). Lane l of a set takes the units l, l + lanes, ... in that
// order; for each it loads the unit of all its rows at once (their loads in
// flight together), then per token the unit's x once for all the rows, and
// accumulates per row and token, chunk by chunk of 4 weights (decoding each
// row's weights again per token: ALU is cheaper than x traffic and
// registers). The lanes of a row meet:
//   - lanes == subgroup size: one subgroupAdd, no shared memory, no barrier;
//   - lanes > subgroup size: subgroupAdd per subgroup, one shared slot per
//     subgroup, a barrier, the row's slots summed in order (and a barrier
//     before the next row reuses them);
//   - lanes < subgroup size: one subgroupAdd per row of the subgroup, the
//     lanes of the other rows adding zeros.
// Lanes are numbered by subgroup (gl_SubgroupID * gl_SubgroupSize +
// gl_SubgroupInvocationID), so a row's lanes fill whole subgroups; this
// needs every subgroup full, as WG_X is a multiple of every subgroup size.
// A token's summation order is thus fixed by in_dim, the type and the
// device's subgroup size: never by n_tokens or the other tokens of a batch.
//
// Fusions (kernel_args.h), each with the bits of the separate kernels:
//   - input norm: the workgroup first computes each of its tokens' RMS scale
//     (rms.glsl, as rms_norm.comp) and x is normalized where it is loaded;
//   - GLU: a set computes lane_rows gate rows and the same up rows (W's rows
//     r and out_dim + r), and the lane that stores gets both sums and writes
//     act(gate) * up (glu.comp's formula).
//
// MATMUL_ID (matmul_id.manifest, the expert matmul of a mixture of experts):
// W holds n_expert matrices of out_dim rows back to back; each z group
// computes one output row i = t * n_used + j (a loop over i where the rows
// outnumber the grid's z), reading expert ids[i]'s rows (and bias row) and x
// row t (or i with per_row_input). The row is the plain kernel's with one
// token, so its order of additions is the dense matmul's and never depends
// on the batch. An id outside [0, n_expert) is reported (MINFER_ERR_EXPERT_ID)
// and the row computed with expert 0, so every read stays in W.
#version 450
#include "common.glsl"
#include "kernel_args.h"

#if defined(MATMUL_ID)
layout(push_constant) uniform Push { MatmulIdArgs args; };
#else
layout(push_constant) uniform Push { MatmulArgs args; };
#endif
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(std430, binding = 4) readonly buffer Residual { float residual[]; };
layout(std430, binding = 5) readonly buffer NormW { float norm_w[]; };
#if defined(MATMUL_ID)
layout(std430, binding = 6) readonly buffer Ids { int ids[]; };
#define MINFER_ERR_BINDING 7
#include "errors.glsl"
const uint kTokens = 1u;  // one output row (token, expert slot) per group
#else
const uint kTokens = MINFER_MATMUL_TOKENS_PER_GROUP;
#endif
const uint kRows = MINFER_MATMUL_MAX_LANE_ROWS;
#include "matmul_units.glsl"
#include "activation.glsl"

// One slot per subgroup and token (the worst case: a subgroup per invocation).
shared float partial_sums[kTokens * kWorkgroupInvocations];
#include "rms.glsl"

uint row0;                        // the first output row of this invocation's set
uint group_z;                     // the z group being computed (a row of tokens)
uint expert_row0 = 0u;            // MATMUL_ID: the first W row of this row's expert
float gate_sums[kRows][kTokens];  // GLU: a set's gate sums, kept by the lane that stores

// y[t][row] = s (+ bias[row]) (+ residual[t][row]) for the tokens of this
// group: the adds in the order of separate element-wise kernels.
void store_y(uint row, uint t, float s) {
  const uint i = (group_z * kTokens + t) * args.y_stride + row;
  if (args.has_bias != 0u) s = s + bias[expert_row0 + row];
  if (args.has_residual != 0u) s = s + residual[i];
  y[i] = s;
}

// Where weight row slot r (< the set's weight rows) of the set reads: with
// a GLU, slots lane_rows.. are the up rows of slots 0... Rows past out_dim
// read the last row; their sums are never stored. MATMUL_ID: rows of the
// row's expert.
uint weight_row(uint r) {
  const bool up = args.glu != 0u && r >= args.lane_rows;
  const uint row = min(row0 + (up ? r - args.lane_rows : r), args.out_dim - 1u);
  return expert_row0 + (up ? row + args.out_dim : row);
}

// Where token slot t of this group reads its x row.
uint x_base(uint t) {
#if defined(MATMUL_ID)
  return (args.per_row_input != 0u ? group_z : group_z / args.n_used) * args.in_dim;
#else
  return (group_z * kTokens + t) * args.in_dim;
#endif
}

// Slot r's total for token t, in a lane that stores.
void finish(uint r, uint t, float s) {
  if (args.glu == 0u) {
    if (row0 + r < args.out_dim) store_y(row0 + r, t, s);
    return;
  }
  if (r < args.lane_rows) {
    gate_sums[r][t] = s;
    return;
  }
  const uint row = row0 + r - args.lane_rows;
  if (row >= args.out_dim) return;
  const float g = gate_sums[r - args.lane_rows][t];
  const float a = args.glu == MINFER_MATMUL_GLU_SWIGLU ? silu_f32(g) : gelu_f32(g);
  precise float v = a * s;
  y[(group_z * kTokens + t) * args.y_stride + row] = v;
}

// The rows of this workgroup for the tokens of z group group_z.
void compute_group() {
  const uint lanes = 1u << args.lanes_log2;
  const uint sg = gl_SubgroupSize;
  const uint v = gl_SubgroupID * sg + gl_SubgroupInvocationID;
  const uint lane = v & (lanes - 1u);
  const uint sets = kWorkgroupInvocations >> args.lanes_log2;
  row0 = (folded_group_index() * sets + (v >> args.lanes_log2)) * args.lane_rows;
#if defined(MATMUL_ID)
  const uint n_here = 1u;  // the caller's loop keeps group_z below the rows
#else
  const uint n_here = args.n_tokens - group_z * kTokens;  // tokens of this group (uniform)
#endif
  const bool lane_ok = v < kWorkgroupInvocations;
  const uint n_slots = args.glu != 0u ? 2u * args.lane_rows : args.lane_rows;

  float x_scales[kTokens];
  for (uint t = 0; t < kTokens; ++t) {
    x_scales[t] = 1.0;
    if (args.norm == 0u || t >= n_here) continue;
    x_scales[t] = rms_scale(x_base(t), args.in_dim, args.norm_eps, true);
    barrier();  // the next token's (or the reduction's) slot writes wait for these reads
  }

  float acc[kRows][kTokens];
  for (uint r = 0; r < kRows; ++r) {
    for (uint t = 0; t < kTokens; ++t) acc[r][t] = 0.0;
  }
  // Uniform breaks (r >= lane_rows, t >= n_here) keep every loop unrollable.
  const uint n_units = lane_ok ? mm_units_per_row(args.in_dim) : 0u;
  for (uint u = lane; u < n_units; u += lanes) {
    // Rows past out_dim read the last row; their sums are never stored.
    Raw raw[kRows];
    for (uint r = 0; r < kRows; ++r) {
      if (r >= n_slots) break;
      raw[r] = mm_load(weight_row(r), u);
    }
    // Per token: its x of the unit in flight at once (with the weights' loads
    // for the first token), then each row's weights decoded chunk by chunk.
    for (uint t = 0; t < kTokens; ++t) {
      if (t >= n_here) break;
      mm_x_scale = x_scales[t];
      vec4 xv[kUnitChunks];
      for (uint c = 0; c < kUnitChunks; ++c) xv[c] = mm_x_chunk(x_base(t), u, c);
      for (uint r = 0; r < kRows; ++r) {
        if (r >= n_slots) break;
        for (uint c = 0; c < kUnitChunks; ++c) {
          const vec4 w = mm_chunk(raw[r], c);
          acc[r][t] += w.x * xv[c].x + w.y * xv[c].y + w.z * xv[c].z + w.w * xv[c].w;
        }
      }
    }
  }

  for (uint r = 0; r < kRows; ++r) {
    if (r >= n_slots) break;
    if (lanes == sg) {
      for (uint t = 0; t < kTokens; ++t) {
        if (t >= n_here) break;
        const float s = subgroupAdd(acc[r][t]);
        if (lane == 0u && lane_ok) finish(r, t, s);
      }
    } else if (lanes > sg) {
      for (uint t = 0; t < kTokens; ++t) {
        if (t >= n_here) break;
        const float s = subgroupAdd(acc[r][t]);
        if (subgroupElect()) partial_sums[t * kWorkgroupInvocations + gl_SubgroupID] = s;
      }
      barrier();
      // Lane l of the row writes tokens l, l + lanes, ...
      const uint per_row = lanes / sg, first = (v >> args.lanes_log2) * per_row;
      for (uint t = lane; t < min(kTokens, n_here); t += lanes) {
        float total = 0.0;
        for (uint i = 0; i < per_row; ++i) total += partial_sums[t * kWorkgroupInvocations + first + i];
        if (lane_ok) finish(r, t, total);
      }
      barrier();  // before the next row's sums take the slots
    } else {
      const uint mine = gl_SubgroupInvocationID >> args.lanes_log2;
      for (uint k = 0; k < sg / lanes; ++k) {
        for (uint t = 0; t < kTokens; ++t) {
          if (t >= n_here) break;
          const float s = subgroupAdd(mine == k ? acc[r][t] : 0.0);
          if (mine == k && lane == 0u && lane_ok) finish(r, t, s);
        }
      }
    }
  }
}

#if defined(MATMUL_ID)
// Expert ids[i], or 0 where it is out of range (reported by the first
// workgroup alone, which visits every row: one atomic per bad row, not per group).
uint expert_of(uint i) {
  const int e = ids[i];
  if (e >= 0 && uint(e) < args.n_expert) return uint(e);
  if (gl_LocalInvocationIndex == 0u && folded_group_index() == 0u) {
    report_error(MINFER_ERR_EXPERT_ID, uint(e), args.n_expert);
  }
  return 0u;
}
#endif

void main() {
#if defined(MATMUL_ID)
  const uint n_rows = args.n_tokens * args.n_used;
  for (uint i = gl_WorkGroupID.z; i < n_rows; i += gl_NumWorkGroups.z) {
    group_z = i;
    expert_row0 = expert_of(i) * args.out_dim;
    compute_group();
  }
#else
  group_z = gl_WorkGroupID.z;
  compute_group();
#endif
}
