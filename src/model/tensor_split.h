// Tensor parallelism's split of a model over `ranks` ranks (docs/PARALLEL.md):
// which weights are cut along which dimension, and each rank's part of the
// model — hyper-parameters and weight table — that the unchanged builders
// turn into that rank's graph.
//
// The split (Megatron's, as vLLM and SGLang make it):
//   - attention: query heads and KV heads in contiguous groups (rank r owns
//     heads [r*H/N, (r+1)*H/N) of both, so each query head keeps its KV
//     head); q/k/v weights and biases and the sinks cut by head; the output
//     projection cut along its input (each row's elements);
//   - FFN: gate and up cut by output row, down by input; a mixture of
//     experts the same way inside every expert (the router stays whole);
//   - the output matrix cut by vocabulary row when the vocabulary divides
//     (a tied output gets its own view of token_embd's rows), else whole;
//   - everything else (norms, embedding, router, RoPE factors) whole.
// A projection cut along its input gives each rank a partial sum; the graph
// adds the ranks' parts with an all-reduce right after it (and after the
// expert sum), and its bias joins on rank 0 only. The cut vocabulary's
// logits come back whole through an all-gather. LayerBuilder asks
// input_split() and output_split() for where those go.
//
// Contract:
//   - check_split(hp, ranks) refuses a split the model's shapes do not
//     divide, naming the count that does not: query heads, KV heads, FFN or
//     expert width. ranks == 1 is always valid.
//   - split_for_rank(hp, weights, rank, ranks) returns rank `rank`'s
//     HParams (n_head, n_head_kv, n_ff, n_ff_exp divided; n_vocab whole;
//     tied_output off where the output's rows are cut) and a weight table with every name of
//     `weights`: whole tensors and contiguous row ranges as views into
//     `weights` (which must outlive it), other parts copied. A cut along a
//     row that falls inside a quantization block (a K-quant's 256 values)
//     re-encodes that tensor's parts as Q8_0 (F32 where the cut is not on
//     32 values either): a small change of those weights' values, which the
//     tests bound (docs/PARALLEL.md, "Numerics").
// Thread-safe (pure functions).
#pragma once

#include <string_view>

#include "base/status.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace minfer::model {

// A projection whose input features are cut (attn_output, ffn_down,
// ffn_down_exps): each rank's product is a partial sum that an all-reduce
// completes (the experts' after their weighted sum), so its bias joins on
// one rank only.
bool input_split(std::string_view weight);

// Whether the output matrix's rows (the vocabulary) are cut over `ranks`.
bool vocab_split(const HParams& hp, int ranks);

Status check_split(const HParams& hp, int ranks);

struct RankModel {
  HParams hp;
  Weights weights;
};

Result<RankModel> split_for_rank(const HParams& hp, const Weights& weights, int rank, int ranks);

}  // namespace minfer::model
