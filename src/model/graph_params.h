// GraphParams: everything a forward graph's structure depends on. Two forward
// passes with equal params reuse one built graph and plan (the graph cache);
// any change forces a rebuild.
#pragma once

#include <cstdint>

#include "graph/ir.h"

namespace minfer::model {

struct GraphParams {
  int64_t n_tokens = 1;   // tokens in this batch
  int64_t n_outputs = 1;  // logits for the last n_outputs tokens of the batch
  // KV cache row types (F32, F16 or Q8_0), carried into KvMeta/AttentionMeta.
  quant::TensorType k_type = quant::TensorType::F32;
  quant::TensorType v_type = quant::TensorType::F32;
  // Which of the session's backends take part (bit b: backend b of its
  // priority-ordered list); the all-weights gate applies to those that
  // require every weight.
  uint32_t backends = 0;
  bool fuse = true;  // allow fusions
  // A paged KV pool of many sequences (runtime::Engine): cells, page tables
  // and output rows become graph inputs. 0: one sequence, cache row =
  // position, logits for the last n_outputs tokens (runtime::Session).
  int64_t page_size = 0;
  int64_t n_slots = 0;    // page-table rows (sequences the engine may hold)
  int64_t max_pages = 0;  // pages per sequence
  // The pool serves one sequence (a one-slot engine): every token of a batch
  // but padding ones (after them, in a slot of their own) is that one's.
  bool one_sequence = false;
  // With one_sequence: paged attention also reads the batch's own k and v
  // (inputs 5 and 6) and takes them at full precision for the batch's
  // positions, as unpaged attention does. A one-slot engine without a GPU
  // sets it (the CUDA kernels read the fused q|k|v rows instead).
  bool paged_batch_kv = false;
  // Every token computed independently of the rest of the batch, bit for
  // bit (the engine, Options::batch_invariant): into MatMulMeta/AttentionMeta.
  bool batch_invariant = false;
  // The graph's output is each output row's greedy token (kArgMax, i32
  // [n_outputs]) instead of its logits: a few bytes to read back, not
  // n_outputs * n_vocab floats.
  bool argmax = false;
  // The graph's output is each output row's final hidden state after the
  // output norm, f32 [n_embd, n_outputs], before the output matrix: what
  // embeddings pool. Exclusive with argmax.
  bool hidden_output = false;
  // Tensor parallelism (model/tensor_split.h): this graph is rank tp_rank's
  // of tp_ranks, built over that rank's part of the model; all-reduce and
  // all-gather nodes join the ranks' partial results.
  int tp_rank = 0;
  int tp_ranks = 1;

  bool operator==(const GraphParams&) const = default;
};

}  // namespace minfer::model
