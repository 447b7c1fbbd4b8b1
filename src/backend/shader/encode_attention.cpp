#include "backend/shader/encode_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

constexpr int64_t kMaxHeadDim = MINFER_ATTENTION_MAX_HEAD_DIM;
// Loop iterations one invocation may run on a CPU device: lavapipe stops
// every loop of a shader after 65535 in all (docs/VULKAN.md rule 7).
constexpr uint64_t kCpuLoopBudget = 60000;

std::string str(int64_t v) {
  return std::to_string(v);
}

// Whether a binding's first a_bytes and another's first b_bytes share bytes.
bool overlap(const BufferRange& a, uint64_t a_bytes, const BufferRange& b, uint64_t b_bytes) {
  return a.buffer == b.buffer && a.offset < b.offset + b_bytes && b.offset < a.offset + a_bytes;
}

// A sized range widened to whole 32-bit words (the kernels read and write
// caches as words; the recorder checks that this stays in the buffer).
BufferRange words(BufferRange r) {
  if (r.size % 4 != 0) r.size += 4 - r.size % 4;
  return r;
}

std::optional<uint32_t> kv_code(TensorType t) {
  switch (t) {
    case TensorType::F32:
      return MINFER_KV_F32;
    case TensorType::F16:
      return MINFER_KV_F16;
    case TensorType::Q8_0:
      return MINFER_KV_Q8_0;
    default:
      return std::nullopt;
  }
}

std::string_view kv_name(TensorType t) {
  return t == TensorType::Q8_0 ? "q8_0" : (t == TensorType::F16 ? "f16" : "f32");
}

// Bytes of one cache row of `type`, after checking the type and head_dim.
Result<uint64_t> cache_row_bytes(std::string_view op, std::string_view region, TensorType type,
                                 int64_t head_dim, int64_t row_len) {
  if (!kv_code(type)) {
    return Status::unimplemented(std::string(op) + ": " + std::string(region) + " cache type " +
                                 std::string(quant::type_name(type)) +
                                 " has no GPU kernel (F32, F16, Q8_0)");
  }
  if (type == TensorType::Q8_0 && head_dim % 32 != 0) {
    return Status::invalid_argument(std::string(op) + ": a q8_0 " + std::string(region) +
                                    " cache needs head_dim a multiple of 32, got " + str(head_dim));
  }
  return quant::row_bytes(type, row_len);
}

// The bytes of a whole cache region, refused past 32-bit byte offsets.
Result<uint64_t> region_bytes(std::string_view op, std::string_view region, TensorType type,
                              int64_t head_dim, int64_t row_len, int64_t n_ctx) {
  MINFER_ASSIGN_OR_RETURN(const uint64_t row, cache_row_bytes(op, region, type, head_dim, row_len));
  const uint64_t bytes = row * uint64_t(n_ctx);
  if (bytes > uint64_t(kMaxIndex)) {
    return Status::invalid_argument(std::string(op) + ": the " + std::string(region) +
                                    " cache of " + std::to_string(bytes) +
                                    " bytes exceeds 32-bit offsets");
  }
  return bytes;
}

Status check_rope(const RopeShape& s) {
  MINFER_RETURN_IF_ERROR(positive("rope", "n_tokens", s.n_tokens));
  MINFER_RETURN_IF_ERROR(positive("rope", "n_heads", s.n_heads));
  MINFER_RETURN_IF_ERROR(positive("rope", "head_dim", s.head_dim));
  if (s.n_rot <= 0 || s.n_rot % 2 != 0 || s.n_rot > s.head_dim) {
    return Status::invalid_argument("rope: n_rot = " + str(s.n_rot) +
                                    " (must be even, positive and <= head_dim " + str(s.head_dim) +
                                    ")");
  }
  if (!(s.freq_base > 0.0f) || !std::isfinite(s.freq_scale)) {
    return Status::invalid_argument("rope: freq_base must be positive and freq_scale finite");
  }
  if (!std::isfinite(s.ext_factor) || !std::isfinite(s.corr_low) || !std::isfinite(s.corr_high) ||
      !std::isfinite(s.mscale)) {
    return Status::invalid_argument("rope: the YaRN fields (ext_factor " +
                                    std::to_string(s.ext_factor) + ", mscale " +
                                    std::to_string(s.mscale) + ", ...) must be finite");
  }
  if (uint64_t(s.n_tokens) * uint64_t(s.n_heads) * uint64_t(s.head_dim) > uint64_t(kMaxIndex)) {
    return Status::invalid_argument("rope: " + str(s.n_tokens) + " x " + str(s.n_heads) + " x " +
                                    str(s.head_dim) + " elements exceed 32-bit indices");
  }
  return Status::ok();
}

}  // namespace

namespace detail {

Status check_attention(const AttentionShape& s) {
  MINFER_RETURN_IF_ERROR(positive("attention", "n_tokens", s.n_tokens));
  MINFER_RETURN_IF_ERROR(positive("attention", "n_head", s.n_head));
  MINFER_RETURN_IF_ERROR(positive("attention", "n_head_kv", s.n_head_kv));
  MINFER_RETURN_IF_ERROR(positive("attention", "head_dim", s.head_dim));
  MINFER_RETURN_IF_ERROR(positive("attention", "n_ctx", s.n_ctx));
  if (s.n_head % s.n_head_kv != 0) {
    return Status::invalid_argument("attention: n_head = " + str(s.n_head) +
                                    " is not a multiple of n_head_kv = " + str(s.n_head_kv));
  }
  if (s.head_dim % 2 != 0 || s.head_dim > kMaxHeadDim) {
    return Status::invalid_argument("attention: head_dim = " + str(s.head_dim) +
                                    " (must be even and <= " + str(kMaxHeadDim) + ")");
  }
  if (s.sliding_window < 0 || s.sliding_window > kMaxIndex) {
    return Status::invalid_argument("attention: sliding_window = " + str(s.sliding_window));
  }
  if (uint64_t(s.n_tokens) * uint64_t(s.n_head) * uint64_t(s.head_dim) > uint64_t(kMaxIndex) ||
      uint64_t(s.n_ctx) * uint64_t(s.n_head_kv) * uint64_t(s.head_dim) > uint64_t(kMaxIndex)) {
    return Status::invalid_argument("attention: the shape exceeds 32-bit indices");
  }
  if (s.page_size < 0) {
    return Status::invalid_argument("attention: page_size = " + str(s.page_size));
  }
  if (s.page_size > 0) {
    MINFER_RETURN_IF_ERROR(positive("attention", "max_pages", s.max_pages));
    MINFER_RETURN_IF_ERROR(positive("attention", "n_slots", s.n_slots));
    if (s.page_size > s.n_ctx ||
        uint64_t(s.page_size) * uint64_t(s.max_pages) > uint64_t(kMaxIndex) ||
        uint64_t(s.n_slots) * uint64_t(s.max_pages) > uint64_t(kMaxIndex)) {
      return Status::invalid_argument("attention: page_size " + str(s.page_size) + " x " +
                                      str(s.max_pages) + " pages, " + str(s.n_slots) +
                                      " slots do not fit a cache of " + str(s.n_ctx) +
                                      " rows and 32-bit indices");
    }
  }
  return Status::ok();
}

Status check_attention_bindings(const BufferRange& q, const BufferRange& positions,
                                const BufferRange& seq_slots, const BufferRange& page_table,
                                const BufferRange& k_cache, const BufferRange& v_cache,
                                const BufferRange& sinks, const BufferRange& out,
                                const BufferRange& err, const AttentionShape& s) {
  const int64_t row_len = s.n_head_kv * s.head_dim;
  MINFER_ASSIGN_OR_RETURN(const uint64_t k_bytes,
                          region_bytes("attention", "K", s.k_type, s.head_dim, row_len, s.n_ctx));
  MINFER_ASSIGN_OR_RETURN(const uint64_t v_bytes,
                          region_bytes("attention", "V", s.v_type, s.head_dim, row_len, s.n_ctx));
  const uint64_t q_bytes = uint64_t(s.n_tokens) * s.n_head * s.head_dim * 4;
  MINFER_RETURN_IF_ERROR(needs("attention", "q", q, q_bytes));
  MINFER_RETURN_IF_ERROR(needs("attention", "out", out, q_bytes));
  MINFER_RETURN_IF_ERROR(needs("attention", "positions", positions, uint64_t(s.n_tokens) * 4));
  MINFER_RETURN_IF_ERROR(needs("attention", "k_cache", k_cache, k_bytes));
  MINFER_RETURN_IF_ERROR(needs("attention", "v_cache", v_cache, v_bytes));
  MINFER_RETURN_IF_ERROR(needs("attention", "err", err, MINFER_ERR_WORDS * 4));
  if (sinks.buffer != nullptr) {
    MINFER_RETURN_IF_ERROR(needs("attention", "sinks", sinks, uint64_t(s.n_head) * 4));
  }
  if (s.page_size > 0) {
    MINFER_RETURN_IF_ERROR(needs("attention", "seq_slots", seq_slots, uint64_t(s.n_tokens) * 4));
    MINFER_RETURN_IF_ERROR(needs("attention", "page_table", page_table,
                                 uint64_t(s.n_slots) * uint64_t(s.max_pages) * 4));
  } else if (seq_slots.buffer != nullptr || page_table.buffer != nullptr) {
    return Status::invalid_argument("attention: seq_slots / page_table given with page_size 0");
  }
  if (overlap(q, q_bytes, out, q_bytes)) {
    return Status::invalid_argument("attention: out overlaps q");
  }
  return Status::ok();
}

AttentionBindings attention_bindings(const BufferRange& q, const BufferRange& positions,
                                     const BufferRange& seq_slots, const BufferRange& page_table,
                                     const BufferRange& k_cache, const BufferRange& v_cache,
                                     const BufferRange& sinks, const BufferRange& out,
                                     const BufferRange& err, const AttentionShape& s) {
  const bool paged = s.page_size > 0;
  return {{q, positions, paged ? seq_slots : positions, paged ? page_table : positions,
           words(k_cache), words(v_cache), out, err, sinks.buffer != nullptr ? sinks : positions}};
}

Status check_attention_regions(const AttentionShape& s) {
  const int64_t row_len = s.n_head_kv * s.head_dim;
  MINFER_RETURN_IF_ERROR(
      region_bytes("attention", "K", s.k_type, s.head_dim, row_len, s.n_ctx).status());
  return region_bytes("attention", "V", s.v_type, s.head_dim, row_len, s.n_ctx).status();
}

}  // namespace detail

Status encode_rope(Recorder& rec, const BufferRange& x, const BufferRange& positions,
                   const BufferRange& freq_factors, const BufferRange& out, const RopeShape& s,
                   std::string_view note) {
  MINFER_RETURN_IF_ERROR(check_rope(s));
  const uint64_t bytes = uint64_t(s.n_tokens) * s.n_heads * s.head_dim * 4;
  MINFER_RETURN_IF_ERROR(needs("rope", "x", x, bytes));
  MINFER_RETURN_IF_ERROR(needs("rope", "out", out, bytes));
  MINFER_RETURN_IF_ERROR(needs("rope", "positions", positions, uint64_t(s.n_tokens) * 4));
  const bool has_ff = freq_factors.buffer != nullptr;
  if (has_ff) {
    MINFER_RETURN_IF_ERROR(needs("rope", "freq_factors", freq_factors, uint64_t(s.n_rot / 2) * 4));
  }
  if (overlap(x, bytes, out, bytes) && x.offset != out.offset) {
    return Status::invalid_argument("rope: out partly overlaps x (offsets " + str(x.offset) +
                                    " and " + str(out.offset) + ")");
  }
  const uint64_t slots = uint64_t(s.n_rot / 2 + (s.head_dim - s.n_rot));
  const uint64_t invocations = uint64_t(s.n_tokens) * s.n_heads * slots;
  const uint32_t kernel = find_kernel("rope", "f32").value_or(~0u);
  const uint64_t per_group = embedded_kernels()[kernel].workgroup[0];
  MINFER_ASSIGN_OR_RETURN(
      const Groups groups,
      fold_groups((invocations + per_group - 1) / per_group, rec.device().info().limits));
  const args::RopeArgs args{static_cast<uint32_t>(s.n_tokens),
                            static_cast<uint32_t>(s.n_heads),
                            static_cast<uint32_t>(s.head_dim),
                            static_cast<uint32_t>(s.n_rot),
                            s.neox ? 1u : 0u,
                            has_ff ? 1u : 0u,
                            s.freq_scale,
                            std::pow(s.freq_base, -2.0f / static_cast<float>(s.n_rot)),
                            s.ext_factor,
                            s.corr_low,
                            s.corr_high,
                            s.mscale};
  // Without freq factors, binding 2 is the positions again: bound, not read.
  const BufferRange bindings[] = {x, positions, has_ff ? freq_factors : positions, out};
  return rec.dispatch_args(kernel, bindings, args, groups, note);
}

Status encode_kv_store(Recorder& rec, const BufferRange& k, const BufferRange& v,
                       const BufferRange& rows, const BufferRange& k_cache,
                       const BufferRange& v_cache, const BufferRange& err, const KvStoreShape& s,
                       std::string_view note) {
  MINFER_RETURN_IF_ERROR(positive("kv_store", "n_tokens", s.n_tokens));
  MINFER_RETURN_IF_ERROR(positive("kv_store", "n_head_kv", s.n_head_kv));
  MINFER_RETURN_IF_ERROR(positive("kv_store", "head_dim", s.head_dim));
  MINFER_RETURN_IF_ERROR(positive("kv_store", "n_ctx", s.n_ctx));
  if (s.head_dim % 2 != 0) {
    return Status::invalid_argument("kv_store: head_dim = " + str(s.head_dim) + " must be even");
  }
  const int64_t row_len = s.n_head_kv * s.head_dim;
  if (uint64_t(row_len) * uint64_t(std::max(s.n_tokens, s.n_ctx)) > uint64_t(kMaxIndex)) {
    return Status::invalid_argument("kv_store: rows of " + str(row_len) + " elements x " +
                                    str(std::max(s.n_tokens, s.n_ctx)) + " exceed 32-bit indices");
  }
  MINFER_ASSIGN_OR_RETURN(const uint64_t k_bytes,
                          region_bytes("kv_store", "K", s.k_type, s.head_dim, row_len, s.n_ctx));
  MINFER_ASSIGN_OR_RETURN(const uint64_t v_bytes,
                          region_bytes("kv_store", "V", s.v_type, s.head_dim, row_len, s.n_ctx));
  const uint64_t in_bytes = uint64_t(row_len) * s.n_tokens * 4;
  MINFER_RETURN_IF_ERROR(needs("kv_store", "k", k, in_bytes));
  MINFER_RETURN_IF_ERROR(needs("kv_store", "v", v, in_bytes));
  MINFER_RETURN_IF_ERROR(needs("kv_store", "rows", rows, uint64_t(s.n_tokens) * 4));
  MINFER_RETURN_IF_ERROR(needs("kv_store", "k_cache", k_cache, k_bytes));
  MINFER_RETURN_IF_ERROR(needs("kv_store", "v_cache", v_cache, v_bytes));
  MINFER_RETURN_IF_ERROR(needs("kv_store", "err", err, MINFER_ERR_WORDS * 4));
  if (overlap(k_cache, k_bytes, v_cache, v_bytes)) {
    return Status::invalid_argument("kv_store: the K and V caches overlap");
  }
  MINFER_ASSIGN_OR_RETURN(const Groups groups,
                          fold_groups(uint64_t(s.n_tokens), rec.device().info().limits));
  const args::KvStoreArgs args{static_cast<uint32_t>(s.n_tokens), static_cast<uint32_t>(row_len),
                               static_cast<uint32_t>(s.n_ctx), *kv_code(s.k_type),
                               *kv_code(s.v_type)};
  const BufferRange bindings[] = {k, v, rows, words(k_cache), words(v_cache), err};
  return rec.dispatch_args(find_kernel("kv_store", "words").value_or(~0u), bindings, args, groups,
                           note);
}

Status encode_rope_store(Recorder& rec, const BufferRange& packed, const BufferRange& positions,
                         const BufferRange& freq_factors, const BufferRange& k_cache,
                         const BufferRange& v_cache, const BufferRange& err,
                         const RopeStoreShape& s, std::string_view note) {
  const RopeShape& r = s.rope;
  MINFER_RETURN_IF_ERROR(check_rope(r));
  MINFER_RETURN_IF_ERROR(positive("rope_store", "n_head_kv", s.n_head_kv));
  MINFER_RETURN_IF_ERROR(positive("rope_store", "n_ctx", s.n_ctx));
  const int64_t heads = r.n_heads + 2 * s.n_head_kv, row_len = s.n_head_kv * r.head_dim;
  if (s.row_stride < heads * r.head_dim ||
      uint64_t(s.row_stride) * uint64_t(r.n_tokens) > uint64_t(kMaxIndex) ||
      uint64_t(row_len) * uint64_t(s.n_ctx) > uint64_t(kMaxIndex)) {
    return Status::invalid_argument("rope_store: rows of " + str(s.row_stride) + " floats for " +
                                    str(heads) + " heads of " + str(r.head_dim) + " x " +
                                    str(r.n_tokens) + " tokens, cache of " + str(s.n_ctx) +
                                    " rows (shorter rows or past 32-bit indices)");
  }
  MINFER_ASSIGN_OR_RETURN(const uint64_t k_bytes,
                          region_bytes("rope_store", "K", s.k_type, r.head_dim, row_len, s.n_ctx));
  MINFER_ASSIGN_OR_RETURN(const uint64_t v_bytes,
                          region_bytes("rope_store", "V", s.v_type, r.head_dim, row_len, s.n_ctx));
  MINFER_RETURN_IF_ERROR(
      needs("rope_store", "packed", packed, uint64_t(s.row_stride) * r.n_tokens * 4));
  MINFER_RETURN_IF_ERROR(needs("rope_store", "positions", positions, uint64_t(r.n_tokens) * 4));
  MINFER_RETURN_IF_ERROR(needs("rope_store", "k_cache", k_cache, k_bytes));
  MINFER_RETURN_IF_ERROR(needs("rope_store", "v_cache", v_cache, v_bytes));
  MINFER_RETURN_IF_ERROR(needs("rope_store", "err", err, MINFER_ERR_WORDS * 4));
  const bool has_ff = freq_factors.buffer != nullptr;
  if (has_ff) {
    MINFER_RETURN_IF_ERROR(
        needs("rope_store", "freq_factors", freq_factors, uint64_t(r.n_rot / 2) * 4));
  }
  if (overlap(k_cache, k_bytes, v_cache, v_bytes)) {
    return Status::invalid_argument("rope_store: the K and V caches overlap");
  }
  MINFER_ASSIGN_OR_RETURN(const Groups groups,
                          fold_groups(uint64_t(r.n_tokens) * uint64_t(r.n_heads + s.n_head_kv),
                                      rec.device().info().limits));
  const args::RopeStoreArgs args{static_cast<uint32_t>(r.n_tokens),
                                 static_cast<uint32_t>(r.n_heads),
                                 static_cast<uint32_t>(s.n_head_kv),
                                 static_cast<uint32_t>(r.head_dim),
                                 static_cast<uint32_t>(s.row_stride),
                                 static_cast<uint32_t>(r.n_rot),
                                 r.neox ? 1u : 0u,
                                 has_ff ? 1u : 0u,
                                 r.freq_scale,
                                 std::pow(r.freq_base, -2.0f / static_cast<float>(r.n_rot)),
                                 static_cast<uint32_t>(s.n_ctx),
                                 *kv_code(s.k_type),
                                 *kv_code(s.v_type),
                                 r.ext_factor,
                                 r.corr_low,
                                 r.corr_high,
                                 r.mscale};
  // Without freq factors, binding 2 is the positions again: bound, not read.
  const BufferRange bindings[] = {packed,         positions,      has_ff ? freq_factors : positions,
                                  words(k_cache), words(v_cache), err};
  return rec.dispatch_args(find_kernel("rope_store", "words").value_or(~0u), bindings, args, groups,
                           note);
}

Result<uint32_t> attention_kernel(const Device& device, TensorType k_type, TensorType v_type) {
  if (!kv_code(k_type) || !kv_code(v_type)) {
    return Status::unimplemented(
        "attention: no GPU kernel for a " + std::string(quant::type_name(k_type)) + " K / " +
        std::string(quant::type_name(v_type)) + " V cache (F32, F16, Q8_0)");
  }
  const std::string variant = std::string(kv_name(k_type)) + "_" + std::string(kv_name(v_type));
  const std::optional<uint32_t> k = find_kernel("attention", variant);
  if (k && device.kernel(*k).available) return *k;
  return Status::unimplemented("attention." + variant + " on " + device.info().name + ": " +
                               (k ? device.kernel(*k).unavailable_reason : "not built"));
}

uint64_t attention_loop_bound(const AttentionShape& s, uint32_t subgroup_size) {
  auto ceil_div = [](uint64_t a, uint64_t b) { return (a + b - 1) / b; };
  const uint64_t wg = MINFER_ATTENTION_WG, quads_max = MINFER_ATTENTION_MAX_QUADS;
  const uint64_t sg = std::clamp<uint64_t>(subgroup_size, 1, wg);
  uint64_t keys = uint64_t(s.page_size > 0 ? s.page_size * s.max_pages : s.n_ctx);
  if (s.sliding_window > 0) keys = std::min<uint64_t>(keys, uint64_t(s.sliding_window));
  const uint64_t hd = uint64_t(std::max<int64_t>(s.head_dim, 1));
  // attention.comp's split: chunks of `sg` keys dealt to wg / sg subgroups;
  // in the V sums, key groups of min(sg, quads) lanes.
  const uint64_t n_sg = std::max<uint64_t>(wg / sg, 1), quads = ceil_div(hd, 4);
  const uint64_t key_groups = sg / std::min(sg, quads);
  const uint64_t keys_per_lane = ceil_div(sg, key_groups);
  const uint64_t dot = ceil_div(hd, 32) * 9;  // pieces of 32 dims, 8 steps each
  const uint64_t v_sums = ceil_div(keys_per_lane, MINFER_ATTENTION_BATCH) *
                          (1 + MINFER_ATTENTION_BATCH * (1 + quads_max));
  const uint64_t per_chunk = dot + quads_max + v_sums;
  const uint64_t partials = n_sg * key_groups;
  const uint64_t passes = ceil_div(partials, MINFER_ATTENTION_COMBINE / hd);
  const uint64_t merge = 2 * n_sg + passes * (1 + quads_max) + partials;
  return ceil_div(hd, wg) + quads_max + ceil_div(ceil_div(keys, sg), n_sg) * per_chunk + merge;
}

namespace {

// What the device must allow for `s`: the loop-count guard of CPU devices
// (lavapipe; docs/VULKAN.md rule 7), and subgroups wide enough that a lane
// holds at most MINFER_ATTENTION_MAX_QUADS quads of a head (any subgroup of
// >= 8 lanes does at head_dim 256).
Status check_attention_device(const DeviceInfo& info, const AttentionShape& s) {
  const uint64_t sg = std::max<uint32_t>(info.limits.subgroup_size, 1);
  const uint64_t quads = (uint64_t(s.head_dim) + 3) / 4;
  if (quads > sg * MINFER_ATTENTION_MAX_QUADS) {
    return Status::unimplemented("attention: head_dim " + str(s.head_dim) + " on subgroups of " +
                                 std::to_string(sg) + " lanes (" + info.name +
                                 ") needs more than " + std::to_string(MINFER_ATTENTION_MAX_QUADS) +
                                 " groups of 4 dims per lane");
  }
  const uint64_t loops = attention_loop_bound(s, info.limits.subgroup_size);
  if (info.type != "cpu" || loops <= kCpuLoopBudget) return Status::ok();
  return Status::unimplemented("attention: up to " + std::to_string(loops) +
                               " loop iterations per invocation on " + info.name + ", past the " +
                               std::to_string(kCpuLoopBudget) +
                               " a CPU Vulkan device runs (docs/VULKAN.md rule 7)");
}

// Every binding of an attention call against the shape.

}  // namespace

Status encode_attention(Recorder& rec, const BufferRange& q, const BufferRange& positions,
                        const BufferRange& seq_slots, const BufferRange& page_table,
                        const BufferRange& k_cache, const BufferRange& v_cache,
                        const BufferRange& sinks, const BufferRange& out, const BufferRange& err,
                        const AttentionShape& s, std::string_view note) {
  MINFER_RETURN_IF_ERROR(detail::check_attention(s));
  MINFER_ASSIGN_OR_RETURN(const uint32_t kernel,
                          attention_kernel(rec.device(), s.k_type, s.v_type));
  const DeviceInfo& info = rec.device().info();
  MINFER_RETURN_IF_ERROR(check_attention_device(info, s));
  MINFER_RETURN_IF_ERROR(detail::check_attention_bindings(q, positions, seq_slots, page_table,
                                                          k_cache, v_cache, sinks, out, err, s));
  MINFER_ASSIGN_OR_RETURN(const Groups groups,
                          fold_groups(uint64_t(s.n_tokens) * s.n_head, info.limits));
  const bool paged = s.page_size > 0;
  const args::AttentionArgs args{static_cast<uint32_t>(s.n_tokens),
                                 static_cast<uint32_t>(s.n_head),
                                 static_cast<uint32_t>(s.n_head_kv),
                                 static_cast<uint32_t>(s.head_dim),
                                 static_cast<uint32_t>(s.n_ctx),
                                 s.scale,
                                 static_cast<uint32_t>(s.sliding_window),
                                 static_cast<uint32_t>(paged ? s.page_size : 0),
                                 static_cast<uint32_t>(paged ? s.max_pages : 0),
                                 static_cast<uint32_t>(paged ? s.n_slots : 0),
                                 sinks.buffer != nullptr ? 1u : 0u};
  const detail::AttentionBindings b = detail::attention_bindings(
      q, positions, seq_slots, page_table, k_cache, v_cache, sinks, out, err, s);
  return rec.dispatch_args(kernel, b.ranges, args, groups, note);
}

}  // namespace minfer::shader
