#include "backend/shader/buffer_pool.h"

#include <algorithm>
#include <limits>
#include <string>

namespace minfer::shader {
namespace {

uint64_t round_up(uint64_t v, uint64_t to) {
  return (v + to - 1) / to * to;
}

std::string mib(uint64_t bytes) {
  return std::to_string(bytes) + " bytes (" + std::to_string(bytes >> 20) + " MiB)";
}

}  // namespace

BufferPool::BufferPool(Device& device, uint64_t chunk_bytes, uint64_t host_chunk_bytes)
    : device_(device) {
  const DeviceLimits& l = device.info().limits;
  alignment_ = std::max<uint64_t>(l.min_storage_buffer_offset_alignment, 16);
  max_range_ = l.max_storage_buffer_range != 0 ? l.max_storage_buffer_range
                                               : std::numeric_limits<uint32_t>::max();
  // A chunk never exceeds what one binding can see, rounded down to whole units.
  const uint64_t range_units = std::max<uint64_t>(max_range_ / alignment_ * alignment_, alignment_);
  chunk_bytes_ = std::min(round_up(std::max<uint64_t>(chunk_bytes, 1), alignment_), range_units);
  host_chunk_bytes_ =
      std::min(round_up(std::max<uint64_t>(host_chunk_bytes, 1), alignment_), range_units);
  host_chunks_ = !device.info().unified_memory;  // unified: every chunk is mapped already
}

Result<PoolId> BufferPool::alloc(uint64_t bytes, MemoryUse use) {
  return allocate(bytes, false, use);
}

Result<PoolId> BufferPool::alloc_fresh(uint64_t bytes, MemoryUse use) {
  return allocate(bytes, true, use);
}

Result<PoolId> BufferPool::allocate(uint64_t bytes, bool fresh, MemoryUse use) {
  if (!host_chunks_) use = MemoryUse::kDevice;
  if (bytes > max_range_) {
    return Status::out_of_range("buffer pool: an allocation of " + mib(bytes) +
                                " exceeds maxStorageBufferRange = " + mib(max_range_) + " of " +
                                device_.info().name);
  }
  const uint64_t reserved = round_up(std::max<uint64_t>(bytes, 1), alignment_);
  uint32_t chunk = 0;
  uint64_t offset = 0;
  if (!take(reserved, use, chunk, offset)) {
    MINFER_RETURN_IF_ERROR(add_chunk(reserved, bytes, use));
    if (!take(reserved, use, chunk, offset)) {
      return Status::internal("buffer pool: a new chunk has no room for " + mib(reserved));
    }
  }
  const PoolId id = new_slot();
  Slot& s = slots_[static_cast<size_t>(id)];
  s.live = true;
  s.fresh = fresh;
  s.chunk = chunk;
  s.a = Allocation{chunks_[chunk].buffer.get(), offset, bytes, reserved};
  return id;
}

bool BufferPool::take(uint64_t reserved, MemoryUse use, uint32_t& chunk, uint64_t& offset) {
  // Best fit: the smallest free block that holds `reserved`, over every chunk for `use`.
  uint64_t best = std::numeric_limits<uint64_t>::max();
  bool found = false;
  for (uint32_t c = 0; c < chunks_.size(); ++c) {
    if (!chunks_[c].buffer || chunks_[c].use != use) continue;
    for (const auto& [off, size] : chunks_[c].free) {
      if (size >= reserved && size < best) {
        best = size;
        chunk = c;
        offset = off;
        found = true;
      }
    }
  }
  if (!found) return false;
  auto& free = chunks_[chunk].free;
  free.erase(offset);
  if (best > reserved) free.emplace(offset + reserved, best - reserved);
  return true;
}

Status BufferPool::add_chunk(uint64_t reserved, uint64_t asked, MemoryUse use) {
  const bool host = use == MemoryUse::kHostAccess;
  const uint64_t bytes = std::max(host ? host_chunk_bytes_ : chunk_bytes_, reserved);
  auto buffer = device_.create_buffer(bytes, use);
  if (!buffer.is_ok()) {
    const PoolStats st = stats();
    const std::string held = "the pool holds " + std::to_string(st.chunks) + " chunk(s) of " +
                             mib(st.chunk_bytes) + ", " + mib(st.live_bytes) + " live, " +
                             mib(st.fresh_held) + " awaiting release_fresh, largest free block " +
                             mib(st.largest_free);
    const std::string what = "buffer pool: a chunk of " + mib(bytes) + " for an allocation of " +
                             mib(asked) + " on " + device_.info().name + " failed (" + held +
                             "): " + buffer.status().message();
    if (buffer.status().code() == StatusCode::kResourceExhausted) {
      return Status::resource_exhausted(what);
    }
    return Status::error(buffer.status().code(), what);
  }
  Chunk c;
  c.buffer = std::move(buffer).value();
  c.use = use;
  c.bytes = bytes;
  // The hint fell back (no such memory here, or none left): later small
  // allocations share the kDevice chunks rather than spend more on this.
  if (host && !c.buffer->mapped()) host_chunks_ = false;
  c.free.emplace(0, bytes);
  // Reuse the entry of a trimmed chunk, so indices stay small and stable.
  for (Chunk& old : chunks_) {
    if (!old.buffer) {
      old = std::move(c);
      return Status::ok();
    }
  }
  chunks_.push_back(std::move(c));
  return Status::ok();
}

void BufferPool::give_back(uint32_t chunk, uint64_t offset, uint64_t bytes) {
  auto& free = chunks_[chunk].free;
  auto next = free.lower_bound(offset);
  if (next != free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {  // merge with the block before
      offset = prev->first;
      bytes += prev->second;
      free.erase(prev);
    }
  }
  if (next != free.end() && offset + bytes == next->first) {  // and with the one after
    bytes += next->second;
    free.erase(next);
  }
  free.emplace(offset, bytes);
}

PoolId BufferPool::new_slot() {
  if (!free_ids_.empty()) {
    const PoolId id = free_ids_.back();
    free_ids_.pop_back();
    return id;
  }
  slots_.emplace_back();
  return static_cast<PoolId>(slots_.size() - 1);
}

Status BufferPool::free(PoolId id) {
  if (id < 0 || static_cast<size_t>(id) >= slots_.size() || !slots_[static_cast<size_t>(id)].live) {
    return Status::invalid_argument("buffer pool: id " + std::to_string(id) +
                                    " is not a live allocation");
  }
  Slot& s = slots_[static_cast<size_t>(id)];
  if (s.fresh) {
    held_.push_back({s.chunk, s.a.offset, s.a.reserved});
  } else {
    give_back(s.chunk, s.a.offset, s.a.reserved);
  }
  s = Slot{};
  free_ids_.push_back(id);
  return Status::ok();
}

void BufferPool::release_fresh() {
  for (const Held& h : held_) give_back(h.chunk, h.offset, h.bytes);
  held_.clear();
}

void BufferPool::trim() {
  for (uint32_t c = 0; c < chunks_.size(); ++c) {
    Chunk& chunk = chunks_[c];
    const bool empty = chunk.buffer && chunk.free.size() == 1 && chunk.free.begin()->first == 0 &&
                       chunk.free.begin()->second == chunk.bytes;
    if (empty) chunk = Chunk{};
  }
}

const Allocation* BufferPool::allocation(PoolId id) const {
  if (id < 0 || static_cast<size_t>(id) >= slots_.size()) return nullptr;
  const Slot& s = slots_[static_cast<size_t>(id)];
  return s.live ? &s.a : nullptr;
}

PoolStats BufferPool::stats() const {
  PoolStats st;
  for (const Chunk& c : chunks_) {
    if (!c.buffer) continue;
    ++st.chunks;
    st.chunk_bytes += c.bytes;
    if (c.use == MemoryUse::kHostAccess) st.host_bytes += c.bytes;
    for (const auto& [off, size] : c.free) {
      st.free_bytes += size;
      st.largest_free = std::max(st.largest_free, size);
    }
  }
  for (const Slot& s : slots_) {
    if (!s.live) continue;
    ++st.live_allocations;
    st.live_bytes += s.a.reserved;
  }
  for (const Held& h : held_) st.fresh_held += h.bytes;
  return st;
}

}  // namespace minfer::shader
