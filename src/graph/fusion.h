// The fusion pass: rewrites chains of nodes into one fused node where the
// backend that would run them has a kernel for the fused op.
//
// Rules: Mul(Silu(g), u) -> SwiGLU(g, u); Mul(Gelu(g), u) -> GeGLU(g, u), when
// the activation node has no other user and the first backend (in priority
// order) supporting both nodes also claims supports_fused for the fused op.
// Decode fusions (FusedQKV, FusedFFN, FusedQkvNorm) are emitted by the
// builders themselves when GraphParams says a backend claims them.
// MINFER_NO_FUSE_GLU=1 turns this pass off (for A/B). The graph keeps
// execution order; dead nodes are removed and ids renumbered.
#pragma once

#include <span>

#include "backend/backend.h"
#include "graph/ir.h"

namespace minfer::graph {

// Returns the number of fusions applied.
int fuse(Graph& g, std::span<backend::Backend* const> backends);

// Removes nodes that nothing reads (except inputs and the logits) and renumbers.
void remove_dead_nodes(Graph& g);

}  // namespace minfer::graph
