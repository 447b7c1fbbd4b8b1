#include "backend/gpu/encoders.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "backend/gpu/kernel_args.h"
#include "backend/gpu/kernel_table.h"
#include "backend/gpu/limits.h"

namespace minfer::gpu {
namespace {

constexpr int64_t kMaxIndex = std::numeric_limits<uint32_t>::max();

// The bytes a binding offers the kernel.
uint64_t bound_bytes(const BufferRange& r) {
  if (r.buffer == nullptr) return 0;
  if (r.size != 0) return r.size;
  return r.offset < r.buffer->capacity() ? r.buffer->capacity() - r.offset : 0;
}

Status needs(std::string_view op, std::string_view what, const BufferRange& r, uint64_t bytes) {
  if (r.buffer == nullptr) {
    return Status::invalid_argument(std::string(op) + ": no buffer for " + std::string(what));
  }
  if (bound_bytes(r) < bytes) {
    return Status::invalid_argument(std::string(op) + ": " + std::string(what) + " needs " +
                                    std::to_string(bytes) + " bytes, its binding has " +
                                    std::to_string(bound_bytes(r)));
  }
  return Status::ok();
}

Status positive(std::string_view op, std::string_view what, int64_t v) {
  if (v <= 0 || v > kMaxIndex) {
    return Status::invalid_argument(std::string(op) + ": " + std::string(what) + " = " +
                                    std::to_string(v) + " (must be in 1.." +
                                    std::to_string(kMaxIndex) + ")");
  }
  return Status::ok();
}

uint32_t kernel_or_max(std::string_view name, std::string_view variant) {
  return find_kernel(name, variant).value_or(std::numeric_limits<uint32_t>::max());
}

// Variants of matmul for a weight type, preferred first.
std::vector<std::string_view> matmul_variants(quant::TensorType type) {
  using quant::TensorType;
  switch (type) {
    case TensorType::F32:
      return {"f32"};
    case TensorType::F16:
      return {"f16", "f16_packed"};
    case TensorType::Q8_0:
      return {"q8_0", "q8_0_packed"};
    case TensorType::Q4_0:
      return {"q4_0", "q4_0_packed"};
    default:
      return {};
  }
}

}  // namespace

Status encode_elementwise(Recorder& rec, ElementwiseOp op, const BufferRange& a,
                          const BufferRange& b, const BufferRange& out, int64_t n, int64_t n_b,
                          std::string_view note) {
  const char* name = op == ElementwiseOp::kAdd ? "add" : "mul";
  MINFER_RETURN_IF_ERROR(positive(name, "n", n));
  MINFER_RETURN_IF_ERROR(positive(name, "n_b", n_b));
  if (n_b > n) {
    return Status::invalid_argument(std::string(name) + ": n_b = " + std::to_string(n_b) +
                                    " exceeds n = " + std::to_string(n));
  }
  MINFER_RETURN_IF_ERROR(needs(name, "a", a, uint64_t(n) * 4));
  MINFER_RETURN_IF_ERROR(needs(name, "b", b, uint64_t(n_b) * 4));
  MINFER_RETURN_IF_ERROR(needs(name, "out", out, uint64_t(n) * 4));
  const uint32_t kernel = kernel_or_max("elementwise", name);
  const uint64_t per_group = embedded_kernels()[kernel].workgroup[0];
  MINFER_ASSIGN_OR_RETURN(
      const Groups groups,
      fold_groups((uint64_t(n) + per_group - 1) / per_group, rec.device().info().limits));
  const args::ElementwiseArgs args{static_cast<uint32_t>(n), static_cast<uint32_t>(n_b)};
  const BufferRange bindings[] = {a, b, out};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

Status encode_rms_norm(Recorder& rec, const BufferRange& x, const BufferRange& w,
                       const BufferRange& y, int64_t n_rows, int64_t dim, float eps,
                       std::string_view note) {
  MINFER_RETURN_IF_ERROR(positive("rms_norm", "n_rows", n_rows));
  MINFER_RETURN_IF_ERROR(positive("rms_norm", "dim", dim));
  if (uint64_t(n_rows) * uint64_t(dim) > uint64_t(kMaxIndex)) {
    return Status::invalid_argument("rms_norm: " + std::to_string(n_rows) + " x " +
                                    std::to_string(dim) + " elements exceed 32-bit indices");
  }
  MINFER_RETURN_IF_ERROR(needs("rms_norm", "x", x, uint64_t(n_rows) * dim * 4));
  MINFER_RETURN_IF_ERROR(needs("rms_norm", "y", y, uint64_t(n_rows) * dim * 4));
  const bool has_weight = w.buffer != nullptr;
  if (has_weight) MINFER_RETURN_IF_ERROR(needs("rms_norm", "w", w, uint64_t(dim) * 4));
  MINFER_ASSIGN_OR_RETURN(const Groups groups,
                          fold_groups(uint64_t(n_rows), rec.device().info().limits));
  const args::RmsNormArgs args{static_cast<uint32_t>(dim), static_cast<uint32_t>(n_rows),
                               has_weight ? 1u : 0u, eps};
  // Without a weight, binding 1 is x again: bound, never read.
  const BufferRange bindings[] = {x, has_weight ? w : x, y};
  return rec.dispatch_args(kernel_or_max("rms_norm", "f32"), bindings, args, groups, note);
}

Result<uint32_t> matmul_kernel(const Device& device, quant::TensorType type) {
  const std::vector<std::string_view> variants = matmul_variants(type);
  if (variants.empty()) {
    return Status::unimplemented("matmul: no GPU kernel for " +
                                 std::string(quant::type_name(type)) + " weights yet");
  }
  std::string why;
  for (std::string_view v : variants) {
    const std::optional<uint32_t> k = find_kernel("matmul", v);
    if (k && device.kernel(*k).available) return *k;
    why += (why.empty() ? "" : "; ") + std::string(v) + ": " +
           (k ? device.kernel(*k).unavailable_reason : std::string("not built"));
  }
  return Status::unimplemented("matmul of " + std::string(quant::type_name(type)) + " on " +
                               device.info().name + ": " + why);
}

Status encode_matmul(Recorder& rec, uint32_t kernel, quant::TensorType type, const BufferRange& w,
                     const BufferRange& x, const BufferRange& y, MatmulShape s,
                     std::string_view note) {
  const std::span<const KernelInfo> table = embedded_kernels();
  const std::vector<std::string_view> variants = matmul_variants(type);
  if (kernel >= table.size() || table[kernel].name != "matmul" ||
      std::find(variants.begin(), variants.end(), table[kernel].variant) == variants.end()) {
    return Status::invalid_argument("matmul: kernel " + std::to_string(kernel) +
                                    " is not a matmul variant for " +
                                    std::string(quant::type_name(type)) + " weights");
  }
  MINFER_RETURN_IF_ERROR(positive("matmul", "in_dim", s.in_dim));
  MINFER_RETURN_IF_ERROR(positive("matmul", "out_dim", s.out_dim));
  MINFER_RETURN_IF_ERROR(positive("matmul", "n_tokens", s.n_tokens));
  if (uint64_t(s.in_dim) * s.out_dim > uint64_t(kMaxIndex) ||
      uint64_t(s.in_dim) * s.n_tokens > uint64_t(kMaxIndex) ||
      uint64_t(s.out_dim) * s.n_tokens > uint64_t(kMaxIndex)) {
    return Status::invalid_argument("matmul: shape " + std::to_string(s.out_dim) + " x " +
                                    std::to_string(s.in_dim) + " x " + std::to_string(s.n_tokens) +
                                    " exceeds 32-bit indices");
  }
  auto row = quant::row_bytes(type, s.in_dim);  // refuses rows of partial blocks
  if (!row.is_ok()) return row.status().with_context("matmul");
  MINFER_RETURN_IF_ERROR(needs("matmul", "W", w, *row * uint64_t(s.out_dim)));
  MINFER_RETURN_IF_ERROR(needs("matmul", "x", x, uint64_t(s.in_dim) * s.n_tokens * 4));
  MINFER_RETURN_IF_ERROR(needs("matmul", "y", y, uint64_t(s.out_dim) * s.n_tokens * 4));
  MINFER_ASSIGN_OR_RETURN(Groups groups,
                          fold_groups(uint64_t(s.out_dim), rec.device().info().limits));
  const uint64_t tokens_per_group = MINFER_MATMUL_TOKENS_PER_GROUP;
  const uint64_t z = (uint64_t(s.n_tokens) + tokens_per_group - 1) / tokens_per_group;
  groups.z = static_cast<uint32_t>(z);  // checked against the limit by the recorder
  const args::MatmulArgs args{static_cast<uint32_t>(s.in_dim), static_cast<uint32_t>(s.out_dim),
                              static_cast<uint32_t>(s.n_tokens), 0};
  // The packed variants read whole 32-bit words: a sized range is widened to
  // the next word (the recorder checks that this stays in the buffer).
  BufferRange words = w;
  if (words.size % 4 != 0) words.size += 4 - words.size % 4;
  const BufferRange bindings[] = {words, x, y};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

}  // namespace minfer::gpu
