#include "backend/shader/encode_attention_tiled.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <optional>
#include <string>

#include "backend/shader/encode_attention_checks.h"
#include "backend/shader/encode_checks.h"
#include "backend/shader/kernel_args.h"
#include "backend/shader/kernel_table.h"
#include "backend/shader/limits.h"

namespace minfer::shader {
namespace {

using quant::TensorType;

constexpr uint32_t kWg = MINFER_ATTENTION_TILED_WG;
constexpr uint32_t kMaxRows = MINFER_ATTENTION_TILED_MAX_ROWS;
constexpr uint32_t kMaxKeys = MINFER_ATTENTION_TILED_MAX_KEYS;
constexpr uint32_t kTileQuads = MINFER_ATTENTION_TILED_TILE_QUADS;
constexpr uint32_t kMaxRowsPerInv = MINFER_ATTENTION_TILED_MAX_ROWS_PER_INVOCATION;
constexpr uint32_t kMaxKeysPerPart = MINFER_ATTENTION_TILED_MAX_KEYS_PER_PART;
constexpr int64_t kMaxHeadDim = MINFER_ATTENTION_MAX_HEAD_DIM;
// Loop iterations one invocation may run on a CPU device: lavapipe stops
// every loop of a shader after 65535 in all (docs/VULKAN.md rule 7).
constexpr uint64_t kCpuLoopBudget = 60000;
// Below this many workgroups of 4 rows per invocation, blocks of 1 row per
// invocation (4x as many, a quarter of the K/V reuse) are faster; two rows
// per invocation never won (docs/PERFORMANCE.md, "Constants and their
// measurements").
constexpr uint64_t kFillGroups = 64;

std::atomic<uint32_t> forced_rows_per_inv{0};

uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

std::optional<std::string_view> kv_name(TensorType t) {
  switch (t) {
    case TensorType::F32:
      return "f32";
    case TensorType::F16:
      return "f16";
    case TensorType::Q8_0:
      return "q8_0";
    default:
      return std::nullopt;
  }
}

// The kernel's block geometry for a shape (kernel_args_attention.h):
// rows_per_invocation x the row groups of the V sums (one invocation per
// quad of head_dim, at most 8 groups) query rows; tiles of keys such that
// keys x quads <= kTileQuads; the 4 x 2 score blocks' dots split by dims so
// that the splits x blocks fill the workgroup; as many invocations per row
// in the softmax step as fill it too (each with <= 8 keys of a tile).
args::AttentionTiledArgs geometry(const AttentionShape& s, uint32_t rows_per_inv) {
  const auto quads = static_cast<uint32_t>((s.head_dim + 3) / 4);
  const uint32_t row_groups = std::min(kMaxRows / kMaxRowsPerInv, kWg / quads);
  args::AttentionTiledArgs a{};
  a.block_rows = rows_per_inv * row_groups;
  a.rows_per_invocation = rows_per_inv;
  a.block_keys = std::min(kMaxKeys, std::bit_floor(kTileQuads / quads));
  const uint32_t score_blocks = a.block_keys / 2 * ((a.block_rows + 3) / 4);
  const uint32_t splits = std::max<uint32_t>(1, kWg / score_blocks);
  a.split_quads = (quads + splits - 1) / splits;
  a.dot_splits = (quads + a.split_quads - 1) / a.split_quads;
  a.weigh_parts = std::bit_floor(std::min(a.block_keys, kWg / a.block_rows));
  const uint64_t rows = uint64_t(s.n_tokens) * uint64_t(s.n_head / s.n_head_kv);
  a.row_blocks = static_cast<uint32_t>(ceil_div(rows, a.block_rows));
  return a;
}

// The rows per invocation for `s`: forced (tests), else 4, or 1 where 4
// would give fewer than kFillGroups workgroups.
uint32_t rows_per_invocation(const AttentionShape& s) {
  const uint32_t forced = forced_rows_per_inv.load();
  if (forced != 0) return forced;
  const uint64_t groups = uint64_t(geometry(s, kMaxRowsPerInv).row_blocks) * uint64_t(s.n_head_kv);
  return groups >= kFillGroups ? kMaxRowsPerInv : 1;
}

// lavapipe's loop cap (docs/VULKAN.md rule 7) on a CPU device.
Status check_loop_budget(const DeviceInfo& info, const AttentionShape& s, uint32_t rows_per_inv) {
  const uint64_t loops = attention_tiled_loop_bound(s, rows_per_inv);
  if (info.type != "cpu" || loops <= kCpuLoopBudget) return Status::ok();
  return Status::unimplemented("attention: up to " + std::to_string(loops) +
                               " loop iterations per invocation of the tiled kernel on " +
                               info.name + ", past the " + std::to_string(kCpuLoopBudget) +
                               " a CPU Vulkan device runs (docs/VULKAN.md rule 7)");
}

}  // namespace

Result<uint32_t> attention_tiled_kernel(const Device& device, TensorType k_type,
                                        TensorType v_type) {
  if (!kv_name(k_type) || !kv_name(v_type)) {
    return Status::unimplemented(
        "attention: no GPU kernel for a " + std::string(quant::type_name(k_type)) + " K / " +
        std::string(quant::type_name(v_type)) + " V cache (F32, F16, Q8_0)");
  }
  const std::string variant = std::string(*kv_name(k_type)) + "_" + std::string(*kv_name(v_type));
  const std::optional<uint32_t> k = find_kernel("attention_tiled", variant);
  if (k && device.kernel(*k).available) return *k;
  return Status::unimplemented("attention_tiled." + variant + " on " + device.info().name + ": " +
                               (k ? device.kernel(*k).unavailable_reason : "not built"));
}

uint64_t attention_tiled_loop_bound(const AttentionShape& s, uint32_t rows_per_inv) {
  if (s.n_head_kv <= 0 || s.head_dim <= 0 || s.head_dim > kMaxHeadDim) return 0;
  const args::AttentionTiledArgs g = geometry(s, std::clamp<uint32_t>(rows_per_inv, 1, 4));
  const bool paged = s.page_size > 0;
  // A pass may walk every position of the cache (its rows' positions are
  // the device's), and a paged block takes one pass per slot of its rows.
  const uint64_t keys = uint64_t(std::max<int64_t>(paged ? s.page_size * s.max_pages : s.n_ctx, 1));
  const uint64_t passes = paged ? std::min<uint64_t>(g.block_rows, uint64_t(s.n_slots)) : 1;
  const uint64_t units = kTileQuads / kWg;
  // Every [[unroll]] loop counted as a loop, in case it is not unrolled.
  const uint64_t per_part = kMaxKeysPerPart * (1 + g.dot_splits);
  const uint64_t per_tile = 2 * units + 5 * uint64_t(g.split_quads) + per_part + g.weigh_parts +
                            kMaxKeysPerPart + uint64_t(g.block_keys) * (1 + kMaxRowsPerInv) +
                            kMaxRowsPerInv;
  const uint64_t per_pass = g.block_rows + units + ceil_div(keys, g.block_keys) * per_tile;
  return units + passes * per_pass + g.block_rows + kMaxRowsPerInv * (2 + g.weigh_parts);
}

bool attention_tiled_applies(const Device& device, const AttentionShape& s) {
  if (s.n_tokens < kAttentionTiledMinTokens || !detail::check_attention(s).is_ok()) return false;
  const Result<uint32_t> kernel = attention_tiled_kernel(device, s.k_type, s.v_type);
  if (!kernel.is_ok()) return false;
  const DeviceInfo& info = device.info();
  if (device.kernel(*kernel).shared_bytes > info.limits.max_shared_memory_bytes) return false;
  if (!detail::check_attention_regions(s).is_ok()) return false;
  return check_loop_budget(info, s, rows_per_invocation(s)).is_ok();
}

Status encode_attention_tiled(Recorder& rec, const BufferRange& q, const BufferRange& positions,
                              const BufferRange& seq_slots, const BufferRange& page_table,
                              const BufferRange& k_cache, const BufferRange& v_cache,
                              const BufferRange& sinks, const BufferRange& out,
                              const BufferRange& err, const AttentionShape& s,
                              std::string_view note) {
  MINFER_RETURN_IF_ERROR(detail::check_attention(s));
  MINFER_ASSIGN_OR_RETURN(const uint32_t kernel,
                          attention_tiled_kernel(rec.device(), s.k_type, s.v_type));
  const DeviceInfo& info = rec.device().info();
  const uint32_t rows_per_inv = rows_per_invocation(s);
  MINFER_RETURN_IF_ERROR(check_loop_budget(info, s, rows_per_inv));
  MINFER_RETURN_IF_ERROR(detail::check_attention_bindings(q, positions, seq_slots, page_table,
                                                          k_cache, v_cache, sinks, out, err, s));
  args::AttentionTiledArgs a = geometry(s, rows_per_inv);
  MINFER_ASSIGN_OR_RETURN(const Groups groups,
                          fold_groups(uint64_t(a.row_blocks) * uint64_t(s.n_head_kv), info.limits));
  const bool paged = s.page_size > 0;
  a.n_tokens = static_cast<uint32_t>(s.n_tokens);
  a.n_head = static_cast<uint32_t>(s.n_head);
  a.n_head_kv = static_cast<uint32_t>(s.n_head_kv);
  a.head_dim = static_cast<uint32_t>(s.head_dim);
  a.n_ctx = static_cast<uint32_t>(s.n_ctx);
  a.scale = s.scale;
  a.sliding_window = static_cast<uint32_t>(s.sliding_window);
  a.page_size = static_cast<uint32_t>(paged ? s.page_size : 0);
  a.max_pages = static_cast<uint32_t>(paged ? s.max_pages : 0);
  a.n_slots = static_cast<uint32_t>(paged ? s.n_slots : 0);
  a.has_sinks = sinks.buffer != nullptr ? 1u : 0u;
  const detail::AttentionBindings b = detail::attention_bindings(
      q, positions, seq_slots, page_table, k_cache, v_cache, sinks, out, err, s);
  return rec.dispatch_args(kernel, b.ranges, a, groups, note);
}

void force_attention_tiled_rows_for_testing(uint32_t rows_per_invocation) {
  const uint32_t r = rows_per_invocation;
  forced_rows_per_inv.store(r == 0 ? 0 : (r >= 4 ? 4 : (r >= 2 ? 2 : 1)));
}

}  // namespace minfer::shader
