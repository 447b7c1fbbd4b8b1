// The activation memory of a GPU backend: sub-allocations of a few large
// device buffers (chunks), addressed by ids, on which a backend's
// alloc_buffer / alloc_fresh / free_buffer / buffer_size (backend.h) sit.
// API-free: it only calls Device::create_buffer, so a Metal device layer
// reuses it as is.
//
// Contract:
//   - alloc(bytes) returns an id whose Allocation is (chunk buffer, offset,
//     size = bytes as asked): dispatches bind allocation(id).range(). Offsets
//     and the space reserved are multiples of alignment() (the device's
//     minStorageBufferOffsetAlignment, at least 16), so ranges of different
//     live allocations never overlap, even with the packed kernels' widening
//     of a range to whole 32-bit words.
//   - Space comes from the free lists (best fit over every chunk); when none
//     fits, a new chunk of max(chunk_bytes, bytes rounded up) is created,
//     never larger than the device's maxStorageBufferRange (one binding must
//     be able to see any allocation). A request past that range is
//     out_of_range with both numbers; a device out of memory is
//     resource_exhausted naming the size asked and what the pool holds.
//   - free(id) returns the space to its chunk's free list, merged with free
//     neighbours; the id may be handed out again by a later alloc.
//   - alloc_fresh(bytes) is alloc from the free space, but the allocation is
//     kept apart: free() of a fresh id ends the id, and its space stays
//     reserved until release_fresh(), which the caller calls at a point where
//     no recorded work can still read it (after the split's wait). So a fresh
//     allocation never shares memory with one freed since the last
//     release_fresh() (backend.h: alloc_fresh is never recycled mid-execute).
//   - alloc(bytes, MemoryUse::kHostAccess) (and alloc_fresh) take space from
//     chunks of their own, made with that hint and of host_chunk_bytes (2 MiB;
//     larger for a larger request), so that the host's copies of small
//     buffers written or read every step are memcpys where the device maps
//     such memory (Buffer::mapped()). Where it would not help, they share
//     the kDevice chunks: on unified memory (every chunk is mapped), and
//     once a host-access chunk came back unmapped (the device has no such
//     memory, or ran out of it: at most one small chunk is spent finding out).
//   - trim() destroys chunks that hold nothing (live, or fresh awaiting
//     release); chunks are otherwise kept until the pool is destroyed.
//   - The pool must be destroyed before its Device; the device layer keeps a
//     destroyed chunk alive while submitted work still uses it (device.h).
// Threading: one thread at a time (the backend's scheduler thread).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "backend/shader/device.h"
#include "base/status.h"

namespace minfer::shader {

using PoolId = int32_t;  // the same values as backend::BufferId

struct Allocation {
  const Buffer* buffer = nullptr;  // the chunk
  uint64_t offset = 0;             // a multiple of the pool's alignment()
  uint64_t size = 0;               // bytes as asked
  uint64_t reserved = 0;           // bytes held in the chunk (>= size, >= alignment())

  // The binding of this allocation (never size 0, which would mean "to the
  // end of the chunk").
  BufferRange range() const { return {buffer, offset, size == 0 ? reserved : size}; }
};

struct PoolStats {
  size_t chunks = 0;
  uint64_t chunk_bytes = 0;   // device memory held
  uint64_t host_bytes = 0;    // of which in chunks for MemoryUse::kHostAccess
  uint64_t live_bytes = 0;    // reserved by live allocations
  uint64_t fresh_held = 0;    // freed fresh allocations awaiting release_fresh()
  uint64_t free_bytes = 0;    // in the free lists
  uint64_t largest_free = 0;  // the largest free block of any chunk
  size_t live_allocations = 0;
};

class BufferPool {
 public:
  static constexpr uint64_t kDefaultChunkBytes = 64ull << 20;
  static constexpr uint64_t kDefaultHostChunkBytes = 2ull << 20;

  explicit BufferPool(Device& device, uint64_t chunk_bytes = kDefaultChunkBytes,
                      uint64_t host_chunk_bytes = kDefaultHostChunkBytes);
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  Result<PoolId> alloc(uint64_t bytes, MemoryUse use = MemoryUse::kDevice);
  Result<PoolId> alloc_fresh(uint64_t bytes, MemoryUse use = MemoryUse::kDevice);
  // An id that is not live is invalid_argument (nothing changes).
  Status free(PoolId id);
  // Returns the space of every fresh allocation freed so far to the free lists.
  void release_fresh();
  void trim();

  // The allocation of a live id, or nullptr.
  const Allocation* allocation(PoolId id) const;
  uint64_t alignment() const { return alignment_; }
  // The largest allocation: the device's maxStorageBufferRange.
  uint64_t max_allocation() const { return max_range_; }
  PoolStats stats() const;

 private:
  struct Chunk {
    std::unique_ptr<Buffer> buffer;
    MemoryUse use = MemoryUse::kDevice;
    uint64_t bytes = 0;
    std::map<uint64_t, uint64_t> free;  // offset -> size, non-adjacent blocks
  };
  struct Slot {
    bool live = false;
    bool fresh = false;
    uint32_t chunk = 0;
    Allocation a;
  };
  struct Held {  // space of a freed fresh allocation
    uint32_t chunk;
    uint64_t offset, bytes;
  };

  Result<PoolId> allocate(uint64_t bytes, bool fresh, MemoryUse use);
  // A free block of `reserved` bytes carved out of the free lists of the
  // chunks for `use`, or false.
  bool take(uint64_t reserved, MemoryUse use, uint32_t& chunk, uint64_t& offset);
  Status add_chunk(uint64_t reserved, uint64_t asked, MemoryUse use);
  void give_back(uint32_t chunk, uint64_t offset, uint64_t bytes);
  PoolId new_slot();

  Device& device_;
  uint64_t alignment_;
  uint64_t chunk_bytes_;
  uint64_t host_chunk_bytes_;
  uint64_t max_range_;
  bool host_chunks_ = true;    // false: kHostAccess shares the kDevice chunks
  std::vector<Chunk> chunks_;  // a trimmed chunk stays as an empty entry (indices are stable)
  std::vector<Slot> slots_;
  std::vector<PoolId> free_ids_;
  std::vector<Held> held_;
};

}  // namespace minfer::shader
