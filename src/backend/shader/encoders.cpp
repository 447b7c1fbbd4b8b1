#include "backend/shader/encoders.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <limits>
#include <string>
#include <vector>

#include "backend/shader/encode_checks.h"
#include "backend/shader/kernel_args.h"
#include "backend/shader/kernel_table.h"
#include "backend/shader/limits.h"

namespace minfer::shader {
namespace {

uint32_t kernel_or_max(std::string_view name, std::string_view variant) {
  return find_kernel(name, variant).value_or(std::numeric_limits<uint32_t>::max());
}

// Variants of the weight kernels (matmul, get_rows) for a weight type,
// preferred first: 8/16-bit storage, then the packed words.
std::vector<std::string_view> weight_variants(quant::TensorType type) {
  using quant::TensorType;
  switch (type) {
    case TensorType::F32:
      return {"f32"};
    case TensorType::F16:
      return {"f16", "f16_packed"};
    case TensorType::BF16:
      return {"bf16", "bf16_packed"};
    case TensorType::Q4_0:
      return {"q4_0", "q4_0_packed"};
    case TensorType::Q4_1:
      return {"q4_1", "q4_1_packed"};
    case TensorType::Q5_0:
      return {"q5_0", "q5_0_packed"};
    case TensorType::Q5_1:
      return {"q5_1", "q5_1_packed"};
    case TensorType::Q8_0:
      return {"q8_0", "q8_0_packed"};
    case TensorType::MXFP4:
      return {"mxfp4", "mxfp4_packed"};
    case TensorType::Q2_K:
      return {"q2_k", "q2_k_packed"};
    case TensorType::Q3_K:
      return {"q3_k", "q3_k_packed"};
    case TensorType::Q4_K:
      return {"q4_k", "q4_k_packed"};
    case TensorType::Q5_K:
      return {"q5_k", "q5_k_packed"};
    case TensorType::Q6_K:
      return {"q6_k", "q6_k_packed"};
    default:
      return {};
  }
}

// The first variant of kernel `name` for `type` that the device has.
Result<uint32_t> weight_kernel(const Device& device, std::string_view name,
                               quant::TensorType type) {
  const std::vector<std::string_view> variants = weight_variants(type);
  if (variants.empty()) {
    return Status::unimplemented(std::string(name) + ": no GPU kernel for " +
                                 std::string(quant::type_name(type)) + " weights yet");
  }
  std::string why;
  for (std::string_view v : variants) {
    const std::optional<uint32_t> k = find_kernel(name, v);
    if (k && device.kernel(*k).available) return *k;
    why += (why.empty() ? "" : "; ") + std::string(v) + ": " +
           (k ? device.kernel(*k).unavailable_reason : std::string("not built"));
  }
  return Status::unimplemented(std::string(name) + " of " + std::string(quant::type_name(type)) +
                               " on " + device.info().name + ": " + why);
}

// `kernel` must be a variant of `name` for `type`.
Status check_weight_kernel(std::string_view name, uint32_t kernel, quant::TensorType type) {
  const std::span<const KernelInfo> table = embedded_kernels();
  const std::vector<std::string_view> variants = weight_variants(type);
  if (kernel >= table.size() || table[kernel].name != name ||
      std::find(variants.begin(), variants.end(), table[kernel].variant) == variants.end()) {
    return Status::invalid_argument(std::string(name) + ": kernel " + std::to_string(kernel) +
                                    " is not a " + std::string(name) + " variant for " +
                                    std::string(quant::type_name(type)) + " weights");
  }
  return Status::ok();
}

// The packed variants read whole 32-bit words: a sized range is widened to
// the next word (the recorder checks that this stays in the buffer).
BufferRange whole_words(BufferRange r) {
  if (r.size % 4 != 0) r.size += 4 - r.size % 4;
  return r;
}

// Elements per unit of matmul_units.glsl: a whole 32-element block (or 32
// elements of a K-quant block) for the types with their own decoder,
// weights.glsl's 8 otherwise.
int64_t matmul_unit_elements(quant::TensorType type) {
  using quant::TensorType;
  switch (type) {
    case TensorType::Q4_0:
    case TensorType::Q5_0:
    case TensorType::Q8_0:
    case TensorType::Q4_K:
    case TensorType::Q6_K:
      return 32;
    default:
      return 8;
  }
}

// Tests: the forced invocations per matmul row and rows per set of them
// (0: none) and scalar x loads.
std::atomic<uint32_t> forced_matmul_lanes{0};
std::atomic<uint32_t> forced_matmul_rows{0};
std::atomic<bool> forced_scalar_x{false};
std::atomic<uint32_t> forced_id_groups{0};

// Units of a matmul row (matmul_units.glsl).
int64_t matmul_units(quant::TensorType type, int64_t in_dim) {
  const int64_t per_unit = matmul_unit_elements(type);
  return (in_dim + per_unit - 1) / per_unit;
}

// log2 of the invocations per matmul row: about one 32-element unit or two
// 8-element ones each (a power of two), so that a row's loads are in flight
// at once; at least 32 and the device's subgroup size (one whole subgroup
// per row needs no barrier), at most the workgroup. From the type and in_dim
// alone: a token's summation order never depends on the batch. The sizes
// were the fastest measured (docs/PERFORMANCE.md, "Constants and their measurements").
uint32_t matmul_lanes_log2(quant::TensorType type, int64_t in_dim, uint32_t subgroup_size,
                           uint32_t workgroup) {
  const int64_t units = matmul_units(type, in_dim);
  const int64_t per_lane = matmul_unit_elements(type) == 32 ? 1 : 2;
  uint64_t lanes = std::bit_ceil(uint64_t((units + per_lane - 1) / per_lane));
  lanes = std::max<uint64_t>(lanes, std::max<uint32_t>(32, subgroup_size));
  if (const uint32_t forced = forced_matmul_lanes.load()) lanes = forced;
  return static_cast<uint32_t>(std::countr_zero(std::min<uint64_t>(lanes, workgroup)));
}

// The rows each set of lanes computes (their weight loads in flight
// together, x read once for all of them): more for larger matrices, fewer
// where the sets must spread over the device. Any count gives the same sums.
// H200 (1 token, us per call at 1 / 2 / 4 rows): Q4_0 896 x 896 5.3 / 5.6 /
// 7.0; Q5_0 2048 x 640 6.6 / 6.1 / 7.4; Q8_0 896 x 4864 16.1 / 14.8 / 10.7;
// Q4_0 151936 x 896 238 / 145 / 100.
uint32_t matmul_lane_rows(int64_t in_dim, int64_t out_dim) {
  if (const uint32_t forced = forced_matmul_rows.load()) return forced;
  const int64_t elements = in_dim * out_dim;
  if (elements >= (int64_t{1} << 22)) return 4;
  if (elements >= (int64_t{1} << 20)) return 2;
  return 1;
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
  return weight_kernel(device, "matmul", type);
}

namespace {

// The matmul's shape and bindings, checked (W holds 2 * out_dim rows with a GLU).
Status check_matmul(quant::TensorType type, const BufferRange& w, const BufferRange& x,
                    const BufferRange& y, MatmulShape s, const MatmulEpilogue& e,
                    const MatmulPrologue& p) {
  MINFER_RETURN_IF_ERROR(positive("matmul", "in_dim", s.in_dim));
  MINFER_RETURN_IF_ERROR(positive("matmul", "out_dim", s.out_dim));
  MINFER_RETURN_IF_ERROR(positive("matmul", "n_tokens", s.n_tokens));
  const uint64_t w_rows = uint64_t(s.out_dim) * (e.glu ? 2 : 1);
  if (uint64_t(s.in_dim) * w_rows > uint64_t(kMaxIndex) ||
      uint64_t(s.in_dim) * s.n_tokens > uint64_t(kMaxIndex) || s.y_floats() > uint64_t(kMaxIndex)) {
    return Status::invalid_argument("matmul: shape " + std::to_string(w_rows) + " x " +
                                    std::to_string(s.in_dim) + " x " + std::to_string(s.n_tokens) +
                                    " exceeds 32-bit indices");
  }
  auto row = quant::row_bytes(type, s.in_dim);  // refuses rows of partial blocks
  if (!row.is_ok()) return row.status().with_context("matmul");
  if (*row * w_rows > uint64_t(kMaxIndex)) {
    return Status::invalid_argument("matmul: W of " + std::to_string(w_rows) + " rows of " +
                                    std::to_string(*row) + " bytes exceeds 32-bit offsets");
  }
  MINFER_RETURN_IF_ERROR(needs("matmul", "W", w, *row * w_rows));
  MINFER_RETURN_IF_ERROR(needs("matmul", "x", x, uint64_t(s.in_dim) * s.n_tokens * 4));
  if (s.stride() < s.out_dim) {
    return Status::invalid_argument("matmul: y_stride = " + std::to_string(s.y_stride) +
                                    " is less than out_dim = " + std::to_string(s.out_dim));
  }
  MINFER_RETURN_IF_ERROR(needs("matmul", "y", y, s.y_floats() * 4));
  if (e.glu && (e.bias.buffer != nullptr || e.residual.buffer != nullptr)) {
    return Status::invalid_argument("matmul: a GLU epilogue takes no bias or residual");
  }
  if (e.bias.buffer != nullptr) {
    MINFER_RETURN_IF_ERROR(needs("matmul", "bias", e.bias, uint64_t(s.out_dim) * 4));
  }
  if (e.residual.buffer != nullptr) {
    MINFER_RETURN_IF_ERROR(needs("matmul", "residual", e.residual, s.y_floats() * 4));
  }
  if (p.norm && p.weight.buffer != nullptr) {
    MINFER_RETURN_IF_ERROR(needs("matmul", "norm weight", p.weight, uint64_t(s.in_dim) * 4));
  }
  return Status::ok();
}

uint32_t glu_code(const MatmulEpilogue& e) {
  if (!e.glu) return 0;
  return *e.glu == GluOp::kSwiGLU ? MINFER_MATMUL_GLU_SWIGLU : MINFER_MATMUL_GLU_GEGLU;
}

}  // namespace

Status encode_matmul(Recorder& rec, uint32_t kernel, quant::TensorType type, const BufferRange& w,
                     const BufferRange& x, const BufferRange& y, MatmulShape s,
                     std::string_view note, const MatmulEpilogue& epilogue,
                     const MatmulPrologue& prologue) {
  MINFER_RETURN_IF_ERROR(check_weight_kernel("matmul", kernel, type));
  MINFER_RETURN_IF_ERROR(check_matmul(type, w, x, y, s, epilogue, prologue));
  const bool has_bias = epilogue.bias.buffer != nullptr;
  const bool has_residual = epilogue.residual.buffer != nullptr;
  const bool has_norm_weight = prologue.norm && prologue.weight.buffer != nullptr;
  const DeviceLimits& limits = rec.device().info().limits;
  const uint32_t workgroup = embedded_kernels()[kernel].workgroup[0];
  const uint32_t lanes_log2 = matmul_lanes_log2(type, s.in_dim, limits.subgroup_size, workgroup);
  // A GLU set holds its gate rows and as many up rows.
  const uint32_t lane_rows = std::min<uint32_t>(
      matmul_lane_rows(s.in_dim, s.out_dim),
      epilogue.glu ? MINFER_MATMUL_MAX_LANE_ROWS / 2 : MINFER_MATMUL_MAX_LANE_ROWS);
  const uint64_t rows_per_group = uint64_t(workgroup >> lanes_log2) * lane_rows;
  MINFER_ASSIGN_OR_RETURN(
      Groups groups,
      fold_groups((uint64_t(s.out_dim) + rows_per_group - 1) / rows_per_group, limits));
  const uint64_t tokens_per_group = MINFER_MATMUL_TOKENS_PER_GROUP;
  const uint64_t z = (uint64_t(s.n_tokens) + tokens_per_group - 1) / tokens_per_group;
  groups.z = static_cast<uint32_t>(z);  // checked against the limit by the recorder
  const bool x_vec4 = x.offset % 16 == 0 && s.in_dim % 4 == 0 && !forced_scalar_x.load();
  const uint32_t norm = !prologue.norm ? 0u : has_norm_weight ? MINFER_MATMUL_NORM_WEIGHTED : 1u;
  const args::MatmulArgs args{static_cast<uint32_t>(s.in_dim),
                              static_cast<uint32_t>(s.out_dim),
                              static_cast<uint32_t>(s.n_tokens),
                              lanes_log2,
                              lane_rows,
                              x_vec4 ? 1u : 0u,
                              has_bias ? 1u : 0u,
                              has_residual ? 1u : 0u,
                              norm,
                              prologue.eps,
                              glu_code(epilogue),
                              static_cast<uint32_t>(s.stride())};
  // Bindings a call does not use are x again: bound, never read.
  const BufferRange bindings[] = {whole_words(w),
                                  x,
                                  y,
                                  has_bias ? epilogue.bias : x,
                                  has_residual ? epilogue.residual : x,
                                  has_norm_weight ? prologue.weight : x};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

Result<uint32_t> matmul_id_kernel(const Device& device, quant::TensorType type) {
  return weight_kernel(device, "matmul_id", type);
}

namespace {

// The expert matmul's shape and bindings, checked; the bytes of one weight row.
Result<uint64_t> check_matmul_id(quant::TensorType type, const BufferRange& w, const BufferRange& x,
                                 const BufferRange& ids, const BufferRange& bias,
                                 const BufferRange& y, const BufferRange& err,
                                 const MatmulIdShape& s) {
  MINFER_RETURN_IF_ERROR(positive("matmul_id", "in_dim", s.in_dim));
  MINFER_RETURN_IF_ERROR(positive("matmul_id", "out_dim", s.out_dim));
  MINFER_RETURN_IF_ERROR(positive("matmul_id", "n_expert", s.n_expert));
  MINFER_RETURN_IF_ERROR(positive("matmul_id", "n_tokens", s.n_tokens));
  if (s.n_used < 1 || s.n_used > s.n_expert) {
    return Status::invalid_argument("matmul_id: n_used = " + std::to_string(s.n_used) +
                                    " (must be in 1.." + std::to_string(s.n_expert) + ")");
  }
  const uint64_t w_rows = uint64_t(s.out_dim) * uint64_t(s.n_expert);
  const uint64_t n_rows = uint64_t(s.n_tokens) * uint64_t(s.n_used);
  const uint64_t x_rows = s.per_row_input ? n_rows : uint64_t(s.n_tokens);
  if (uint64_t(s.in_dim) * w_rows > uint64_t(kMaxIndex) ||
      uint64_t(s.in_dim) * x_rows > uint64_t(kMaxIndex) ||
      uint64_t(s.out_dim) * n_rows > uint64_t(kMaxIndex)) {
    return Status::invalid_argument("matmul_id: " + std::to_string(s.n_expert) + " experts of " +
                                    std::to_string(s.out_dim) + " x " + std::to_string(s.in_dim) +
                                    " for " + std::to_string(n_rows) +
                                    " rows exceed 32-bit indices");
  }
  auto row = quant::row_bytes(type, s.in_dim);  // refuses rows of partial blocks
  if (!row.is_ok()) return row.status().with_context("matmul_id");
  if (*row * w_rows > uint64_t(kMaxIndex)) {
    return Status::invalid_argument("matmul_id: W of " + std::to_string(w_rows) + " rows of " +
                                    std::to_string(*row) + " bytes exceeds 32-bit offsets");
  }
  MINFER_RETURN_IF_ERROR(needs("matmul_id", "W", w, *row * w_rows));
  MINFER_RETURN_IF_ERROR(needs("matmul_id", "x", x, uint64_t(s.in_dim) * x_rows * 4));
  MINFER_RETURN_IF_ERROR(needs("matmul_id", "ids", ids, n_rows * 4));
  MINFER_RETURN_IF_ERROR(needs("matmul_id", "y", y, uint64_t(s.out_dim) * n_rows * 4));
  MINFER_RETURN_IF_ERROR(needs("matmul_id", "err", err, MINFER_ERR_WORDS * 4));
  if (bias.buffer != nullptr) MINFER_RETURN_IF_ERROR(needs("matmul_id", "bias", bias, w_rows * 4));
  return *row;
}

}  // namespace

Status encode_matmul_id(Recorder& rec, uint32_t kernel, quant::TensorType type,
                        const BufferRange& w, const BufferRange& x, const BufferRange& ids,
                        const BufferRange& bias, const BufferRange& y, const BufferRange& err,
                        const MatmulIdShape& s, std::string_view note) {
  MINFER_RETURN_IF_ERROR(check_weight_kernel("matmul_id", kernel, type));
  MINFER_RETURN_IF_ERROR(check_matmul_id(type, w, x, ids, bias, y, err, s).status());
  const DeviceLimits& limits = rec.device().info().limits;
  const uint32_t workgroup = embedded_kernels()[kernel].workgroup[0];
  // The lanes and rows of a plain matmul of this expert's shape, so that a
  // row's sums are that matmul's.
  const uint32_t lanes_log2 = matmul_lanes_log2(type, s.in_dim, limits.subgroup_size, workgroup);
  const uint32_t lane_rows = matmul_lane_rows(s.in_dim, s.out_dim);
  const uint64_t rows_per_group = uint64_t(workgroup >> lanes_log2) * lane_rows;
  MINFER_ASSIGN_OR_RETURN(
      Groups groups,
      fold_groups((uint64_t(s.out_dim) + rows_per_group - 1) / rows_per_group, limits));
  // One output row per z group; the kernel loops over the rows past the limit.
  const uint64_t n_rows = uint64_t(s.n_tokens) * uint64_t(s.n_used);
  uint32_t max_z = std::max<uint32_t>(limits.max_workgroup_count[2], 1);
  if (const uint32_t forced = forced_id_groups.load()) max_z = std::min(max_z, forced);
  groups.z = static_cast<uint32_t>(std::min<uint64_t>(n_rows, max_z));
  const bool x_vec4 = x.offset % 16 == 0 && s.in_dim % 4 == 0 && !forced_scalar_x.load();
  args::MatmulIdArgs args{};
  args.in_dim = static_cast<uint32_t>(s.in_dim);
  args.out_dim = static_cast<uint32_t>(s.out_dim);
  args.n_tokens = static_cast<uint32_t>(s.n_tokens);
  args.lanes_log2 = lanes_log2;
  args.lane_rows = lane_rows;
  args.x_vec4 = x_vec4 ? 1u : 0u;
  args.has_bias = bias.buffer != nullptr ? 1u : 0u;
  args.y_stride = static_cast<uint32_t>(s.out_dim);
  args.n_used = static_cast<uint32_t>(s.n_used);
  args.n_expert = static_cast<uint32_t>(s.n_expert);
  args.per_row_input = s.per_row_input ? 1u : 0u;
  // Bindings a call does not use are x again: bound, never read.
  const BufferRange bindings[] = {
      whole_words(w), x, y, bias.buffer != nullptr ? bias : x, x, x, ids, err};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

void force_matmul_for_testing(MatmulForTesting how) {
  forced_matmul_lanes.store(how.lanes == 0 ? 0 : std::bit_floor(how.lanes));
  forced_matmul_rows.store(std::min<uint32_t>(how.lane_rows, MINFER_MATMUL_MAX_LANE_ROWS));
  forced_scalar_x.store(how.scalar_x);
  forced_id_groups.store(how.id_groups);
}

Result<uint32_t> get_rows_kernel(const Device& device, quant::TensorType type) {
  return weight_kernel(device, "get_rows", type);
}

Status encode_get_rows(Recorder& rec, uint32_t kernel, quant::TensorType type, const BufferRange& w,
                       const BufferRange& ids, const BufferRange& out, const BufferRange& err,
                       int64_t n_rows, int64_t row_len, int64_t n_ids, float scale,
                       std::string_view note, RowRange range) {
  MINFER_RETURN_IF_ERROR(check_weight_kernel("get_rows", kernel, type));
  MINFER_RETURN_IF_ERROR(positive("get_rows", "n_rows", n_rows));
  MINFER_RETURN_IF_ERROR(positive("get_rows", "row_len", row_len));
  MINFER_RETURN_IF_ERROR(positive("get_rows", "n_ids", n_ids));
  const int64_t range_rows = range.rows > 0 ? range.rows : n_rows - range.first;
  if (range.first < 0 || range_rows <= 0 || range.first + range_rows > n_rows) {
    return Status::invalid_argument("get_rows: rows [" + std::to_string(range.first) + ", " +
                                    std::to_string(range.first + range_rows) + ") of a table of " +
                                    std::to_string(n_rows));
  }
  if (n_rows > std::numeric_limits<int32_t>::max()) {
    return Status::invalid_argument("get_rows: n_rows = " + std::to_string(n_rows) +
                                    " exceeds the i32 ids");
  }
  auto row = quant::row_bytes(type, row_len);  // refuses rows of partial blocks
  if (!row.is_ok()) return row.status().with_context("get_rows");
  // Offsets within W's binding: its range of rows.
  if (uint64_t(range_rows) * row_len > uint64_t(kMaxIndex) ||
      *row * uint64_t(range_rows) > uint64_t(kMaxIndex) ||
      uint64_t(n_ids) * row_len > uint64_t(kMaxIndex)) {
    return Status::invalid_argument("get_rows: " + std::to_string(n_rows) + " rows (" +
                                    std::to_string(n_ids) + " ids) of " + std::to_string(row_len) +
                                    " exceed 32-bit indices");
  }
  MINFER_RETURN_IF_ERROR(needs("get_rows", "W", w, *row * uint64_t(range_rows)));
  MINFER_RETURN_IF_ERROR(needs("get_rows", "ids", ids, uint64_t(n_ids) * 4));
  MINFER_RETURN_IF_ERROR(needs("get_rows", "out", out, uint64_t(n_ids) * row_len * 4));
  MINFER_RETURN_IF_ERROR(needs("get_rows", "err", err, MINFER_ERR_WORDS * 4));
  // Each invocation decodes one unit of 8 elements (weights.glsl).
  const uint64_t units = (uint64_t(row_len) + 7) / 8;
  const uint64_t per_group = embedded_kernels()[kernel].invocations();
  const uint64_t groups_per_row = (units + per_group - 1) / per_group;
  MINFER_ASSIGN_OR_RETURN(const Groups groups, fold_groups(uint64_t(n_ids) * groups_per_row,
                                                           rec.device().info().limits));
  const args::GetRowsArgs args{
      static_cast<uint32_t>(n_rows),      static_cast<uint32_t>(row_len),
      static_cast<uint32_t>(n_ids),       scale,
      static_cast<uint32_t>(range.first), static_cast<uint32_t>(range_rows)};
  const BufferRange bindings[] = {whole_words(w), ids, out, err};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

}  // namespace minfer::shader
