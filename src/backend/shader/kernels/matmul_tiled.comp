// y[t][r] = dot(W[r], x[t]) for batches of many tokens (prefill): a tiled
// GEMM. W [out_dim][in_dim] in the variant's weight type (weights.glsl, the
// packed 32-bit-word decoders), x [n_tokens][in_dim] f32, y [n_tokens][out_dim]
// f32.
//
// A workgroup of 256 invocations computes a tile of kRows x kTokens (128 x
// 128 by default, 64 x 64 with TILE_ROWS / TILE_TOKENS; x: row tiles, folded
// over x and y; z: token tiles). It walks in_dim
// in steps of 32 elements: the invocations decode the step's 32 columns of
// the tile's rows (4 units of weights.glsl per row, so a step is whole legacy
// blocks and whole K-quant sub-blocks) and load the tokens' 32 activations,
// store both into shared memory as f32, then each invocation accumulates its
// register block of (kRows / 16) rows x (kTokens / 16) tokens with FMAs in
// f32. The next step's weights and activations are fetched into registers
// while the current step is computed (branch-free: rows and tokens past the
// end read the last one and keep 0). Weights are decode_unit()'s, so they
// are bit-exact with quant::dequantize_row; the summation order (per
// element of k, in order) differs from matmul.comp's.
//
// Shared layout: w_tile[k][row / 4] and x_tile[k][token / 4] as vec4, k-major,
// so that the inner loop reads whole vec4s. The vec4 index of a row (token)
// group is XOR-swizzled by a function of k so that the stores, which run
// down k, spread over all 32 banks (row groups ^ 2 * gray(k / 4 % 4),
// token groups ^ k % 8); the loads are unaffected (a permutation per k).
//
// lavapipe's loop cap (docs/VULKAN.md, rule 7): every inner loop is
// unrolled; an invocation iterates the step loop in_dim / 32 times (592 at
// in_dim 18944) plus the decoders' own short loops.
#version 450
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "kernel_args.h"

layout(push_constant) uniform Push { MatmulTiledArgs args; };
#include "weights.glsl"
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

#if WG_X * WG_Y * WG_Z != 256
#error "matmul_tiled.comp: the invocation mapping assumes 256 invocations"
#endif
#ifndef TILE_ROWS
#define TILE_ROWS MINFER_MATMUL_TILED_ROWS
#endif
#ifndef TILE_TOKENS
#define TILE_TOKENS MINFER_MATMUL_TILED_TOKENS
#endif

const uint kRows = TILE_ROWS;      // 64 or 128
const uint kTokens = TILE_TOKENS;  // 64 or 128
const uint kK = 32u;               // columns per step: 4 units of 8
const uint kGroups = 16u;          // invocations along rows, and along tokens
const uint kRowVecs = kRows / kGroups / 4u;      // vec4 row groups per invocation
const uint kTokenVecs = kTokens / kGroups / 4u;  // vec4 token groups per invocation
const uint kUnitsPerInv = kRows * (kK / kUnitElements) / 256u;
const uint kXPerInv = kTokens * kK / 256u;

shared vec4 w_tile[kK * kRows / 4u];
shared vec4 x_tile[kK * kTokens / 4u];

uint w_swizzle(uint k) {
  return 2u * (((k >> 2) ^ (k >> 3)) & 3u);
}
uint x_swizzle(uint k) {
  return k & 7u;
}

// The column (in its step) and token (in its tile) of activation i of this
// invocation: 8 columns x 4 tokens per subgroup of 32, 32-byte segments.
uint x_col(uint lid) {
  return lid % 8u + 8u * (lid / 32u % 4u);
}
uint x_token(uint lid, uint i) {
  return lid / 8u % 4u + 4u * (lid / 128u) + 8u * i;
}

// Fetched for the next step: unit i is row (lid + 256 i) / 4 of the tile,
// unit (lid + 256 i) % 4 of the step (consecutive invocations share a block).
float wv[kUnitsPerInv][kUnitElements];
uint wk[kUnitsPerInv][kUnitElements];  // columns in the step
float xv[kXPerInv];

// Called with constant i (two calls rather than a loop: glslc unrolls no loop
// around the decoder's own loops, and a dynamic i would put wv in memory).
// Branch-free (rows past out_dim decode the last row and keep 0), so that
// the fetch and the compute of a step are one block the driver can interleave.
void fetch_unit(const uint i, uint lid, uint r0, uint k0) {
  const uint v = lid + 256u * i;
  const uint row = r0 + v / 4u, q = v % 4u;
  float w[kUnitElements];
  uint k[kUnitElements];
  decode_unit(min(row, args.out_dim - 1u), k0 / kUnitElements + q, args.in_dim, w, k);
  [[unroll]] for (uint j = 0; j < kUnitElements; ++j) {
    wv[i][j] = row < args.out_dim ? w[j] : 0.0;
    wk[i][j] = k[j] - k0;
  }
}

// The weights and activations of step s into wv, wk, xv.
void fetch(uint s, uint lid, uint r0, uint t0) {
  const uint k0 = s * kK;
  fetch_unit(0u, lid, r0, k0);
  if (kUnitsPerInv > 1u) fetch_unit(1u, lid, r0, k0);
  const uint k = k0 + x_col(lid);
  const uint kc = min(k, args.in_dim - 1u);
  [[unroll]] for (uint i = 0; i < kXPerInv; ++i) {
    const uint t = t0 + x_token(lid, i);
    const float v = x[min(t, args.n_tokens - 1u) * args.in_dim + kc];
    xv[i] = t < args.n_tokens && k < args.in_dim ? v : 0.0;
  }
}

// Stores wv, wk, xv into the tiles.
void store_tiles(uint lid) {
  [[unroll]] for (uint i = 0; i < kUnitsPerInv; ++i) {
    const uint row = (lid + 256u * i) / 4u;
    [[unroll]] for (uint j = 0; j < kUnitElements; ++j) {
      const uint k = wk[i][j];
      w_tile[k * (kRows / 4u) + ((row / 4u) ^ w_swizzle(k))][row % 4u] = wv[i][j];
    }
  }
  const uint xk = x_col(lid);
  [[unroll]] for (uint i = 0; i < kXPerInv; ++i) {
    const uint t = x_token(lid, i);
    x_tile[xk * (kTokens / 4u) + ((t / 4u) ^ x_swizzle(xk))][t % 4u] = xv[i];
  }
}

void main() {
  const uint lid = gl_LocalInvocationIndex;
  const uint r0 = folded_group_index() * kRows;  // past out_dim: a rounded-up grid
  const uint t0 = gl_WorkGroupID.z * kTokens;
  const uint n_steps = (args.in_dim + kK - 1u) / kK;

  vec4 acc[kTokenVecs * 4u][kRowVecs];
  [[unroll]] for (uint n = 0; n < kTokenVecs * 4u; ++n) {
    [[unroll]] for (uint m = 0; m < kRowVecs; ++m) acc[n][m] = vec4(0.0);
  }
  const uint tr = lid / kGroups, tt = lid % kGroups;

  fetch(0u, lid, r0, t0);
  for (uint s = 0; s < n_steps; ++s) {
    barrier();  // the previous step's reads of the tiles are done
    store_tiles(lid);
    barrier();
    fetch(min(s + 1u, n_steps - 1u), lid, r0, t0);  // the last step's again: unused
    [[unroll]] for (uint kk = 0; kk < kK; ++kk) {
      vec4 a[kRowVecs], b[kTokenVecs];
      [[unroll]] for (uint m = 0; m < kRowVecs; ++m) {
        a[m] = w_tile[kk * (kRows / 4u) + ((tr + kGroups * m) ^ w_swizzle(kk))];
      }
      [[unroll]] for (uint n = 0; n < kTokenVecs; ++n) {
        b[n] = x_tile[kk * (kTokens / 4u) + ((tt + kGroups * n) ^ x_swizzle(kk))];
      }
      [[unroll]] for (uint n = 0; n < kTokenVecs; ++n) {
        [[unroll]] for (uint c = 0; c < 4u; ++c) {
          [[unroll]] for (uint m = 0; m < kRowVecs; ++m) {
            acc[n * 4u + c][m] = fma(a[m], vec4(b[n][c]), acc[n * 4u + c][m]);
          }
        }
      }
    }
  }

  [[unroll]] for (uint n = 0; n < kTokenVecs; ++n) {
    [[unroll]] for (uint c = 0; c < 4u; ++c) {
      const uint t = t0 + 4u * (tt + kGroups * n) + c;
      [[unroll]] for (uint m = 0; m < kRowVecs; ++m) {
        [[unroll]] for (uint i = 0; i < 4u; ++i) {
          const uint r = r0 + 4u * (tr + kGroups * m) + i;
          if (t < args.n_tokens && r < args.out_dim) y[t * args.y_stride + r] = acc[n * 4u + c][m][i];
        }
      }
    }
  }
}
