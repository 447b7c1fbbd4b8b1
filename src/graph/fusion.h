// The fusion pass: rewrites chains of nodes into one fused node where the
// backend that would run them has a kernel for the fused op.
//
// Rules (each applied only where the first backend, in priority order, that
// supports every node involved also claims supports_fused for the fused op
// and supports_op for the rewritten node):
//   - Mul(Silu(g), u) -> SwiGLU(g, u); Mul(Gelu(g), u) -> GeGLU(g, u), when
//     the activation node has no other user (Options::no_fuse_glu, MINFER_NO_FUSE_GLU=1: off, and
//     with it FusedFFN).
//   - SwiGLU/GeGLU(MatMul(x, Wg), MatMul(x, Wu)) without biases, both
//     matmuls used only there -> FusedFFN(x) (MINFER_NO_FUSE_FFN=1: off).
//   - Attention over Rope(MatMul(x, Wq) [-> per-head RmsNorm]), the same for
//     k, MatMul(x, Wv) and their KvStore -> FusedQKV(x, positions) (or
//     FusedQkvNorm with the norms; paged: FusedQKV(x, positions, cells)) in
//     the store's place, producing packed [q | k | v] rows, and
//     Attention(packed, positions[, seq_slots, page_table])
//     (MINFER_NO_FUSE_QKV=1: off; MINFER_NO_FUSE_QKV_NORM=1: only the norm
//     variant off).
//   - Add(r, MatMul(x)) with the matmul used only there -> MatMulAdd(x, r)
//     (MINFER_NO_FUSE_ADD=1: off).
//   - FusedQKV/FusedQkvNorm/FusedFFN/MatMul/MatMulAdd(RmsNorm(x)), a
//     whole-row norm read by nothing but such nodes (as their input 0),
//     where the backend claims supports_fused(kRmsNorm) -> each of them over
//     x with the norm in its InputNorm (MINFER_NO_FUSE_NORM=1: off). A
//     layer's q, k and v matmuls share their norm this way.
// Backends gate by shape too (the CUDA backend takes FusedQKV for one token,
// and for a paged batch whose projections take its int8 tensor-core path). The graph keeps
// execution order; dead nodes are removed and ids renumbered.
#pragma once

#include <span>

#include "backend/backend.h"
#include "base/options.h"
#include "graph/ir.h"

namespace minfer::graph {

// Returns the number of fusions applied. `options` turns rules off (the
// MINFER_NO_FUSE_* variables); its defaults apply every rule.
int fuse(Graph& g, std::span<backend::Backend* const> backends, const Options& options = {});

// Removes nodes that nothing reads (except inputs and the logits) and renumbers.
void remove_dead_nodes(Graph& g);

}  // namespace minfer::graph
