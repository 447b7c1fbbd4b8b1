// Builds the forward graph of a model: one builder per architecture (qwen2,
// qwen3, llama, gemma3) over shared layer-building helpers.
//
// Contract: build_graph() is a pure function of (hparams, weights, params):
// it names weights, it does not read them. The graph's inputs are the token
// ids and positions of the batch (i32 [n_tokens]); its output is f32 logits
// [n_vocab, n_outputs] for the last n_outputs tokens (the tail rows are
// gathered before the final norm, so the output matmul runs only on them).
// Errors name the missing weight or the invalid parameter.
#pragma once

#include "base/status.h"
#include "graph/ir.h"
#include "model/graph_params.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace minfer::model {

Result<graph::Graph> build_graph(const HParams& hp, const Weights& weights,
                                 const GraphParams& params);

}  // namespace minfer::model
