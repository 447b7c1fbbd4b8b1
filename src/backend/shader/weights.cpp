#include "backend/shader/weights.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>

namespace minfer::shader {
namespace {

constexpr uint64_t kMinAlignment = 256;
constexpr size_t kMissingNamed = 8;  // all_registered names at most this many

uint64_t round_up(uint64_t v, uint64_t to) {
  return (v + to - 1) / to * to;
}

std::string quoted(std::string_view name) {
  return "'" + std::string(name) + "'";
}

// The bytes `type` and `shape` describe.
Result<uint64_t> expected_bytes(const HostTensor& t) {
  if (t.shape.empty()) return Status::invalid_argument("no shape");
  MINFER_ASSIGN_OR_RETURN(uint64_t bytes, quant::row_bytes(t.type, t.shape[0]));
  for (size_t i = 1; i < t.shape.size(); ++i) {
    if (t.shape[i] < 0) return Status::invalid_argument("a negative dimension");
    bytes *= static_cast<uint64_t>(t.shape[i]);
  }
  return bytes;
}

// Reads one byte of every page of `part`, so that the file's pages are in
// memory before the GPU first reads them (not faulted in mid-step).
void warm_up(const HostRange& part, uint64_t page) {
  volatile uint8_t sink = 0;
  for (uintptr_t a = part.begin; a < part.end; a += page) {
    sink = sink ^ *reinterpret_cast<const volatile uint8_t*>(a);
  }
}

}  // namespace

void order_for_fused_kernels(std::vector<HostTensor>& tensors) {
  static constexpr std::string_view kGroups[][3] = {
      {"attn_q.weight", "attn_k.weight", "attn_v.weight"},
      {"ffn_gate.weight", "ffn_up.weight", ""},
  };
  // "blk.N." and the rest of a layer tensor's name; empty prefix otherwise.
  const auto split = [](std::string_view name) -> std::pair<std::string_view, std::string_view> {
    if (!name.starts_with("blk.")) return {};
    const size_t dot = name.find('.', 4);
    if (dot == std::string_view::npos) return {};
    return {name.substr(0, dot + 1), name.substr(dot + 1)};
  };
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < tensors.size(); ++i) index.emplace(std::string(tensors[i].name), i);
  std::vector<HostTensor> out;
  std::vector<char> placed(tensors.size(), 0);
  out.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (placed[i]) continue;
    const auto [prefix, rest] = split(tensors[i].name);
    for (const auto& group : kGroups) {
      if (prefix.empty() ||
          std::find(std::begin(group), std::end(group), rest) == std::end(group)) {
        continue;
      }
      for (std::string_view member : group) {
        if (member.empty()) continue;
        const auto it = index.find(std::string(prefix) + std::string(member));
        if (it == index.end() || placed[it->second]) continue;
        placed[it->second] = 1;
        out.push_back(tensors[it->second]);
      }
    }
    if (!placed[i]) {
      placed[i] = 1;
      out.push_back(tensors[i]);
    }
  }
  tensors = std::move(out);
}

bool contiguous(std::span<const DeviceWeight* const> weights) {
  if (weights.empty()) return false;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] == nullptr) return false;
    if (i > 0 && (weights[i]->buffer != weights[i - 1]->buffer ||
                  weights[i]->offset != weights[i - 1]->offset + weights[i - 1]->bytes)) {
      return false;
    }
  }
  return true;
}

WeightsRegistry::WeightsRegistry(Device& device, uint64_t chunk_bytes) : device_(device) {
  const DeviceLimits& l = device.info().limits;
  alignment_ = std::max(l.min_storage_buffer_offset_alignment, kMinAlignment);
  max_range_ = l.max_storage_buffer_range != 0 ? l.max_storage_buffer_range
                                               : std::numeric_limits<uint32_t>::max();
  chunk_bytes_ = std::min(std::max<uint64_t>(chunk_bytes, alignment_), max_range_);
}

Result<bool> WeightsRegistry::already(const HostTensor& t) const {
  const auto it = index_.find(std::string(t.name));
  if (it == index_.end()) return false;
  const Entry& e = it->second;
  if (e.host == t.bytes.data() && e.weight.bytes == t.bytes.size()) return true;
  return Status::invalid_argument("weights: tensor " + quoted(t.name) + " is already registered (" +
                                  std::to_string(e.weight.bytes) +
                                  " bytes from another host address)");
}

Status WeightsRegistry::reserve(uint64_t bytes, const Buffer*& buffer, uint64_t& offset) {
  const uint64_t need = std::max<uint64_t>(bytes, 1);
  if (need > max_range_) {  // a buffer of its own, bound in row ranges later
    MINFER_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> b, device_.create_buffer(need));
    buffer = b.get();
    offset = 0;
    dedicated_.push_back(std::move(b));
    return Status::ok();
  }
  const uint64_t at = round_up(used_, alignment_);
  if (chunks_.empty() || at + need > chunks_.back()->size()) {
    MINFER_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> b,
                            device_.create_buffer(std::max(chunk_bytes_, need)));
    chunks_.push_back(std::move(b));
    used_ = 0;
    offset = 0;
  } else {
    offset = at;
  }
  used_ = offset + need;
  buffer = chunks_.back().get();
  return Status::ok();
}

Status WeightsRegistry::copy(const Buffer& buffer, uint64_t offset, const HostTensor& t,
                             uint64_t& done, uint64_t total, const UploadProgress& progress) {
  for (uint64_t at = 0; at < t.bytes.size();) {
    const uint64_t n = std::min<uint64_t>(t.bytes.size() - at, kPieceBytes);
    MINFER_RETURN_IF_ERROR(device_.write_buffer(buffer, offset + at, t.bytes.subspan(at, n)));
    at += n;
    done += n;
    if (progress) progress(done, total);
  }
  return Status::ok();
}

Status WeightsRegistry::upload(const HostTensor& tensor, const UploadProgress& progress) {
  return upload_all(std::span(&tensor, 1), progress);
}

Status WeightsRegistry::check_bytes(const HostTensor& t) const {
  auto expected = expected_bytes(t);
  if (expected.is_ok() && *expected == t.bytes.size()) return Status::ok();
  return Status::invalid_argument(
      "weights: tensor " + quoted(t.name) + " has " + std::to_string(t.bytes.size()) +
      " bytes, its type " + std::string(quant::type_name(t.type)) + " and shape say " +
      (expected.is_ok() ? std::to_string(*expected) : expected.status().message()));
}

void WeightsRegistry::add(const HostTensor& t, const Buffer* buffer, uint64_t offset) {
  Entry e;
  e.weight = DeviceWeight{buffer, offset, t.bytes.size(), t.type,
                          std::vector<int64_t>(t.shape.begin(), t.shape.end())};
  e.host = t.bytes.data();
  index_.emplace(std::string(t.name), std::move(e));
  registered_bytes_ += t.bytes.size();
}

Status WeightsRegistry::upload_all(std::span<const HostTensor> tensors,
                                   const UploadProgress& progress) {
  uint64_t total = 0;
  for (const HostTensor& t : tensors) {
    MINFER_ASSIGN_OR_RETURN(const bool again, already(t));
    if (!again) total += t.bytes.size();
  }
  uint64_t done = 0;
  for (const HostTensor& t : tensors) {
    MINFER_ASSIGN_OR_RETURN(const bool again, already(t));  // a name twice in the list
    if (again) continue;
    MINFER_RETURN_IF_ERROR(check_bytes(t));
    const Buffer* buffer = nullptr;
    uint64_t offset = 0;
    Status s = reserve(t.bytes.size(), buffer, offset);
    if (s.is_ok()) s = copy(*buffer, offset, t, done, total, progress);
    if (!s.is_ok()) return s.with_context("weights: uploading tensor " + quoted(t.name));
    add(t, buffer, offset);
  }
  return Status::ok();
}

Status WeightsRegistry::map_all(std::span<const HostTensor> tensors,
                                const UploadProgress& progress) {
  const uint64_t page = device_.info().host_wrap_alignment;
  if (page == 0) return upload_all(tensors, progress);
  std::vector<HostRange> ranges;
  for (const HostTensor& t : tensors) {
    MINFER_RETURN_IF_ERROR(check_bytes(t));
    const auto at = reinterpret_cast<uintptr_t>(t.bytes.data());
    ranges.push_back({at, at + t.bytes.size()});
  }
  const HostPartPlan plan = plan_host_parts(ranges, page, max_range_);
  // A part the device will not wrap (memory it cannot map) is copied instead.
  std::vector<const Buffer*> part_buffer;
  for (const HostRange& p : plan.parts) {
    const auto* base = reinterpret_cast<const std::byte*>(p.begin);
    auto b = device_.wrap_host_memory(std::span(base, p.end - p.begin));
    part_buffer.push_back(b.is_ok() ? b->get() : nullptr);
    if (!b.is_ok()) continue;
    wrapped_.push_back(std::move(b).value());
    warm_up(p, page);
  }
  const uint64_t align =
      std::max<uint64_t>(device_.info().limits.min_storage_buffer_offset_alignment, 1);
  std::vector<HostTensor> copied;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const HostTensor& t = tensors[i];
    MINFER_ASSIGN_OR_RETURN(const bool again, already(t));
    if (again) continue;
    const size_t part = plan.part_of[i];
    const uint64_t offset =
        part == HostPartPlan::kNoPart ? 0 : ranges[i].begin - plan.parts[part].begin;
    if (part == HostPartPlan::kNoPart || part_buffer[part] == nullptr || offset % align != 0) {
      copied.push_back(t);
      continue;
    }
    add(t, part_buffer[part], offset);
    mapped_bytes_ += t.bytes.size();
  }
  return upload_all(copied, progress);
}

bool WeightsRegistry::contains(std::string_view name) const {
  return index_.find(std::string(name)) != index_.end();
}

Result<const DeviceWeight*> WeightsRegistry::lookup(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  if (it == index_.end()) {
    return Status::not_found("weights: tensor " + quoted(name) + " is not on " +
                             device_.info().name + " (" + std::to_string(index_.size()) +
                             " tensors registered)");
  }
  return &it->second.weight;
}

Status WeightsRegistry::all_registered(std::span<const std::string> names) const {
  std::string missing;
  size_t n_missing = 0;
  for (const std::string& name : names) {
    if (contains(name)) continue;
    if (n_missing++ < kMissingNamed) missing += (missing.empty() ? "" : ", ") + quoted(name);
  }
  if (n_missing == 0) return Status::ok();
  if (n_missing > kMissingNamed) {
    missing += " and " + std::to_string(n_missing - kMissingNamed) + " more";
  }
  return Status::not_found("weights: " + std::to_string(n_missing) + " of " +
                           std::to_string(names.size()) + " tensors are not on " +
                           device_.info().name + ": " + missing);
}

uint64_t WeightsRegistry::device_bytes() const {
  uint64_t n = 0;
  for (const auto& b : chunks_) n += b->size();
  for (const auto& b : dedicated_) n += b->size();
  return n;
}

}  // namespace minfer::shader
