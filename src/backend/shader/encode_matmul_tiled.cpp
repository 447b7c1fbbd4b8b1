#include "backend/shader/encode_matmul_tiled.h"

#include "backend/shader/encode_checks.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <string>

#include "backend/shader/kernel_args.h"
#include "backend/shader/kernel_table.h"
#include "backend/shader/limits.h"
#include "quant/reference.h"

namespace minfer::shader {
namespace {

constexpr std::string_view kName = "matmul_tiled";

Status needs(std::string_view what, const BufferRange& r, uint64_t bytes) {
  return shader::needs(kName, what, r, bytes);
}
Status positive(std::string_view what, int64_t v) {
  return shader::positive(kName, what, v);
}

// The manifest's variant for a weight type: its name in lower case ("q4_0"),
// or "" for a type with no tiled kernel.
std::string type_variant(quant::TensorType type) {
  if (!quant::is_weight_type(type)) return "";
  std::string v;
  for (char c : quant::type_name(type)) v += static_cast<char>(std::tolower(uint8_t(c)));
  return v;
}

struct Tile {
  uint32_t rows = MINFER_MATMUL_TILED_ROWS;
  uint32_t tokens = MINFER_MATMUL_TILED_TOKENS;
};

// A variant "<type>" has the default tile; "<type>_r<rows>t<tokens>" its own.
std::optional<Tile> tile_of(std::string_view variant, std::string_view type) {
  if (variant == type) return Tile{};
  if (!variant.starts_with(std::string(type) + "_r")) return std::nullopt;
  const std::string_view shape = variant.substr(type.size() + 2);
  Tile t;
  const char* end = shape.data() + shape.size();
  auto [p, ec] = std::from_chars(shape.data(), end, t.rows);
  if (ec != std::errc() || p == end || *p != 't') return std::nullopt;
  auto [q, ec2] = std::from_chars(p + 1, end, t.tokens);
  if (ec2 != std::errc() || q != end) return std::nullopt;
  return t;
}

// Widened to whole 32-bit words: the packed decoders read words (the
// recorder checks that this stays in the buffer).
BufferRange whole_words(BufferRange r) {
  if (r.size % 4 != 0) r.size += 4 - r.size % 4;
  return r;
}

// The tile for a shape when the caller passed the type's default variant:
// the one with the least estimated time. Workgroups spread evenly over the
// compute units, so the busiest unit runs ceil(groups / kComputeUnits) of
// them, each taking its tile's area over the unit's rate with that many
// resident; the per-SM rates are measured (docs/PERFORMANCE.md, "Constants and their
// measurements"); vulkan_matmul_tiled_test's benchmark (MINFER_TILED_BENCH=1) prints them.
constexpr double kComputeUnits = 132;

double estimated_time(const Tile& t, const MatmulShape& s) {
  const double groups = double((uint64_t(s.out_dim) + t.rows - 1) / t.rows) *
                        double((uint64_t(s.n_tokens) + t.tokens - 1) / t.tokens);
  const double per_unit = std::ceil(groups / kComputeUnits);
  const double area = double(t.rows) * t.tokens;
  const double rate = area >= 128 * 128 ? 225 : per_unit >= 2 ? 167 : 140;
  return per_unit * area / rate;
}

struct Picked {
  uint32_t kernel;
  Tile tile;
};

Result<Picked> pick(const Device& device, uint32_t kernel, quant::TensorType type,
                    const MatmulShape& s) {
  const std::span<const KernelInfo> table = embedded_kernels();
  const std::string variant = type_variant(type);
  const std::optional<Tile> tile =
      kernel < table.size() && table[kernel].name == kName && !variant.empty()
          ? tile_of(table[kernel].variant, variant)
          : std::nullopt;
  if (!tile) {
    return Status::invalid_argument("matmul_tiled: kernel " + std::to_string(kernel) +
                                    " is not a matmul_tiled variant for " +
                                    std::string(quant::type_name(type)) + " weights");
  }
  Picked best{kernel, *tile};
  if (table[kernel].variant != variant) return best;  // a tile asked for by name
  for (uint32_t i = 0; i < table.size(); ++i) {
    if (table[i].name != kName || !device.kernel(i).available) continue;
    const std::optional<Tile> t = tile_of(table[i].variant, variant);
    if (t && estimated_time(*t, s) < estimated_time(best.tile, s)) best = {i, *t};
  }
  return best;
}

Status check_shape(quant::TensorType type, const BufferRange& w, const BufferRange& x,
                   const BufferRange& y, const MatmulShape& s) {
  MINFER_RETURN_IF_ERROR(positive("in_dim", s.in_dim));
  MINFER_RETURN_IF_ERROR(positive("out_dim", s.out_dim));
  MINFER_RETURN_IF_ERROR(positive("n_tokens", s.n_tokens));
  if (uint64_t(s.in_dim) * s.out_dim > kMaxIndex || uint64_t(s.in_dim) * s.n_tokens > kMaxIndex ||
      s.y_floats() > kMaxIndex) {
    return Status::invalid_argument("matmul_tiled: shape " + std::to_string(s.out_dim) + " x " +
                                    std::to_string(s.in_dim) + " x " + std::to_string(s.n_tokens) +
                                    " exceeds 32-bit indices");
  }
  auto row = quant::row_bytes(type, s.in_dim);  // refuses rows of partial blocks
  if (!row.is_ok()) return row.status().with_context("matmul_tiled");
  if (*row * uint64_t(s.out_dim) > kMaxIndex) {
    return Status::invalid_argument("matmul_tiled: W of " + std::to_string(s.out_dim) +
                                    " rows of " + std::to_string(*row) +
                                    " bytes exceeds 32-bit offsets");
  }
  MINFER_RETURN_IF_ERROR(needs("W", w, *row * uint64_t(s.out_dim)));
  MINFER_RETURN_IF_ERROR(needs("x", x, uint64_t(s.in_dim) * s.n_tokens * 4));
  if (s.stride() < s.out_dim) {
    return Status::invalid_argument("matmul_tiled: y_stride = " + std::to_string(s.y_stride) +
                                    " is less than out_dim = " + std::to_string(s.out_dim));
  }
  return needs("y", y, s.y_floats() * 4);
}

}  // namespace

Result<uint32_t> matmul_tiled_kernel(const Device& device, quant::TensorType type) {
  const std::string variant = type_variant(type);
  const std::optional<uint32_t> k = variant.empty() ? std::nullopt : find_kernel(kName, variant);
  if (!k) {
    return Status::unimplemented("matmul_tiled: no GPU kernel for " +
                                 std::string(quant::type_name(type)) + " weights");
  }
  if (!device.kernel(*k).available) {
    return Status::unimplemented("matmul_tiled of " + std::string(quant::type_name(type)) + " on " +
                                 device.info().name + ": " + device.kernel(*k).unavailable_reason);
  }
  return *k;
}

int64_t matmul_tiled_min_tokens(const Device& device) {
  // Where the tiled kernel overtakes encode_matmul on the H200
  // (docs/PERFORMANCE.md, "Constants and their measurements"); other devices
  // are unmeasured and get the same.
  (void)device;
  return 64;
}

Result<MatmulTile> matmul_tiled_tile(const Device& device, uint32_t kernel, quant::TensorType type,
                                     MatmulShape shape) {
  MINFER_ASSIGN_OR_RETURN(const Picked p, pick(device, kernel, type, shape));
  return MatmulTile{p.kernel, p.tile.rows, p.tile.tokens};
}

Status encode_matmul_tiled(Recorder& rec, uint32_t kernel, quant::TensorType type,
                           const BufferRange& w, const BufferRange& x, const BufferRange& y,
                           MatmulShape shape, std::string_view note) {
  MINFER_ASSIGN_OR_RETURN(const Picked p, pick(rec.device(), kernel, type, shape));
  MINFER_RETURN_IF_ERROR(check_shape(type, w, x, y, shape));
  const uint64_t row_tiles = (uint64_t(shape.out_dim) + p.tile.rows - 1) / p.tile.rows;
  MINFER_ASSIGN_OR_RETURN(Groups groups, fold_groups(row_tiles, rec.device().info().limits));
  // Checked against maxComputeWorkGroupCount[2] by the recorder.
  groups.z = static_cast<uint32_t>((uint64_t(shape.n_tokens) + p.tile.tokens - 1) / p.tile.tokens);
  const args::MatmulTiledArgs args{
      static_cast<uint32_t>(shape.in_dim), static_cast<uint32_t>(shape.out_dim),
      static_cast<uint32_t>(shape.n_tokens), static_cast<uint32_t>(shape.stride())};
  const BufferRange bindings[] = {whole_words(w), x, y};
  return rec.dispatch_args(p.kernel, bindings, args, groups, note);
}

}  // namespace minfer::shader
