// Mixture-of-experts kernels of the CPU backend: expert selection, gating
// weights, the expert matmul (ggml's mul_mat_id) and the weighted sum back,
// with the numerics of llama.cpp's CPU graph (docs/MOE.md).
//
// Contract (layouts row-major, row length first as in graph/ir.h):
//   - moe_topk: logits [n_tokens][n_expert] -> ids [n_tokens][n_used], each
//     token's experts by descending score, a tie going to the lower id. The
//     score is softmax(logits) for the softmax gatings (as llama.cpp selects
//     on probabilities) and the logit itself for kTopKSoftmax.
//   - moe_weights: (logits, ids) -> weights [n_tokens][n_used]. kSoftmax:
//     p[ids[j]] with p = softmax(row) (backend/cpu/ops.h's softmax);
//     kSoftmaxNormalized: those p divided by their sum (summed in double,
//     rounded to f32, clamped below at 2^-14); kTopKSoftmax: softmax over
//     the n_used selected logits, in ids order.
//   - matmul_id: y [n_tokens * n_used][rows], row t*n_used+j = x row (t, or
//     t*n_used+j when per_row_input) times expert ids[t][j]'s matrix, plus
//     its bias row. The rows routed to one expert are gathered, run through
//     backend/cpu/matmul.h's matmul() (activations quantized to the weight's
//     vec_dot_type as for a dense matmul) and scattered back, so a batch
//     reads each selected expert's weights once and a token reads only its
//     n_used experts. On AVX-512 VNNI CPUs two direct paths read the
//     experts in place instead: each distinct input row is prepared once
//     (not once per expert it visits), then one task list over (expert,
//     block of rows) pairs splits all the experts' rows over the pool, each
//     task reading its tokens' rows and writing their outputs through row
//     pointers. MXFP4 (every mode; backend/cpu/moe_mxfp4_vnni.h): Q8_0 rows,
//     outputs equal to the per-expert matmul() bit for bit. Q4_K/Q6_K
//     without mode.batch_invariant, for the experts with fewer than 12 rows
//     (backend/cpu/moe_kquant_vnni.h): the VNNI GEMV's integers, its f32
//     order up to rounding, one GEMV per row, so those rows do not depend
//     on the batch either; the prepared rows of the previous call are
//     reused when the input holds the same bits (gate then up). With
//     mode.batch_invariant each row's result does not depend on which other
//     rows share its expert. Where the batch uses many experts (at least 4
//     per pool thread) the matmul() experts are spread over the threads,
//     each expert's matmul on one; else they run one after another, each
//     over the whole pool. The results are the same bits either way
//     (matmul() splits its work independently of the threads).
//   - moe_sum: out [n_tokens][dim], row t = y[t*k] * w[t][0] + y[t*k+1] *
//     w[t][1] + ... in f32, each product rounded, added in order of j.
// Errors (Status naming the values): sizes out of range, an id outside
// [0, n_expert), a NaN logit (the token named), the matmul's own errors (the
// expert named). Outputs must not alias inputs.
// Threading: matmul_id runs on `pool` (see above); the others run on the
// caller. `scratch` must not be shared by concurrent calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/matmul.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "graph/ir.h"
#include "quant/tensor_type.h"

namespace minfer::cpu {

[[nodiscard]] Status moe_topk(const float* logits, int64_t n_tokens, int64_t n_expert,
                              int64_t n_used, graph::MoeGating gating, int32_t* ids);

[[nodiscard]] Status moe_weights(const float* logits, const int32_t* ids, int64_t n_tokens,
                                 int64_t n_expert, int64_t n_used, graph::MoeGating gating,
                                 float* weights);

// A 3-D expert weight: n_expert matrices of `rows` rows (outputs) by
// `row_len` elements (inputs), expert e's starting at data + e * expert_bytes.
struct ExpertWeights {
  quant::TensorType type = quant::TensorType::F32;
  int64_t n_expert = 0;
  int64_t rows = 0;
  int64_t row_len = 0;
  const void* data = nullptr;
  size_t expert_bytes = 0;
  const float* bias = nullptr;  // optional [n_expert][rows]
};

// Working memory of matmul_id, reused across calls.
struct MoeScratch {
  struct Expert {
    std::vector<float> x, y;    // one expert's gathered inputs and outputs
    std::vector<uint8_t> acts;  // matmul()'s quantized activations
  };
  std::vector<int32_t> order, offsets;   // output rows grouped by expert
  std::vector<int32_t> active;           // experts with rows, ascending
  std::vector<Expert> per_thread;        // one per pool thread
  std::vector<int32_t> direct, batched;  // K-quants: experts of few and of many rows
  // The direct kernels' input rows, prepared once for the layout of the
  // weight type `layout`, and the f32 rows they came from: a call whose input
  // holds the same bits for the same layout reuses them.
  struct Prepared {
    bool valid = false;
    quant::TensorType layout = quant::TensorType::F32;
    int64_t row_len = 0;
    std::vector<float> source;
    std::vector<uint8_t> bytes;  // the rows start at `rows`, 64-byte aligned
    uint8_t* rows = nullptr;
  };
  Prepared prepared;
  std::vector<uint8_t> q8k;  // one Q8_K row per pool thread
  // Each grouped row's input and output row.
  std::vector<const uint8_t*> x_rows;
  std::vector<float*> y_rows;
};

[[nodiscard]] Status matmul_id(const ExpertWeights& w, const float* x, bool per_row_input,
                               const int32_t* ids, int64_t n_tokens, int64_t n_used, float* y,
                               ThreadPool& pool, MoeScratch& scratch, MatmulMode mode = {});

void moe_sum(const float* y, const float* weights, int64_t n_tokens, int64_t n_used, int64_t dim,
             float* out);

}  // namespace minfer::cpu
