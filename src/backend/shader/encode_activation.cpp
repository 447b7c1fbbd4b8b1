#include "backend/shader/encode_activation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "backend/shader/encode_checks.h"
#include "backend/shader/kernel_args.h"
#include "backend/shader/kernel_table.h"
#include "backend/shader/limits.h"

namespace minfer::shader {
namespace {

// rows * row_len elements must be indexable by the kernels' u32.
Status fits_index(std::string_view op, int64_t rows, int64_t row_len) {
  if (uint64_t(rows) * uint64_t(row_len) > uint64_t(kMaxIndex)) {
    return Status::invalid_argument(std::string(op) + ": " + std::to_string(rows) + " x " +
                                    std::to_string(row_len) + " elements exceed 32-bit indices");
  }
  return Status::ok();
}

Result<uint32_t> kernel_index(std::string_view name, std::string_view variant) {
  const std::optional<uint32_t> k = find_kernel(name, variant);
  if (!k) {
    return Status::internal("kernel " + std::string(name) + "." + std::string(variant) +
                            " is not built in");
  }
  return *k;
}

// Workgroups of WG_X invocations covering n elements, folded over x and y.
Result<Groups> element_groups(const Recorder& rec, uint32_t kernel, uint64_t n) {
  const uint64_t per_group = embedded_kernels()[kernel].workgroup[0];
  return fold_groups((n + per_group - 1) / per_group, rec.device().info().limits);
}

// Whether bytes [offset, offset + bytes) of two bindings intersect.
bool overlap(const BufferRange& a, uint64_t a_bytes, const BufferRange& b, uint64_t b_bytes) {
  return a.buffer == b.buffer && a.offset < b.offset + b_bytes && b.offset < a.offset + a_bytes;
}

const char* unary_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::kScale:
      return "scale";
    case UnaryOp::kSilu:
      return "silu";
    case UnaryOp::kGelu:
      return "gelu";
  }
  return "unknown";
}

struct GatherBytes {
  uint64_t x, ids, out, err;
};

// The overlaps encode_gather_rows refuses (encode_activation.h).
Status check_gather_aliasing(const BufferRange& x, const BufferRange& ids, const BufferRange& out,
                             const BufferRange& err, const GatherBytes& b, bool in_place) {
  if (!in_place && overlap(out, b.out, x, b.x)) {
    return Status::invalid_argument(
        "gather_rows: out overlaps x without starting where x starts (offsets " +
        std::to_string(out.offset) + " and " + std::to_string(x.offset) + ")");
  }
  if (overlap(out, b.out, ids, b.ids)) {
    return Status::invalid_argument("gather_rows: out overlaps ids");
  }
  if (overlap(err, b.err, x, b.x) || overlap(err, b.err, ids, b.ids) ||
      overlap(err, b.err, out, b.out)) {
    return Status::invalid_argument("gather_rows: the error words overlap x, ids or out");
  }
  return Status::ok();
}

// The one rw binding of the in-place kernel: x's start, covering x and out.
BufferRange in_place_range(const BufferRange& x, const BufferRange& out) {
  const uint64_t size = x.size == 0 || out.size == 0 ? 0 : std::max(x.size, out.size);
  return BufferRange{x.buffer, x.offset, size};
}

// One glu.comp dispatch of variant `name` over n elements.
Status dispatch_glu(Recorder& rec, const char* name, const BufferRange& gate, const BufferRange& up,
                    const BufferRange& out, int64_t n, float alpha, float limit,
                    std::string_view note) {
  MINFER_RETURN_IF_ERROR(positive(name, "n", n));
  MINFER_RETURN_IF_ERROR(needs(name, "gate", gate, uint64_t(n) * 4));
  MINFER_RETURN_IF_ERROR(needs(name, "up", up, uint64_t(n) * 4));
  MINFER_RETURN_IF_ERROR(needs(name, "out", out, uint64_t(n) * 4));
  MINFER_ASSIGN_OR_RETURN(const uint32_t kernel, kernel_index("glu", name));
  MINFER_ASSIGN_OR_RETURN(const Groups groups, element_groups(rec, kernel, uint64_t(n)));
  const args::GluArgs args{static_cast<uint32_t>(n), alpha, limit};
  const BufferRange bindings[] = {gate, up, out};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

}  // namespace

Status encode_unary(Recorder& rec, UnaryOp op, const BufferRange& x, const BufferRange& out,
                    int64_t n, float scale, std::string_view note) {
  const char* name = unary_name(op);
  MINFER_RETURN_IF_ERROR(positive(name, "n", n));
  MINFER_RETURN_IF_ERROR(needs(name, "x", x, uint64_t(n) * 4));
  MINFER_RETURN_IF_ERROR(needs(name, "out", out, uint64_t(n) * 4));
  MINFER_ASSIGN_OR_RETURN(const uint32_t kernel, kernel_index("unary", name));
  MINFER_ASSIGN_OR_RETURN(const Groups groups, element_groups(rec, kernel, uint64_t(n)));
  const args::UnaryArgs args{static_cast<uint32_t>(n), op == UnaryOp::kScale ? scale : 1.0f};
  const BufferRange bindings[] = {x, out};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

Status encode_glu(Recorder& rec, GluOp op, const BufferRange& gate, const BufferRange& up,
                  const BufferRange& out, int64_t n, std::string_view note) {
  return dispatch_glu(rec, op == GluOp::kSwiGLU ? "swiglu" : "geglu", gate, up, out, n, 0.0f, 0.0f,
                      note);
}

Status encode_swiglu_oai(Recorder& rec, const BufferRange& gate, const BufferRange& up,
                         const BufferRange& out, int64_t n, float alpha, float limit,
                         std::string_view note) {
  if (!std::isfinite(alpha) || !std::isfinite(limit)) {
    return Status::invalid_argument("swiglu_oai: alpha " + std::to_string(alpha) + " and limit " +
                                    std::to_string(limit) + " must be finite");
  }
  return dispatch_glu(rec, "swiglu_oai", gate, up, out, n, alpha, limit, note);
}

Status encode_argmax(Recorder& rec, const BufferRange& x, const BufferRange& out, int64_t n_rows,
                     int64_t row_len, std::string_view note) {
  MINFER_RETURN_IF_ERROR(positive("argmax", "n_rows", n_rows));
  MINFER_RETURN_IF_ERROR(positive("argmax", "row_len", row_len));
  // Indices are written as i32: a row past INT32_MAX could not name them all.
  if (row_len > std::numeric_limits<int32_t>::max()) {
    return Status::invalid_argument("argmax: row_len = " + std::to_string(row_len) +
                                    " exceeds the i32 indices it writes");
  }
  MINFER_RETURN_IF_ERROR(fits_index("argmax", n_rows, row_len));
  MINFER_RETURN_IF_ERROR(needs("argmax", "x", x, uint64_t(n_rows) * uint64_t(row_len) * 4));
  MINFER_RETURN_IF_ERROR(needs("argmax", "out", out, uint64_t(n_rows) * 4));
  MINFER_ASSIGN_OR_RETURN(const uint32_t kernel, kernel_index("argmax", "f32"));
  MINFER_ASSIGN_OR_RETURN(const Groups groups,
                          fold_groups(uint64_t(n_rows), rec.device().info().limits));
  const args::ArgmaxArgs args{static_cast<uint32_t>(n_rows), static_cast<uint32_t>(row_len)};
  const BufferRange bindings[] = {x, out};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

Status encode_gather_rows(Recorder& rec, const BufferRange& x, const BufferRange& ids,
                          const BufferRange& out, const BufferRange& err, int64_t n_src,
                          int64_t row_len, int64_t n_out, float scale, std::string_view note) {
  MINFER_RETURN_IF_ERROR(positive("gather_rows", "n_src", n_src));
  MINFER_RETURN_IF_ERROR(positive("gather_rows", "row_len", row_len));
  MINFER_RETURN_IF_ERROR(positive("gather_rows", "n_out", n_out));
  MINFER_RETURN_IF_ERROR(fits_index("gather_rows", n_src, row_len));
  MINFER_RETURN_IF_ERROR(fits_index("gather_rows", n_out, row_len));
  const GatherBytes bytes{uint64_t(n_src) * uint64_t(row_len) * 4, uint64_t(n_out) * 4,
                          uint64_t(n_out) * uint64_t(row_len) * 4, MINFER_ERR_WORDS * 4};
  MINFER_RETURN_IF_ERROR(needs("gather_rows", "x", x, bytes.x));
  MINFER_RETURN_IF_ERROR(needs("gather_rows", "ids", ids, bytes.ids));
  MINFER_RETURN_IF_ERROR(needs("gather_rows", "out", out, bytes.out));
  MINFER_RETURN_IF_ERROR(needs("gather_rows", "err", err, bytes.err));
  const bool in_place = out.buffer == x.buffer && out.offset == x.offset;
  MINFER_RETURN_IF_ERROR(check_gather_aliasing(x, ids, out, err, bytes, in_place));
  const args::GatherRowsArgs args{static_cast<uint32_t>(n_src), static_cast<uint32_t>(row_len),
                                  static_cast<uint32_t>(n_out), scale};
  if (!in_place) {
    MINFER_ASSIGN_OR_RETURN(const uint32_t kernel, kernel_index("gather_rows", "f32"));
    MINFER_ASSIGN_OR_RETURN(const Groups groups,
                            element_groups(rec, kernel, uint64_t(n_out) * uint64_t(row_len)));
    const BufferRange bindings[] = {x, ids, out, err};
    return rec.dispatch_args(kernel, bindings, args, groups, note);
  }
  if (n_out > kMaxInPlaceGatherRows) {
    return Status::invalid_argument("gather_rows: n_out = " + std::to_string(n_out) +
                                    " in place (out == x) exceeds " +
                                    std::to_string(kMaxInPlaceGatherRows) + " rows");
  }
  MINFER_ASSIGN_OR_RETURN(const uint32_t kernel, kernel_index("gather_rows_in_place", "f32"));
  MINFER_ASSIGN_OR_RETURN(const Groups groups, element_groups(rec, kernel, uint64_t(row_len)));
  const BufferRange bindings[] = {in_place_range(x, out), ids, err};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

}  // namespace minfer::shader
