#include "backend/cpu/moe.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cpu/matmul_gemm_vnni.h"
#include "backend/cpu/moe_mxfp4_vnni.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/quantize_acts.h"
#include "quant/reference.h"

// ggml multiplies and adds the weighted expert rows as separate f32 ops;
// keep the compiler from fusing them into FMAs.
#pragma clang fp contract(off)

namespace minfer::cpu {
namespace {

using graph::MoeGating;

// ggml clamps the sum of the selected probabilities at the smallest normal f16.
constexpr float kMinWeightSum = 6.103515625e-5f;

Status check_sizes(int64_t n_tokens, int64_t n_expert, int64_t n_used) {
  if (n_tokens < 0 || n_expert < 1 || n_used < 1 || n_used > n_expert) {
    return Status::internal("moe: " + std::to_string(n_used) + " of " + std::to_string(n_expert) +
                            " experts for " + std::to_string(n_tokens) + " tokens");
  }
  return Status::ok();
}

// The score each expert is selected by: softmax probabilities, or the logits.
Status selection_scores(const float* row, int64_t n_expert, MoeGating gating, int64_t token,
                        std::vector<float>& scores) {
  for (int64_t e = 0; e < n_expert; ++e) {
    if (std::isnan(row[e])) {
      return Status::internal("moe: token " + std::to_string(token) + " has a NaN router logit");
    }
  }
  scores.assign(row, row + n_expert);
  if (gating != MoeGating::kTopKSoftmax) softmax(row, 1, n_expert, 1.0f, scores.data());
  return Status::ok();
}

// The n_used best of `scores`, best first; a tie goes to the lower id
// (experts are visited in id order and only a strictly better one moves up).
void select_top(const std::vector<float>& scores, int64_t n_used, int32_t* ids) {
  int64_t kept = 0;
  for (int64_t e = 0; e < static_cast<int64_t>(scores.size()); ++e) {
    if (kept == n_used && !(scores[e] > scores[ids[kept - 1]])) continue;
    int64_t at = kept < n_used ? kept++ : n_used - 1;
    while (at > 0 && scores[e] > scores[ids[at - 1]]) {
      ids[at] = ids[at - 1];
      --at;
    }
    ids[at] = static_cast<int32_t>(e);
  }
}

Status check_ids(const int32_t* ids, int64_t n, int64_t n_expert) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= n_expert) {
      return Status::internal("moe: expert id " + std::to_string(ids[i]) + " at " +
                              std::to_string(i) + " outside [0, " + std::to_string(n_expert) + ")");
    }
  }
  return Status::ok();
}

// Groups the output rows by expert: order[offsets[e] .. offsets[e+1]) are the
// rows routed to e, ascending.
void group_by_expert(const int32_t* ids, int64_t n_rows, int64_t n_expert, MoeScratch& s) {
  s.offsets.assign(static_cast<size_t>(n_expert + 1), 0);
  for (int64_t r = 0; r < n_rows; ++r) ++s.offsets[static_cast<size_t>(ids[r]) + 1];
  for (int64_t e = 0; e < n_expert; ++e) s.offsets[e + 1] += s.offsets[e];
  s.order.resize(static_cast<size_t>(n_rows));
  std::vector<int32_t> next(s.offsets.begin(), s.offsets.end() - 1);
  for (int64_t r = 0; r < n_rows; ++r) s.order[next[ids[r]]++] = static_cast<int32_t>(r);
  s.active.clear();
  for (int64_t e = 0; e < n_expert; ++e) {
    if (s.offsets[e + 1] > s.offsets[e]) s.active.push_back(static_cast<int32_t>(e));
  }
}

// Spread the experts over the threads from this many per thread: enough
// tasks that uneven row counts still balance.
constexpr int64_t kExpertsPerThread = 4;

// The activations and outputs of matmul_id: row r of the output reads x row
// r (per_row_input) or r / n_used.
struct ExpertRows {
  const float* x;
  bool per_row_input;
  int64_t n_used;
  float* y;
};

// Expert e's rows: gathered, multiplied by its matrix, scattered back (+ bias).
Status run_expert(const ExpertWeights& w, int32_t e, const ExpertRows& rows, ThreadPool& pool,
                  const MoeScratch& groups, MoeScratch::Expert& s, MatmulMode mode) {
  const int32_t begin = groups.offsets[e], count = groups.offsets[e + 1] - begin;
  const auto in_row = static_cast<size_t>(w.row_len), out_row = static_cast<size_t>(w.rows);
  s.x.resize(static_cast<size_t>(count) * in_row);
  s.y.resize(static_cast<size_t>(count) * out_row);
  for (int32_t i = 0; i < count; ++i) {
    const int64_t r = groups.order[begin + i];
    const int64_t src = rows.per_row_input ? r : r / rows.n_used;
    std::memcpy(s.x.data() + i * in_row, rows.x + src * w.row_len, in_row * sizeof(float));
  }
  const MatmulWeight mw{
      w.type, w.rows, w.row_len,
      static_cast<const uint8_t*>(w.data) + static_cast<size_t>(e) * w.expert_bytes, 0};
  Status st = matmul(mw, s.x.data(), count, s.y.data(), pool, s.acts, mode);
  if (!st) return st.with_context("expert " + std::to_string(e));
  const float* bias = w.bias != nullptr ? w.bias + static_cast<int64_t>(e) * w.rows : nullptr;
  for (int32_t i = 0; i < count; ++i) {
    float* dst = rows.y + static_cast<int64_t>(groups.order[begin + i]) * w.rows;
    const float* src = s.y.data() + i * out_row;
    if (bias == nullptr) {
      std::memcpy(dst, src, out_row * sizeof(float));
    } else {
      for (int64_t o = 0; o < w.rows; ++o) dst[o] = src[o] + bias[o];
    }
  }
  return Status::ok();
}

// Weight rows per task of the direct expert kernels: a one-token decode
// step still splits each expert over the threads, and a task's rows stay in
// L2 while it walks the expert's tokens.
constexpr int64_t kDirectRowsPerTask = 32;

// Whether `w` takes a direct expert kernel instead of matmul() per expert:
// MXFP4 where matmul() would run the AVX2 row kernel whose bits
// mxfp4_expert_tile reproduces.
bool takes_direct_kernel(const ExpertWeights& w) {
  return w.type == quant::TensorType::MXFP4 && active_isa() == Isa::kAvx2 && vnni_gemm_available();
}

// Quantizes each distinct input row to Q8_0 once (a token's row serves all
// of its experts), in parallel; an error names the first bad row.
Status quantize_rows(const float* x, int64_t n_rows, int64_t row_len, size_t row_bytes,
                     ThreadPool& pool, std::vector<uint8_t>& out) {
  out.resize(static_cast<size_t>(n_rows) * row_bytes);
  std::atomic<int64_t> first_bad{n_rows};
  pool.parallel_for(n_rows, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      if (quantize_activations(quant::TensorType::Q8_0, x + r * row_len, out.data() + r * row_bytes,
                               row_len)
              .is_ok()) {
        continue;
      }
      int64_t cur = first_bad.load();
      while (r < cur && !first_bad.compare_exchange_weak(cur, r)) {
      }
    }
  });
  const int64_t bad = first_bad.load();
  if (bad == n_rows) return Status::ok();
  return quantize_activations(quant::TensorType::Q8_0, x + bad * row_len, out.data(), row_len)
      .with_context("activation row " + std::to_string(bad));
}

// The direct path: inputs quantized once, then one task list over (expert,
// block of rows) pairs, each task's tokens read and written in place through
// row pointers. Each output is the row kernel's, so the split changes no bit.
Status run_direct(const ExpertWeights& w, size_t w_row_bytes, const ExpertRows& rows,
                  int64_t n_rows, ThreadPool& pool, MoeScratch& s) {
  const int64_t x_rows = rows.per_row_input ? n_rows : n_rows / rows.n_used;
  MINFER_ASSIGN_OR_RETURN(const uint64_t x_bytes,
                          quant::row_bytes(quant::TensorType::Q8_0, w.row_len));
  MINFER_RETURN_IF_ERROR(quantize_rows(rows.x, x_rows, w.row_len, x_bytes, pool, s.xq));
  s.x_rows.resize(static_cast<size_t>(n_rows));
  s.y_rows.resize(static_cast<size_t>(n_rows));
  for (int64_t i = 0; i < n_rows; ++i) {
    const int64_t r = s.order[i], src = rows.per_row_input ? r : r / rows.n_used;
    s.x_rows[i] = s.xq.data() + src * x_bytes;
    s.y_rows[i] = rows.y + r * w.rows;
  }
  const int64_t blocks = (w.rows + kDirectRowsPerTask - 1) / kDirectRowsPerTask;
  const auto n_tasks = static_cast<int64_t>(s.active.size()) * blocks;
  pool.parallel_for(n_tasks, [&](int64_t begin, int64_t end, int) {
    for (int64_t task = begin; task < end; ++task) {
      const int32_t e = s.active[task / blocks];
      const int32_t first = s.offsets[e], count = s.offsets[e + 1] - first;
      const int64_t r0 = (task % blocks) * kDirectRowsPerTask;
      const int64_t r1 = std::min(w.rows, r0 + kDirectRowsPerTask);
      const Mxfp4ExpertTile tile{
          static_cast<const uint8_t*>(w.data) + static_cast<size_t>(e) * w.expert_bytes,
          w_row_bytes,
          w.row_len,
          s.x_rows.data() + first,
          s.y_rows.data() + first,
          count};
      mxfp4_expert_tile(tile, r0, r1);
      if (w.bias == nullptr) continue;
      const float* bias = w.bias + static_cast<int64_t>(e) * w.rows;
      for (int32_t i = 0; i < count; ++i) {
        float* dst = s.y_rows[first + i];
        for (int64_t o = r0; o < r1; ++o) dst[o] = dst[o] + bias[o];
      }
    }
  });
  return Status::ok();
}

}  // namespace

Status moe_topk(const float* logits, int64_t n_tokens, int64_t n_expert, int64_t n_used,
                MoeGating gating, int32_t* ids) {
  MINFER_RETURN_IF_ERROR(check_sizes(n_tokens, n_expert, n_used));
  std::vector<float> scores;
  for (int64_t t = 0; t < n_tokens; ++t) {
    MINFER_RETURN_IF_ERROR(selection_scores(logits + t * n_expert, n_expert, gating, t, scores));
    select_top(scores, n_used, ids + t * n_used);
  }
  return Status::ok();
}

Status moe_weights(const float* logits, const int32_t* ids, int64_t n_tokens, int64_t n_expert,
                   int64_t n_used, MoeGating gating, float* weights) {
  MINFER_RETURN_IF_ERROR(check_sizes(n_tokens, n_expert, n_used));
  MINFER_RETURN_IF_ERROR(check_ids(ids, n_tokens * n_used, n_expert));
  std::vector<float> p(static_cast<size_t>(std::max(n_expert, n_used)));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = logits + t * n_expert;
    const int32_t* id = ids + t * n_used;
    float* w = weights + t * n_used;
    if (gating == MoeGating::kTopKSoftmax) {
      for (int64_t j = 0; j < n_used; ++j) p[j] = row[id[j]];
      softmax(p.data(), 1, n_used, 1.0f, w);
      continue;
    }
    softmax(row, 1, n_expert, 1.0f, p.data());
    for (int64_t j = 0; j < n_used; ++j) w[j] = p[id[j]];
    if (gating != MoeGating::kSoftmaxNormalized) continue;
    double sum = 0.0;
    for (int64_t j = 0; j < n_used; ++j) sum += static_cast<double>(w[j]);
    const float s = std::max(static_cast<float>(sum), kMinWeightSum);
    for (int64_t j = 0; j < n_used; ++j) w[j] = w[j] / s;
  }
  return Status::ok();
}

Status matmul_id(const ExpertWeights& w, const float* x, bool per_row_input, const int32_t* ids,
                 int64_t n_tokens, int64_t n_used, float* y, ThreadPool& pool, MoeScratch& scratch,
                 MatmulMode mode) {
  MINFER_RETURN_IF_ERROR(check_sizes(n_tokens, w.n_expert, n_used));
  MINFER_ASSIGN_OR_RETURN(const uint64_t row_bytes, quant::row_bytes(w.type, w.row_len));
  if (w.rows < 1 || w.expert_bytes < row_bytes * static_cast<uint64_t>(w.rows)) {
    return Status::internal("matmul_id: experts of " + std::to_string(w.expert_bytes) +
                            " bytes cannot hold " + std::to_string(w.rows) + " rows of " +
                            std::to_string(row_bytes));
  }
  const int64_t n_rows = n_tokens * n_used;
  MINFER_RETURN_IF_ERROR(check_ids(ids, n_rows, w.n_expert));
  group_by_expert(ids, n_rows, w.n_expert, scratch);
  const ExpertRows rows{x, per_row_input, n_used, y};
  if (takes_direct_kernel(w)) {
    return run_direct(w, static_cast<size_t>(row_bytes), rows, n_rows, pool, scratch);
  }
  const int n_threads = pool.num_threads();
  scratch.per_thread.resize(static_cast<size_t>(n_threads));
  const auto n_active = static_cast<int64_t>(scratch.active.size());
  if (n_threads == 1 || n_active < kExpertsPerThread * n_threads) {
    for (int32_t e : scratch.active) {
      MINFER_RETURN_IF_ERROR(run_expert(w, e, rows, pool, scratch, scratch.per_thread[0], mode));
    }
    return Status::ok();
  }
  // Many experts: one task each, its matmul inline on the thread that takes it.
  std::vector<Status> status(static_cast<size_t>(n_active));
  pool.parallel_for(n_active, [&](int64_t begin, int64_t end, int thread) {
    for (int64_t i = begin; i < end; ++i) {
      status[i] = run_expert(w, scratch.active[i], rows, pool, scratch,
                             scratch.per_thread[static_cast<size_t>(thread)], mode);
    }
  });
  for (Status& s : status) MINFER_RETURN_IF_ERROR(std::move(s));
  return Status::ok();
}

void moe_sum(const float* y, const float* weights, int64_t n_tokens, int64_t n_used, int64_t dim,
             float* out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* w = weights + t * n_used;
    const float* rows = y + t * n_used * dim;
    float* o = out + t * dim;
    for (int64_t i = 0; i < dim; ++i) o[i] = rows[i] * w[0];
    for (int64_t j = 1; j < n_used; ++j) {
      const float* r = rows + j * dim;
      for (int64_t i = 0; i < dim; ++i) {
        const float p = r[i] * w[j];
        o[i] = o[i] + p;
      }
    }
  }
}

}  // namespace minfer::cpu
