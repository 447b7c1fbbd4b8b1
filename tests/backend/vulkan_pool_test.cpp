// The buffer pool (backend/shader/buffer_pool.h) on the Vulkan device: alignment,
// reuse and coalescing, a randomized alloc/free sequence checked against a
// model of the free space and by writing a distinct pattern into every live
// allocation and reading all of them back, fresh allocations held until
// release_fresh(), chunks for large requests, the maxStorageBufferRange
// refusal, and a kernel reading and writing sub-ranges at nonzero offsets;
// MemoryUse::kHostAccess chunks (mapped, apart, or shared where that would not
// help) and kernels over them on lavapipe opened as a discrete GPU.
// Out-of-memory messages and memory layouts use a host-memory fake device.
#ifdef MINFER_HAS_VULKAN

#include "backend/shader/buffer_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/shader/encoders.h"
#include "backend/shader/recorder.h"
#include "backend/vulkan_fake_device.h"
#include "backend/vulkan_testutil.h"

namespace minfer::vulkan::testing {
namespace {

using shader::Allocation;
using shader::BufferPool;
using shader::PoolId;

PoolId must(Result<PoolId> r) {
  EXPECT_TRUE(r.is_ok()) << r.message();
  return r.is_ok() ? *r : -1;
}

std::vector<std::byte> pattern(uint64_t bytes, uint32_t seed) {
  std::vector<std::byte> v(bytes);
  for (uint64_t i = 0; i < bytes; ++i) v[i] = std::byte((seed * 131 + i * 7 + (i >> 8)) & 0xff);
  return v;
}

TEST(VulkanPool, OffsetsAreAlignedToTheDevice) {
  MINFER_SKIP_WITHOUT_VULKAN();
  BufferPool pool(device(), 1 << 20);
  const uint64_t align = device().info().limits.min_storage_buffer_offset_alignment;
  EXPECT_EQ(pool.alignment() % std::max<uint64_t>(align, 1), 0u);
  EXPECT_GE(pool.alignment(), 16u);
  for (uint64_t bytes : {1ull, 3ull, 17ull, 1000ull, 4096ull, 0ull, 33ull}) {
    const PoolId id = must(pool.alloc(bytes));
    const Allocation* a = pool.allocation(id);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->offset % pool.alignment(), 0u) << bytes;
    EXPECT_EQ(a->reserved % pool.alignment(), 0u) << bytes;
    EXPECT_EQ(a->size, bytes);
    EXPECT_GT(a->range().size, 0u) << "a zero-byte allocation still binds a sized range";
  }
  EXPECT_EQ(pool.stats().chunks, 1u);
}

TEST(VulkanPool, FreedSpaceIsReusedAndNeighboursCoalesce) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const uint64_t unit = 16 << 10;
  BufferPool pool(device(), 4 * unit);
  PoolId id[4];
  for (PoolId& i : id) i = must(pool.alloc(unit));
  EXPECT_EQ(pool.stats().chunks, 1u);
  EXPECT_EQ(pool.stats().largest_free, 0u);
  const uint64_t second = pool.allocation(id[1])->offset;
  ASSERT_TRUE(pool.free(id[1]).is_ok());
  const PoolId again = must(pool.alloc(unit - 5));  // fits the hole exactly
  EXPECT_EQ(pool.allocation(again)->offset, second);
  ASSERT_TRUE(pool.free(again).is_ok());
  // Free 0 and 2 around the hole at 1, then 3: one block of the whole chunk.
  ASSERT_TRUE(pool.free(id[0]).is_ok());
  ASSERT_TRUE(pool.free(id[2]).is_ok());
  EXPECT_EQ(pool.stats().largest_free, 3 * unit);
  ASSERT_TRUE(pool.free(id[3]).is_ok());
  EXPECT_EQ(pool.stats().largest_free, 4 * unit);
  const PoolId whole = must(pool.alloc(4 * unit));
  EXPECT_EQ(pool.allocation(whole)->offset, 0u);
  EXPECT_EQ(pool.stats().chunks, 1u) << "the coalesced chunk holds a chunk-sized allocation";
  ASSERT_TRUE(pool.free(whole).is_ok());
  const Status bad = pool.free(whole);  // twice
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad.message();
  EXPECT_EQ(pool.free(-1).code(), StatusCode::kInvalidArgument);
}

TEST(VulkanPool, FreshSpaceIsHeldUntilReleaseFresh) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const uint64_t unit = 16 << 10;
  BufferPool pool(device(), 4 * unit);
  const PoolId fresh = must(pool.alloc_fresh(unit));
  const uint64_t fresh_at = pool.allocation(fresh)->offset;
  ASSERT_TRUE(pool.free(fresh).is_ok());
  EXPECT_EQ(pool.stats().fresh_held, unit);
  std::vector<PoolId> ids;
  for (int i = 0; i < 3; ++i) {  // the rest of the chunk, then a second chunk
    ids.push_back(must(i % 2 ? pool.alloc_fresh(unit) : pool.alloc(unit)));
    EXPECT_NE(pool.allocation(ids.back())->offset, fresh_at) << "freed fresh space reused";
  }
  const PoolId next = must(pool.alloc(unit));
  EXPECT_EQ(pool.stats().chunks, 2u) << "held fresh space is not free space";
  EXPECT_NE(pool.allocation(next)->buffer, pool.allocation(ids[0])->buffer);
  pool.release_fresh();
  EXPECT_EQ(pool.stats().fresh_held, 0u);
  const PoolId reuse = must(pool.alloc(unit));
  EXPECT_EQ(pool.allocation(reuse)->buffer, pool.allocation(ids[0])->buffer);
  EXPECT_EQ(pool.allocation(reuse)->offset, fresh_at);
}

TEST(VulkanPool, AnAllocationLargerThanAChunkGetsItsOwnChunk) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  BufferPool pool(d, 64 << 10);
  const uint64_t big = (200 << 10) + 12;
  const PoolId small = must(pool.alloc(100));
  const PoolId id = must(pool.alloc(big));
  const Allocation a = *pool.allocation(id);
  EXPECT_GE(a.buffer->size(), big);
  EXPECT_NE(a.buffer, pool.allocation(small)->buffer);
  const auto bytes = pattern(big, 9);
  ASSERT_TRUE(d.write_buffer(*a.buffer, a.offset, bytes).is_ok());
  std::vector<std::byte> back(big);
  ASSERT_TRUE(d.read_buffer(*a.buffer, a.offset, back).is_ok());
  EXPECT_EQ(back, bytes);
  ASSERT_TRUE(pool.free(id).is_ok());
  pool.trim();
  EXPECT_EQ(pool.stats().chunks, 1u) << "the empty big chunk is trimmed, the other kept";
}

TEST(VulkanPool, AllocationsPastMaxStorageBufferRangeAreRefusedWithTheNumbers) {
  MINFER_SKIP_WITHOUT_VULKAN();
  BufferPool pool(device());
  const uint64_t range = device().info().limits.max_storage_buffer_range;
  auto r = pool.alloc(range + 1);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.message().find(std::to_string(range + 1)), std::string::npos) << r.message();
  EXPECT_NE(r.message().find(std::to_string(range)), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("maxStorageBufferRange"), std::string::npos) << r.message();
  EXPECT_EQ(pool.stats().chunks, 0u);
}

TEST(VulkanPool, OutOfDeviceMemoryNamesTheRequestAndWhatThePoolHolds) {
  FakeDevice d(1 << 30, 64, 3 << 20);  // 3 MiB of "device memory"
  BufferPool pool(d, 1 << 20);
  for (int i = 0; i < 3; ++i) must(pool.alloc(1 << 20));
  auto r = pool.alloc(5000);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.message().find("allocation of 5000 bytes"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("3 chunk(s) of 3145728 bytes"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("fake: out of device memory"), std::string::npos) << r.message();
}

TEST(VulkanPool, HostAccessAllocationsGetMappedChunksOfTheirOwn) {
  FakeDevice d(1 << 30, 64, 1 << 30, FakeMemory::kDiscreteWithBar);
  BufferPool pool(d, 1 << 20, 64 << 10);
  const PoolId dev = must(pool.alloc(100));
  const PoolId in1 = must(pool.alloc(100, shader::MemoryUse::kHostAccess));
  const PoolId in2 = must(pool.alloc_fresh(300, shader::MemoryUse::kHostAccess));
  const Allocation a = *pool.allocation(in1), b = *pool.allocation(in2);
  EXPECT_TRUE(a.buffer->mapped());
  EXPECT_FALSE(pool.allocation(dev)->buffer->mapped());
  EXPECT_EQ(a.buffer, b.buffer) << "small host-access allocations share their chunk";
  EXPECT_NE(a.buffer, pool.allocation(dev)->buffer);
  EXPECT_EQ(a.buffer->size(), 64u << 10);
  const PoolId big = must(pool.alloc(100 << 10, shader::MemoryUse::kHostAccess));
  EXPECT_EQ(pool.allocation(big)->buffer->size(), 100u << 10) << "a chunk of its own size";
  EXPECT_TRUE(pool.allocation(big)->buffer->mapped());
  shader::PoolStats st = pool.stats();
  EXPECT_EQ(st.chunks, 3u);
  EXPECT_EQ(st.host_bytes, (64u << 10) + (100u << 10));
  EXPECT_EQ(d.created_for_host(), 2);
  ASSERT_TRUE(pool.free(big).is_ok());
  pool.trim();
  EXPECT_EQ(pool.stats().host_bytes, 64u << 10);
}

TEST(VulkanPool, HostAccessSharesTheDeviceChunksWhereItWouldNotHelp) {
  // Unified memory: every chunk is mapped already.
  FakeDevice unified(1 << 30, 64, 1 << 30, FakeMemory::kUnified);
  BufferPool shared(unified, 1 << 20);
  const PoolId u1 = must(shared.alloc(100));
  const PoolId u2 = must(shared.alloc(100, shader::MemoryUse::kHostAccess));
  EXPECT_EQ(shared.allocation(u1)->buffer, shared.allocation(u2)->buffer);
  EXPECT_EQ(unified.created_for_host(), 0);
  // A discrete GPU without mapped device memory: one chunk finds out.
  FakeDevice discrete(1 << 30, 64, 1 << 30, FakeMemory::kDiscrete);
  BufferPool pool(discrete, 1 << 20, 64 << 10);
  const PoolId first = must(pool.alloc(100, shader::MemoryUse::kHostAccess));
  EXPECT_FALSE(pool.allocation(first)->buffer->mapped()) << "the hint fell back";
  const PoolId dev = must(pool.alloc(100));
  const PoolId next = must(pool.alloc(100, shader::MemoryUse::kHostAccess));
  EXPECT_EQ(pool.allocation(next)->buffer, pool.allocation(dev)->buffer);
  EXPECT_EQ(discrete.created_for_host(), 1);
  EXPECT_EQ(pool.stats().chunks, 2u);
  const auto bytes = pattern(100, 3);
  const Allocation a = *pool.allocation(first);
  ASSERT_TRUE(discrete.write_buffer(*a.buffer, a.offset, bytes).is_ok());
  std::vector<std::byte> back(100);
  ASSERT_TRUE(discrete.read_buffer(*a.buffer, a.offset, back).is_ok());
  EXPECT_EQ(back, bytes);
}

// lavapipe opened as a discrete GPU with a BAR heap: kernels read mapped
// inputs and write mapped and staged outputs; host copies of both kinds.
TEST(VulkanPool, KernelsUseHostAccessAndDeviceChunksTogether) {
  MINFER_SKIP_WITHOUT_VULKAN();
  TestDevice discrete = open_test_device({.quiet = true, .allow_unified_memory = false});
  ASSERT_TRUE(discrete.status.is_ok()) << discrete.status.message();
  shader::Device& d = *discrete.device;
  ASSERT_FALSE(d.info().unified_memory);
  BufferPool pool(d, 1 << 20, 64 << 10);
  const int64_t n = 1001;
  const PoolId ia = must(pool.alloc(n * 4, shader::MemoryUse::kHostAccess));
  const PoolId ib = must(pool.alloc(n * 4));
  const PoolId io1 = must(pool.alloc(n * 4, shader::MemoryUse::kHostAccess));
  const PoolId io2 = must(pool.alloc(n * 4));
  const Allocation a = *pool.allocation(ia), b = *pool.allocation(ib);
  const Allocation o1 = *pool.allocation(io1), o2 = *pool.allocation(io2);
  ASSERT_TRUE(a.buffer->mapped());
  ASSERT_FALSE(b.buffer->mapped());
  const auto vb = cpu::testing::random_floats(n, 6);
  ASSERT_TRUE(d.write_buffer(*b.buffer, b.offset, std::as_bytes(std::span(vb))).is_ok());
  for (uint32_t rep = 0; rep < 2; ++rep) {  // a new input each time, as a decode step's
    const auto va = cpu::testing::random_floats(n, 5 + rep);
    ASSERT_TRUE(d.write_buffer(*a.buffer, a.offset, std::as_bytes(std::span(va))).is_ok());
    shader::Recorder rec(d);
    using shader::ElementwiseOp;
    ASSERT_TRUE(
        shader::encode_elementwise(rec, ElementwiseOp::kAdd, a.range(), b.range(), o1.range(), n, n)
            .is_ok());
    ASSERT_TRUE(shader::encode_elementwise(rec, ElementwiseOp::kMul, o1.range(), b.range(),
                                           o2.range(), n, n)
                    .is_ok());
    const Status s = rec.submit_and_wait();
    ASSERT_TRUE(s.is_ok()) << s.message();
    std::vector<float> sum(n), prod(n);
    ASSERT_TRUE(
        d.read_buffer(*o1.buffer, o1.offset, std::as_writable_bytes(std::span(sum))).is_ok());
    ASSERT_TRUE(
        d.read_buffer(*o2.buffer, o2.offset, std::as_writable_bytes(std::span(prod))).is_ok());
    std::vector<double> want_sum(n), want_prod(n);
    for (int64_t i = 0; i < n; ++i) {
      want_sum[i] = double(va[i] + vb[i]);
      want_prod[i] = double((va[i] + vb[i]) * vb[i]);
    }
    EXPECT_LT(max_abs_diff(sum, want_sum), 1e-6);
    EXPECT_LT(max_abs_diff(prod, want_prod), 1e-5);
  }
}

// The model: per chunk, which alignment units are taken (live or held fresh).
struct Model {
  std::map<const shader::Buffer*, std::vector<bool>> taken;
  uint64_t unit;

  bool mark(const Allocation& a, bool on) {
    auto& t = taken[a.buffer];
    if (t.empty()) t.assign(a.buffer->size() / unit, false);
    for (uint64_t u = a.offset / unit; u < (a.offset + a.reserved) / unit; ++u) {
      if (u >= t.size() || t[u] == on) return false;  // overlap, or freeing free space
      t[u] = on;
    }
    return true;
  }
  uint64_t largest_free() const {
    uint64_t best = 0;
    for (const auto& [b, t] : taken) {
      uint64_t run = 0;
      for (bool x : t) best = std::max(best, run = x ? 0 : run + 1);
    }
    return best * unit;
  }
};

TEST(VulkanPool, RandomSequencesNeverOverlapAndMatchTheModel) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  BufferPool pool(d, 256 << 10);
  Model model{{}, pool.alignment()};
  struct Live {
    PoolId id;
    bool fresh;
    Allocation a;
    uint32_t seed;
  };
  std::vector<Live> live;
  std::vector<Allocation> held;  // freed fresh allocations
  std::mt19937 rng(1234);
  const auto verify_contents = [&] {
    for (const Live& l : live) {
      std::vector<std::byte> back(l.a.size);
      ASSERT_TRUE(d.read_buffer(*l.a.buffer, l.a.offset, back).is_ok());
      ASSERT_EQ(back, pattern(l.a.size, l.seed)) << "allocation " << l.id << " was overwritten";
    }
  };
  for (uint32_t step = 0; step < 600; ++step) {
    const uint32_t what = rng() % 10;
    if (what < 5 || live.empty()) {
      const uint64_t bytes = rng() % 4 == 0 ? rng() % (300 << 10) : rng() % 9000;
      const bool fresh = rng() % 4 == 0;
      const PoolId id = must(fresh ? pool.alloc_fresh(bytes) : pool.alloc(bytes));
      ASSERT_GE(id, 0);
      const Allocation a = *pool.allocation(id);
      ASSERT_TRUE(model.mark(a, true)) << "step " << step << ": overlaps a taken range";
      ASSERT_TRUE(d.write_buffer(*a.buffer, a.offset, pattern(bytes, step)).is_ok());
      live.push_back({id, fresh, a, step});
    } else if (what < 9) {
      const size_t k = rng() % live.size();
      ASSERT_TRUE(pool.free(live[k].id).is_ok());
      if (live[k].fresh) {
        held.push_back(live[k].a);
      } else {
        ASSERT_TRUE(model.mark(live[k].a, false));
      }
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      pool.release_fresh();
      for (const Allocation& a : held) ASSERT_TRUE(model.mark(a, false));
      held.clear();
    }
    const shader::PoolStats st = pool.stats();
    ASSERT_EQ(st.chunk_bytes, st.live_bytes + st.fresh_held + st.free_bytes) << "step " << step;
    ASSERT_EQ(st.largest_free, model.largest_free()) << "step " << step << ": not coalesced";
    ASSERT_EQ(st.live_allocations, live.size());
    if (step % 100 == 99) verify_contents();
  }
  verify_contents();
}

TEST(VulkanPool, KernelsReadAndWriteSubRangesAtNonzeroOffsets) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  BufferPool pool(d, 1 << 20);
  const int64_t n = 1001;
  must(pool.alloc(77));  // nothing starts at offset 0
  const PoolId ia = must(pool.alloc(n * 4)), ib = must(pool.alloc(n * 4));
  const PoolId io1 = must(pool.alloc(n * 4)), io2 = must(pool.alloc(n * 4));
  const Allocation a = *pool.allocation(ia), b = *pool.allocation(ib);
  const Allocation o1 = *pool.allocation(io1), o2 = *pool.allocation(io2);
  ASSERT_EQ(a.buffer, o2.buffer) << "all in one chunk";
  ASSERT_GT(a.offset, 0u);
  const auto va = cpu::testing::random_floats(n, 5), vb = cpu::testing::random_floats(n, 6);
  ASSERT_TRUE(d.write_buffer(*a.buffer, a.offset, std::as_bytes(std::span(va))).is_ok());
  ASSERT_TRUE(d.write_buffer(*b.buffer, b.offset, std::as_bytes(std::span(vb))).is_ok());
  shader::Recorder rec(d);
  using shader::ElementwiseOp;
  // o1 = a + b and o2 = a * b touch disjoint ranges of one chunk: no barrier;
  // o1 = o1 + o2 reads both: one.
  ASSERT_TRUE(
      shader::encode_elementwise(rec, ElementwiseOp::kAdd, a.range(), b.range(), o1.range(), n, n)
          .is_ok());
  ASSERT_TRUE(
      shader::encode_elementwise(rec, ElementwiseOp::kMul, a.range(), b.range(), o2.range(), n, n)
          .is_ok());
  EXPECT_EQ(rec.barriers(), 0u);
  ASSERT_TRUE(
      shader::encode_elementwise(rec, ElementwiseOp::kAdd, o1.range(), o2.range(), o1.range(), n, n)
          .is_ok());
  EXPECT_EQ(rec.barriers(), 1u);
  const Status s = rec.submit_and_wait();
  ASSERT_TRUE(s.is_ok()) << s.message();
  std::vector<float> got(n), mul(n);
  ASSERT_TRUE(d.read_buffer(*o1.buffer, o1.offset, std::as_writable_bytes(std::span(got))).is_ok());
  ASSERT_TRUE(d.read_buffer(*o2.buffer, o2.offset, std::as_writable_bytes(std::span(mul))).is_ok());
  std::vector<double> want(n), want_mul(n);
  for (int64_t i = 0; i < n; ++i) {
    want_mul[i] = double(va[i]) * vb[i];
    want[i] = (double(va[i]) + vb[i]) + double(va[i] * vb[i]);
  }
  EXPECT_LT(max_abs_diff(mul, want_mul), 1e-6);
  EXPECT_LT(max_abs_diff(got, want), 1e-5);
  // The neighbours of the outputs are untouched.
  std::vector<float> back_a(n);
  ASSERT_TRUE(
      d.read_buffer(*a.buffer, a.offset, std::as_writable_bytes(std::span(back_a))).is_ok());
  EXPECT_EQ(back_a, va);
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
