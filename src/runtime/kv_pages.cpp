#include "runtime/kv_pages.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace minfer::runtime {

PagePool::PagePool(int64_t n_pages, int64_t page_size)
    : page_size_(page_size), pages_(static_cast<size_t>(n_pages)) {
  free_.reserve(static_cast<size_t>(n_pages));
  // Handed out lowest first, so that a lone sequence's cells are 0, 1, 2, ...
  for (int64_t p = n_pages; p-- > 0;) free_.push_back(static_cast<PageId>(p));
}

Result<PagePool> PagePool::create(int64_t n_pages, int64_t page_size) {
  if (page_size < 1 || n_pages < 1 || n_pages * page_size > (int64_t{1} << 31) - 1) {
    return Status::invalid_argument("KV pool of " + std::to_string(n_pages) + " pages of " +
                                    std::to_string(page_size) +
                                    " cells: both must be positive and the cells fit in int32");
  }
  return PagePool(n_pages, page_size);
}

int64_t PagePool::available() const {
  return static_cast<int64_t>(free_.size() + lru_.size());
}

PagePoolStats PagePool::stats() const {
  PagePoolStats s;
  s.pages = n_pages();
  s.referenced = referenced_;
  s.cached = static_cast<int64_t>(lru_.size());
  s.free = static_cast<int64_t>(free_.size());
  s.prefix_hits = prefix_hits_;
  s.evictions = evictions_;
  return s;
}

uint64_t PagePool::key_of(PageId parent, std::span<const int32_t> tokens) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(static_cast<uint32_t>(parent));
  for (int32_t t : tokens) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(t)) + 0x9e3779b97f4a7c15ull + (h << 6) +
         (h >> 2);
  }
  return h;
}

void PagePool::unpublish(PageId page) {
  Page& p = pages_[static_cast<size_t>(page)];
  auto [first, last] = by_key_.equal_range(p.key);
  for (auto it = first; it != last; ++it) {
    if (it->second == page) {
      by_key_.erase(it);
      break;
    }
  }
  p.published = false;
  p.parent = kNoPage;
  p.tokens.clear();
}

Result<PageId> PagePool::allocate() {
  PageId page = kNoPage;
  if (!free_.empty()) {
    page = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    page = lru_.front();  // the least recently used cached prefix
    lru_.pop_front();
    unpublish(page);
    ++evictions_;
  } else {
    return Status::resource_exhausted("KV pool full: all " + std::to_string(n_pages()) +
                                      " pages of " + std::to_string(page_size_) +
                                      " cells are in use");
  }
  pages_[static_cast<size_t>(page)].refs = 1;
  ++referenced_;
  return page;
}

void PagePool::retain(PageId page) {
  Page& p = pages_[static_cast<size_t>(page)];
  if (p.refs == 0) {
    assert(p.published && "only a cached page can be taken back from zero references");
    lru_.erase(p.lru);
    ++referenced_;
  }
  ++p.refs;
}

void PagePool::release(PageId page) {
  Page& p = pages_[static_cast<size_t>(page)];
  assert(p.refs > 0 && "page released more often than retained");
  if (--p.refs > 0) return;
  --referenced_;
  if (p.published) {
    p.lru = lru_.insert(lru_.end(), page);
  } else {
    free_.push_back(page);
  }
}

void PagePool::publish(PageId page, PageId parent, std::span<const int32_t> tokens) {
  Page& p = pages_[static_cast<size_t>(page)];
  assert(p.refs > 0 && static_cast<int64_t>(tokens.size()) == page_size_);
  if (p.published) return;
  p.published = true;
  p.parent = parent;
  p.tokens.assign(tokens.begin(), tokens.end());
  p.key = key_of(parent, tokens);
  by_key_.emplace(p.key, page);
}

std::optional<PageId> PagePool::find(PageId parent, std::span<const int32_t> tokens) {
  auto [first, last] = by_key_.equal_range(key_of(parent, tokens));
  for (auto it = first; it != last; ++it) {
    const Page& p = pages_[static_cast<size_t>(it->second)];
    if (p.parent != parent ||
        !std::equal(tokens.begin(), tokens.end(), p.tokens.begin(), p.tokens.end())) {
      continue;  // a hash collision: another prefix
    }
    retain(it->second);
    ++prefix_hits_;
    return it->second;
  }
  return std::nullopt;
}

Status SequencePages::extend(PagePool& pool, int64_t n) {
  const int64_t ps = pool.page_size();
  const int64_t need = (n_positions_ + n + ps - 1) / ps - n_pages();
  if (need > pool.available()) {
    return Status::resource_exhausted("KV pool full: " + std::to_string(n) + " more tokens need " +
                                      std::to_string(need) + " pages, " +
                                      std::to_string(pool.available()) + " of " +
                                      std::to_string(pool.n_pages()) + " are available");
  }
  for (int64_t i = 0; i < need; ++i) {
    auto page = pool.allocate();
    assert(page.is_ok() && "available() promised a page");
    table_.push_back(*page);
  }
  n_positions_ += n;
  return Status::ok();
}

int64_t SequencePages::adopt_prefix(PagePool& pool, std::span<const int32_t> prompt,
                                    int64_t max_positions) {
  if (n_positions_ != 0 || prompt.empty()) return 0;
  const int64_t ps = pool.page_size();
  int64_t positions = static_cast<int64_t>(prompt.size()) - 1;
  if (max_positions >= 0) positions = std::min(positions, max_positions);
  const int64_t max_pages = positions / ps;
  PageId parent = kNoPage;
  for (int64_t k = 0; k < max_pages; ++k) {
    auto page =
        pool.find(parent, prompt.subspan(static_cast<size_t>(k * ps), static_cast<size_t>(ps)));
    if (!page) break;
    table_.push_back(*page);
    parent = *page;
  }
  n_positions_ = n_pages() * ps;
  n_published_ = n_pages();
  return n_positions_;
}

void SequencePages::publish_full(PagePool& pool, std::span<const int32_t> tokens) {
  const int64_t ps = pool.page_size();
  const int64_t full = std::min<int64_t>(n_positions_, static_cast<int64_t>(tokens.size())) / ps;
  for (int64_t k = n_published_; k < full; ++k) {
    const PageId parent = k == 0 ? kNoPage : table_[static_cast<size_t>(k - 1)];
    pool.publish(table_[static_cast<size_t>(k)], parent,
                 tokens.subspan(static_cast<size_t>(k * ps), static_cast<size_t>(ps)));
  }
  n_published_ = std::max(n_published_, full);
}

void SequencePages::truncate(PagePool& pool, int64_t n) {
  const int64_t ps = pool.page_size();
  n = std::clamp<int64_t>(n, 0, n_positions_);
  // A published page is never written again (another sequence may read it):
  // cutting inside one gives the whole page back.
  int64_t keep_pages = (n + ps - 1) / ps;
  if (n % ps != 0 && keep_pages <= n_published_) keep_pages = n / ps;
  while (n_pages() > keep_pages) {
    pool.release(table_.back());
    table_.pop_back();
  }
  n_positions_ = std::min(n, keep_pages * ps);
  n_published_ = std::min(n_published_, keep_pages);
}

}  // namespace minfer::runtime
