// The KV cache of many sequences as fixed-size pages of cells, with a prefix
// cache: the bookkeeping of the Engine's KV pool (docs/ENGINE.md). A cell is
// one row of every layer's K and V cache regions (runtime/kv_cache.h holds
// the storage: regions of n_pages * page_size rows); this file only decides
// which cells a sequence's positions live in.
//
// Contract:
//   - PagePool owns n_pages pages of page_size cells. allocate() hands out a
//     page with one reference; retain()/release() count references; a page
//     whose count falls to 0 becomes free, or, if it was published, cached.
//   - Prefix cache: a full page whose tokens will not change is published
//     with its tokens and the page before it in its sequence. find() returns
//     the cached page that holds exactly these tokens after exactly that
//     parent (tokens compared in full: a hash collision can never hand out
//     another prefix's keys and values), and retains it. Cached pages with no
//     reference are evicted least recently used first when allocate() finds
//     no free page; a page still referenced is never evicted or reused.
//   - allocate() with neither a free nor an evictable page is a
//     resource-exhausted error: the caller waits for another sequence to end.
//     Nothing already allocated changes on that error.
//   - SequencePages is one sequence's page table: position p lives in cell
//     table[p / page_size] * page_size + p % page_size. extend() makes room
//     for more positions (allocating pages); adopt_prefix() starts an empty
//     sequence on cached pages for the longest cached prefix of a prompt,
//     always leaving the last prompt token to be computed in a page of its
//     own; publish_full() publishes the sequence's newly filled pages;
//     release() gives every page back. Pages shared with another sequence are
//     only ever full published ones, which nobody writes again.
// Threading: not thread-safe; the Engine drives one pool from one thread.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace minfer::runtime {

using PageId = int32_t;
inline constexpr PageId kNoPage = -1;

struct PagePoolStats {
  int64_t pages = 0;        // all pages
  int64_t referenced = 0;   // held by at least one sequence
  int64_t cached = 0;       // published, unreferenced, evictable
  int64_t free = 0;         // neither
  int64_t prefix_hits = 0;  // pages find() returned
  int64_t evictions = 0;    // cached pages taken back by allocate()
};

class PagePool {
 public:
  static Result<PagePool> create(int64_t n_pages, int64_t page_size);

  int64_t page_size() const { return page_size_; }
  int64_t n_pages() const { return static_cast<int64_t>(pages_.size()); }
  // Pages allocate() can hand out now: free ones and evictable cached ones.
  int64_t available() const;
  PagePoolStats stats() const;

  Result<PageId> allocate();
  void retain(PageId page);
  void release(PageId page);
  int32_t references(PageId page) const { return pages_[static_cast<size_t>(page)].refs; }

  // Publishes a full, referenced page: `tokens` (page_size of them) are what
  // its cells hold, after `parent` (kNoPage for a sequence's first page).
  void publish(PageId page, PageId parent, std::span<const int32_t> tokens);
  // The cached page holding `tokens` after `parent`, retained; or nothing.
  std::optional<PageId> find(PageId parent, std::span<const int32_t> tokens);

 private:
  struct Page {
    int32_t refs = 0;
    bool published = false;
    PageId parent = kNoPage;
    std::vector<int32_t> tokens;      // published content
    uint64_t key = 0;                 // hash of (parent, tokens)
    std::list<PageId>::iterator lru;  // position in lru_ while cached
  };
  PagePool(int64_t n_pages, int64_t page_size);
  static uint64_t key_of(PageId parent, std::span<const int32_t> tokens);
  void unpublish(PageId page);

  int64_t page_size_;
  std::vector<Page> pages_;
  std::vector<PageId> free_;                          // never published or unpublished
  std::list<PageId> lru_;                             // cached pages, oldest first
  std::unordered_multimap<uint64_t, PageId> by_key_;  // published pages
  int64_t referenced_ = 0;
  int64_t prefix_hits_ = 0;
  int64_t evictions_ = 0;
};

class SequencePages {
 public:
  int64_t size() const { return n_positions_; }  // positions with a cell
  int64_t n_pages() const { return static_cast<int64_t>(table_.size()); }
  std::span<const PageId> table() const { return table_; }
  int32_t cell(int64_t pos, int64_t page_size) const {
    return table_[static_cast<size_t>(pos / page_size)] * static_cast<int32_t>(page_size) +
           static_cast<int32_t>(pos % page_size);
  }

  // Cells for `n` more positions; on a resource-exhausted error the sequence
  // keeps what it had.
  Status extend(PagePool& pool, int64_t n);
  // On an empty sequence: takes the cached pages of the longest cached prefix
  // of `prompt` (whole pages, at most min(prompt.size() - 1, max_positions) /
  // page_size of them; max_positions < 0: no such limit) and returns how many
  // prompt tokens they hold.
  int64_t adopt_prefix(PagePool& pool, std::span<const int32_t> prompt, int64_t max_positions = -1);
  // Publishes every page that `tokens` (the sequence's tokens from position
  // 0, at least size() of them) fills completely and that is not yet.
  void publish_full(PagePool& pool, std::span<const int32_t> tokens);
  // Keeps the first n positions or fewer, giving back the pages past them:
  // cutting inside a published page gives that whole page back too, since it
  // is never written again (size() says how many positions were kept).
  void truncate(PagePool& pool, int64_t n);
  void release(PagePool& pool) { truncate(pool, 0); }

 private:
  std::vector<PageId> table_;
  int64_t n_positions_ = 0;
  int64_t n_published_ = 0;  // leading pages already published
};

}  // namespace minfer::runtime
