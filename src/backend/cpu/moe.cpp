#include "backend/cpu/moe.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cpu/matmul_gemm_vnni.h"
#include "backend/cpu/matmul_gemv_vnni.h"
#include "backend/cpu/moe_kquant_vnni.h"
#include "backend/cpu/moe_mxfp4_vnni.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/quantize_acts.h"
#include "quant/blocks.h"
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

// Weight rows per task of the direct expert kernels, the unit of a claim:
// a one-token decode step still splits each expert over the threads, and
// the last, single-task claims balance them.
constexpr int64_t kDirectRowsPerTask = 32;

// An expert with fewer tokens than this takes the K-quant direct kernel (one
// GEMV per token from rows in L1); from it on, matmul()'s VNNI GEMM, which
// repacks its rows once for all its tokens, is the faster
// (docs/PERFORMANCE.md, "Mixture of experts").
constexpr int32_t kKQuantDirectMaxTokens = 12;

// Input elements up to which the direct kernels prepare their rows on the
// calling thread rather than over the pool.
constexpr int64_t kPrepareInlineElements = 16384;

enum class DirectKernel { kNone, kMxfp4, kKQuant };

// Which direct expert kernel `w` takes instead of matmul() per expert:
// MXFP4 where matmul() would run the AVX2 row kernel whose bits
// mxfp4_expert_tile reproduces (every mode); Q4_K/Q6_K where matmul() would
// run the VNNI GEMV for a single token (not batch-invariant), for the experts
// with few tokens.
DirectKernel direct_kernel(const ExpertWeights& w, MatmulMode mode) {
  if (active_isa() != Isa::kAvx2 || !vnni_gemm_available()) return DirectKernel::kNone;
  if (w.type == quant::TensorType::MXFP4) return DirectKernel::kMxfp4;
  if (!mode.batch_invariant && vnni_gemv_type(w.type) && w.row_len % quant::kQK_K == 0) {
    return DirectKernel::kKQuant;
  }
  return DirectKernel::kNone;
}

// Bytes of one input row as the direct kernel of `w` reads it: Q8_0 for
// MXFP4, the VNNI GEMV's layout (64-byte multiples) for K-quants.
Result<size_t> prepared_row_bytes(const ExpertWeights& w) {
  if (w.type != quant::TensorType::MXFP4) return vnni_gemv_x_bytes(w.row_len);
  MINFER_ASSIGN_OR_RETURN(const uint64_t b, quant::row_bytes(quant::TensorType::Q8_0, w.row_len));
  return static_cast<size_t>(b);
}

// Row r of x as the direct kernel of `w` reads it, at out; `q8k` is room for
// a Q8_K row. False on a non-finite input.
bool prepare_row(const ExpertWeights& w, const float* x, uint8_t* q8k, uint8_t* out) {
  if (w.type == quant::TensorType::MXFP4) {
    return quantize_activations(quant::TensorType::Q8_0, x, out, w.row_len).is_ok();
  }
  if (!quantize_activations(quant::TensorType::Q8_K, x, q8k, w.row_len).is_ok()) return false;
  vnni_gemv_prepare_x(w.type, q8k, w.row_len, out);
  return true;
}

// Prepares each distinct input row once (a token's row serves all of its
// experts), in parallel, into s.prepared. The rows the last call prepared
// for the same layout are kept when x holds the same bits (a layer's gate and
// up projections read one input). An error names the first bad row.
Status prepare_rows(const ExpertWeights& w, const float* x, int64_t n_rows, size_t row_bytes,
                    ThreadPool& pool, MoeScratch& s) {
  MoeScratch::Prepared& p = s.prepared;
  const size_t n_floats = static_cast<size_t>(n_rows * w.row_len);
  if (p.valid && p.layout == w.type && p.row_len == w.row_len && p.source.size() == n_floats &&
      std::memcmp(p.source.data(), x, n_floats * sizeof(float)) == 0) {
    return Status::ok();
  }
  p.valid = false;
  p.bytes.resize(static_cast<size_t>(n_rows) * row_bytes + 64);
  const auto addr = reinterpret_cast<uintptr_t>(p.bytes.data());
  p.rows = p.bytes.data() + (64 - addr % 64) % 64;
  // Room for a Q8_K row per thread (K-quants only).
  const size_t q8k_bytes =
      w.type == quant::TensorType::MXFP4
          ? 0
          : static_cast<size_t>(w.row_len / quant::kQK_K) * sizeof(quant::BlockQ8_K);
  s.q8k.resize(static_cast<size_t>(pool.num_threads()) * q8k_bytes);
  std::atomic<int64_t> first_bad{n_rows};
  const auto prepare = [&](int64_t begin, int64_t end, int thread) {
    uint8_t* q8k = s.q8k.data() + static_cast<size_t>(thread) * q8k_bytes;
    for (int64_t r = begin; r < end; ++r) {
      if (prepare_row(w, x + r * w.row_len, q8k, p.rows + r * row_bytes)) continue;
      int64_t cur = first_bad.load();
      while (r < cur && !first_bad.compare_exchange_weak(cur, r)) {
      }
    }
  };
  // A decode step's few rows cost less than waking the pool.
  if (n_rows * w.row_len <= kPrepareInlineElements) {
    prepare(0, n_rows, 0);
  } else {
    pool.parallel_for(n_rows, prepare);
  }
  const int64_t bad = first_bad.load();
  if (bad != n_rows) {
    std::vector<uint8_t> row(row_bytes);
    const quant::TensorType xt =
        w.type == quant::TensorType::MXFP4 ? quant::TensorType::Q8_0 : quant::TensorType::Q8_K;
    return quant::quantize_row(xt, x + bad * w.row_len, row.data(), w.row_len)
        .with_context("activation row " + std::to_string(bad));
  }
  p.source.assign(x, x + n_floats);
  p.layout = w.type;
  p.row_len = w.row_len;
  p.valid = true;
  return Status::ok();
}

// One direct task: rows [r0, r1) of expert e against its tokens, in place.
void run_direct_task(const ExpertWeights& w, size_t w_row_bytes, const MoeScratch& s, int32_t e,
                     int64_t r0, int64_t r1) {
  const int32_t first = s.offsets[e], count = s.offsets[e + 1] - first;
  const auto* expert =
      static_cast<const uint8_t*>(w.data) + static_cast<size_t>(e) * w.expert_bytes;
  if (w.type == quant::TensorType::MXFP4) {
    const Mxfp4ExpertTile tile{
        expert, w_row_bytes, w.rows, w.row_len, s.x_rows.data() + first, s.y_rows.data() + first,
        count};
    mxfp4_expert_tile(tile, r0, r1);
  } else {
    const KQuantExpertTile tile{w.type,
                                expert,
                                w_row_bytes,
                                w.rows,
                                w.row_len,
                                s.x_rows.data() + first,
                                s.y_rows.data() + first,
                                count};
    kquant_expert_tile(tile, r0, r1);
  }
  if (w.bias == nullptr) return;
  const float* bias = w.bias + static_cast<int64_t>(e) * w.rows;
  for (int32_t i = 0; i < count; ++i) {
    float* dst = s.y_rows[first + i];
    for (int64_t o = r0; o < r1; ++o) dst[o] = dst[o] + bias[o];
  }
}

// The direct path for `experts`: inputs prepared once, then one task list
// over (expert, block of rows) pairs, each task's tokens read and written in
// place through row pointers. Each output depends on its row and token only,
// so the split changes no bit.
Status run_direct(const ExpertWeights& w, size_t w_row_bytes, const ExpertRows& rows,
                  int64_t n_rows, const std::vector<int32_t>& experts, ThreadPool& pool,
                  MoeScratch& s) {
  const int64_t x_rows = rows.per_row_input ? n_rows : n_rows / rows.n_used;
  MINFER_ASSIGN_OR_RETURN(const size_t x_bytes, prepared_row_bytes(w));
  MINFER_RETURN_IF_ERROR(prepare_rows(w, rows.x, x_rows, x_bytes, pool, s));
  s.x_rows.resize(static_cast<size_t>(n_rows));
  s.y_rows.resize(static_cast<size_t>(n_rows));
  for (int64_t i = 0; i < n_rows; ++i) {
    const int64_t r = s.order[i], src = rows.per_row_input ? r : r / rows.n_used;
    s.x_rows[i] = s.prepared.rows + src * x_bytes;
    s.y_rows[i] = rows.y + r * w.rows;
  }
  const int64_t blocks = (w.rows + kDirectRowsPerTask - 1) / kDirectRowsPerTask;
  const auto n_tasks = static_cast<int64_t>(experts.size()) * blocks;
  // Guided self-scheduling: each claim takes a share of what is left, so a
  // thread streams long runs of rows first and the last claims are single
  // tasks (a thread that loses its core holds up the call by one task).
  const int64_t n_threads = pool.num_threads();
  std::atomic<int64_t> next{0};
  pool.parallel_for(n_threads, [&](int64_t, int64_t, int) {
    for (;;) {
      int64_t begin = next.load(std::memory_order_relaxed), take = 0;
      do {
        if (begin >= n_tasks) return;
        take = std::max<int64_t>(1, (n_tasks - begin) / (2 * n_threads));
      } while (!next.compare_exchange_weak(begin, begin + take, std::memory_order_relaxed));
      // The claim's tasks of one expert are adjacent rows: one tile for
      // them all, so its prefetch runs on from one task into the next.
      for (int64_t task = begin; task < begin + take;) {
        const int64_t e = task / blocks, last = std::min(begin + take, (e + 1) * blocks) - 1;
        run_direct_task(w, w_row_bytes, s, experts[e], (task % blocks) * kDirectRowsPerTask,
                        std::min(w.rows, (last % blocks + 1) * kDirectRowsPerTask));
        task = last + 1;
      }
    }
  });
  return Status::ok();
}

// matmul() per expert for `experts`: one after another over the whole pool,
// or, when there are many, spread over the threads, each expert's matmul on
// one.
Status run_per_expert(const ExpertWeights& w, const ExpertRows& rows,
                      const std::vector<int32_t>& experts, ThreadPool& pool, MoeScratch& s,
                      MatmulMode mode) {
  const int n_threads = pool.num_threads();
  s.per_thread.resize(static_cast<size_t>(n_threads));
  const auto n_active = static_cast<int64_t>(experts.size());
  if (n_threads == 1 || n_active < kExpertsPerThread * n_threads) {
    for (int32_t e : experts) {
      MINFER_RETURN_IF_ERROR(run_expert(w, e, rows, pool, s, s.per_thread[0], mode));
    }
    return Status::ok();
  }
  std::vector<Status> status(static_cast<size_t>(n_active));
  pool.parallel_for(n_active, [&](int64_t begin, int64_t end, int thread) {
    for (int64_t i = begin; i < end; ++i) {
      status[i] =
          run_expert(w, experts[i], rows, pool, s, s.per_thread[static_cast<size_t>(thread)], mode);
    }
  });
  for (Status& st : status) MINFER_RETURN_IF_ERROR(std::move(st));
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
  const DirectKernel direct = direct_kernel(w, mode);
  if (direct == DirectKernel::kMxfp4) {
    return run_direct(w, static_cast<size_t>(row_bytes), rows, n_rows, scratch.active, pool,
                      scratch);
  }
  if (direct == DirectKernel::kNone) {
    return run_per_expert(w, rows, scratch.active, pool, scratch, mode);
  }
  // K-quants: the experts with few tokens direct, the others through matmul().
  scratch.direct.clear();
  scratch.batched.clear();
  for (int32_t e : scratch.active) {
    const int32_t count = scratch.offsets[e + 1] - scratch.offsets[e];
    (count < kKQuantDirectMaxTokens ? scratch.direct : scratch.batched).push_back(e);
  }
  if (!scratch.direct.empty()) {
    MINFER_RETURN_IF_ERROR(
        run_direct(w, static_cast<size_t>(row_bytes), rows, n_rows, scratch.direct, pool, scratch));
  }
  if (scratch.batched.empty()) return Status::ok();
  return run_per_expert(w, rows, scratch.batched, pool, scratch, mode);
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
