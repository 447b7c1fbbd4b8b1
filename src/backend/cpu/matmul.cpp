#include "backend/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <string>

#include "backend/cpu/matmul_gemm.h"
#include "backend/cpu/matmul_gemm_vnni.h"
#include "backend/cpu/matmul_gemv_vnni.h"
#include "backend/cpu/matmul_packed.h"
#include "backend/cpu/quantize_acts.h"

#include "quant/reference.h"

namespace minfer::cpu {
namespace {

// Output rows per task: enough that a task streams a sizeable slab of weights,
// few enough that two threads still balance on small matrices.
constexpr int64_t kRowsPerTask = 16;
// Tokens that share one pass over a weight row, which is then still in L1.
constexpr int64_t kTokenTile = 4;
// Tokens per task: a task's weight rows stay in L2 while it walks its tokens.
constexpr int64_t kTokensPerTask = 64;
// Tokens per task of the VNNI GEMM, which repacks a task's rows first: a
// whole 512-token batch, so each row group is repacked once; the row groups
// alone balance the threads (128 rows are 8 tasks).
constexpr int64_t kVnniTokensPerTask = 512;
// The VNNI GEMM's repack pays for itself from about a dozen tokens; below,
// the row-by-row dot kernels win (docs/PERFORMANCE.md, "Constants and their measurements").
constexpr int64_t kVnniMinTokens = 12;
// Rows per task of the single-token VNNI GEMV: long enough runs of rows that
// its prefetch of the next rows stays ahead (16 passes of 4 rows).
constexpr int64_t kGemvRowsPerTask = 64;

std::string dims(const MatmulWeight& w, int64_t n_tokens) {
  return std::string(quant::type_name(w.type)) + " [" + std::to_string(w.rows) + " x " +
         std::to_string(w.row_len) + "], " + std::to_string(n_tokens) + " tokens";
}

Result<size_t> validate(const MatmulWeight& w, const float* x, int64_t n_tokens, const float* y) {
  if (w.rows < 0 || w.row_len < 0 || n_tokens < 0) {
    return Status::internal("matmul " + dims(w, n_tokens) + ": negative size");
  }
  MINFER_RETURN_IF_ERROR(
      dot_args_ok(w.type, w.row_len).with_context("matmul " + dims(w, n_tokens)));
  MINFER_ASSIGN_OR_RETURN(const uint64_t row_bytes, quant::row_bytes(w.type, w.row_len));
  const size_t stride = w.row_stride == 0 ? static_cast<size_t>(row_bytes) : w.row_stride;
  if (stride < row_bytes) {
    return Status::internal("matmul " + dims(w, n_tokens) + ": row stride " +
                            std::to_string(stride) + " bytes is shorter than a row (" +
                            std::to_string(row_bytes) + " bytes)");
  }
  const bool has_work = w.rows > 0 && n_tokens > 0;
  if (has_work && (w.data == nullptr || y == nullptr || (w.row_len > 0 && x == nullptr))) {
    return Status::internal("matmul " + dims(w, n_tokens) + ": null buffer");
  }
  return stride;
}

// Converts every token row of x to `type` in scratch; x rows are row_len floats.
// With `vnni_weight` set (type is then Q8_0), rows go straight to the
// prepared layout of the VNNI GEMM for that weight type (the same quants;
// matmul_gemm_vnni.h) and scratch holds vnni_x_row_bytes-sized rows.
Status convert_activations(quant::TensorType type, const float* x, int64_t n_tokens,
                           int64_t row_len, size_t x_bytes, ThreadPool& pool,
                           std::vector<uint8_t>& scratch,
                           const quant::TensorType* vnni_weight = nullptr) {
  const size_t out_bytes = vnni_weight != nullptr ? vnni_x_row_bytes(row_len) : x_bytes;
  scratch.resize(static_cast<size_t>(n_tokens) * out_bytes);
  std::atomic<int64_t> first_bad{n_tokens};
  pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      uint8_t* dst = scratch.data() + t * out_bytes;
      const bool ok = vnni_weight != nullptr
                          ? vnni_quantize_x(*vnni_weight, x + t * row_len, row_len, dst)
                          : quantize_activations(type, x + t * row_len, dst, row_len).is_ok();
      if (!ok) {
        int64_t cur = first_bad.load();
        while (t < cur && !first_bad.compare_exchange_weak(cur, t)) {
        }
      }
    }
  });
  const int64_t bad = first_bad.load();
  if (bad == n_tokens) return Status::ok();
  // Redo the failing row serially for its message.
  std::vector<uint8_t> row(x_bytes);
  return quant::quantize_row(type, x + bad * row_len, row.data(), row_len)
      .with_context("activation row " + std::to_string(bad));
}

// One token of Q4_K/Q6_K on AVX-512 VNNI (matmul_gemv_vnni.h): the row is
// quantized to Q8_K (x_bytes) at the start of scratch, then laid out for the
// kernel at the next 64-byte boundary after it.
Status vnni_gemv_matmul(const MatmulWeight& w, size_t w_stride, const float* x, size_t x_bytes,
                        float* y, ThreadPool& pool, std::vector<uint8_t>& scratch) {
  MINFER_RETURN_IF_ERROR(
      convert_activations(quant::TensorType::Q8_K, x, 1, w.row_len, x_bytes, pool, scratch)
          .with_context("matmul " + dims(w, 1)));
  scratch.resize(x_bytes + 64 + vnni_gemv_x_bytes(w.row_len));
  const auto addr = reinterpret_cast<uintptr_t>(scratch.data()) + x_bytes;
  uint8_t* xp = scratch.data() + x_bytes + ((64 - addr % 64) % 64);
  vnni_gemv_prepare_x(w.type, scratch.data(), w.row_len, xp);
  const GemmProblem gp{static_cast<const uint8_t*>(w.data), w_stride, xp, 0, w.row_len, y, w.rows};
  const int64_t tasks = (w.rows + kGemvRowsPerTask - 1) / kGemvRowsPerTask;
  pool.parallel_for(tasks, [&](int64_t begin, int64_t end, int) {
    vnni_gemv(w.type, gp, begin * kGemvRowsPerTask, std::min(w.rows, end * kGemvRowsPerTask));
  });
  return Status::ok();
}

}  // namespace

bool takes_vnni(quant::TensorType type, int64_t n_tokens, MatmulMode mode) {
  if (mode.batch_invariant || active_isa() != Isa::kAvx2 || !vnni_gemm_available()) return false;
  // A single token of a packable type streams faster packed (Zen 4: Q4_K 31.6
  // GB/s packed against 19.1 for the VNNI GEMV, docs/PERFORMANCE.md).
  if (n_tokens == 1) return vnni_gemv_type(type) && !packable(type);
  return n_tokens >= kVnniMinTokens && vnni_gemm_type(type);
}

Status matmul(const MatmulWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
              std::vector<uint8_t>& scratch, MatmulMode mode) {
  return matmul(w, x, n_tokens, y, pool, scratch, active_isa(), mode);
}

Status matmul(const MatmulWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
              std::vector<uint8_t>& scratch, Isa isa, MatmulMode mode) {
  MINFER_ASSIGN_OR_RETURN(const size_t w_stride, validate(w, x, n_tokens, y));
  if (w.rows == 0 || n_tokens == 0) return Status::ok();
  MINFER_ASSIGN_OR_RETURN(const quant::TensorType xt, vec_dot_type(w.type));
  MINFER_ASSIGN_OR_RETURN(const uint64_t x_bytes, quant::row_bytes(xt, w.row_len));
  // Single tokens of Q4_K/Q6_K on AVX-512 VNNI CPUs (matmul_gemv_vnni.h);
  // not batch-invariant (its float order is not the tiles'), like the GEMM.
  if (!mode.batch_invariant && isa == Isa::kAvx2 && n_tokens == 1 && vnni_gemv_type(w.type) &&
      vnni_gemm_available()) {
    return vnni_gemv_matmul(w, w_stride, x, static_cast<size_t>(x_bytes), y, pool, scratch);
  }
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  // Batches of Q4_0/Q5_0/Q8_0 on AVX-512 VNNI CPUs (matmul_gemm_vnni.h); the
  // gather indices of its repack need 16 row strides to fit in an int32.
  if (!mode.batch_invariant && isa == Isa::kAvx2 && n_tokens >= kVnniMinTokens &&
      vnni_gemm_type(w.type) && vnni_gemm_available() &&
      w_stride <= static_cast<size_t>(INT_MAX / 16)) {
    // Q8_0 activations go to the kernel's own layout; Q8_K rows are used as they are.
    const bool q8_0 = xt == quant::TensorType::Q8_0;
    MINFER_RETURN_IF_ERROR(convert_activations(xt, x, n_tokens, w.row_len, x_bytes, pool, scratch,
                                               q8_0 ? &w.type : nullptr)
                               .with_context("matmul " + dims(w, n_tokens)));
    const size_t x_stride = q8_0 ? vnni_x_row_bytes(w.row_len) : static_cast<size_t>(x_bytes);
    const GemmProblem gp{wdata, w_stride, scratch.data(), x_stride, w.row_len, y, w.rows};
    const int64_t row_blocks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
    const int64_t token_blocks = (n_tokens + kVnniTokensPerTask - 1) / kVnniTokensPerTask;
    pool.parallel_for(row_blocks * token_blocks, [&](int64_t begin, int64_t end, int) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t r_begin = (task / token_blocks) * kRowsPerTask;
        const int64_t t_begin = (task % token_blocks) * kVnniTokensPerTask;
        vnni_gemm(w.type, gp, r_begin, std::min(w.rows, r_begin + kRowsPerTask), t_begin,
                  std::min(n_tokens, t_begin + kVnniTokensPerTask));
      }
    });
    return Status::ok();
  }
  const uint8_t* xq = reinterpret_cast<const uint8_t*>(x);
  if (xt != quant::TensorType::F32) {
    MINFER_RETURN_IF_ERROR(convert_activations(xt, x, n_tokens, w.row_len, x_bytes, pool, scratch)
                               .with_context("matmul " + dims(w, n_tokens)));
    xq = scratch.data();
  }
  const DotFn dot_fn = dot_kernel(w.type, isa);
  // The tiled kernels where the type has one (matmul_gemm.h), else one
  // dot_fn call per output.
  // Batch-invariant: the kernel of a two-token batch for every size.
  const int64_t kernel_tokens = mode.batch_invariant ? std::max<int64_t>(n_tokens, 2) : n_tokens;
  const GemmKernel gemm = isa == Isa::kAvx2 ? gemm_kernel(w.type, kernel_tokens) : nullptr;
  const GemmProblem gp{wdata, w_stride, xq, static_cast<size_t>(x_bytes), w.row_len, y, w.rows};
  // Tasks are (row block, token block) pairs, row-block major, so a decode
  // step splits over rows and a long prompt over tokens as well.
  const int64_t row_blocks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
  const int64_t token_blocks = (n_tokens + kTokensPerTask - 1) / kTokensPerTask;
  pool.parallel_for(row_blocks * token_blocks, [&](int64_t begin, int64_t end, int) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r_begin = (task / token_blocks) * kRowsPerTask;
      const int64_t r_end = std::min(w.rows, r_begin + kRowsPerTask);
      const int64_t t_begin = (task % token_blocks) * kTokensPerTask;
      const int64_t t_end = std::min(n_tokens, t_begin + kTokensPerTask);
      if (gemm != nullptr) {
        gemm(gp, r_begin, r_end, t_begin, t_end);
        continue;
      }
      for (int64_t t0 = t_begin; t0 < t_end; t0 += kTokenTile) {
        const int64_t tile_end = std::min(t_end, t0 + kTokenTile);
        for (int64_t r = r_begin; r < r_end; ++r) {
          const uint8_t* w_row = wdata + static_cast<size_t>(r) * w_stride;
          for (int64_t t = t0; t < tile_end; ++t) {
            y[t * w.rows + r] = dot_fn(w.row_len, w_row, xq + t * x_bytes);
          }
        }
      }
    }
  });
  return Status::ok();
}

}  // namespace minfer::cpu
