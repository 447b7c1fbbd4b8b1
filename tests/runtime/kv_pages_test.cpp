// The KV pool's pages: allocation, references, the prefix cache and its LRU.
#include "runtime/kv_pages.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

namespace minfer::runtime {
namespace {

std::vector<int32_t> iota_tokens(int n, int32_t first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

PagePool make_pool(int64_t pages, int64_t size) {
  auto p = PagePool::create(pages, size);
  EXPECT_TRUE(p.is_ok()) << p.message();
  return std::move(p).value();
}

TEST(KvPages, BadPoolShapesAreRefused) {
  EXPECT_EQ(PagePool::create(0, 16).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PagePool::create(4, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(PagePool::create(int64_t{1} << 28, 16).is_ok());
}

TEST(KvPages, ALoneSequenceGetsCellsInOrder) {
  PagePool pool = make_pool(4, 4);
  SequencePages s;
  ASSERT_TRUE(s.extend(pool, 6).is_ok());
  EXPECT_EQ(s.size(), 6);
  EXPECT_EQ(s.n_pages(), 2);
  for (int64_t p = 0; p < 6; ++p) EXPECT_EQ(s.cell(p, 4), p);
  ASSERT_TRUE(s.extend(pool, 2).is_ok());  // fills the second page, no new one
  EXPECT_EQ(s.n_pages(), 2);
  EXPECT_EQ(pool.stats().referenced, 2);
  s.release(pool);
  EXPECT_EQ(pool.stats().free, 4);
  EXPECT_EQ(pool.stats().referenced, 0);
}

TEST(KvPages, SequencesNeverShareAWritablePage) {
  PagePool pool = make_pool(8, 4);
  SequencePages a, b;
  ASSERT_TRUE(a.extend(pool, 3).is_ok());
  ASSERT_TRUE(b.extend(pool, 3).is_ok());
  ASSERT_TRUE(a.extend(pool, 5).is_ok());
  std::set<int32_t> cells;
  for (int64_t p = 0; p < a.size(); ++p) EXPECT_TRUE(cells.insert(a.cell(p, 4)).second);
  for (int64_t p = 0; p < b.size(); ++p) EXPECT_TRUE(cells.insert(b.cell(p, 4)).second);
  EXPECT_EQ(cells.size(), 11u);
}

TEST(KvPages, FullPoolIsAnErrorThatChangesNothing) {
  PagePool pool = make_pool(3, 4);
  SequencePages a, b;
  ASSERT_TRUE(a.extend(pool, 8).is_ok());
  const Status s = b.extend(pool, 5);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "KV pool full: 5 more tokens need 2 pages, 1 of 3 are available");
  EXPECT_EQ(b.size(), 0);
  EXPECT_EQ(pool.available(), 1);
  ASSERT_TRUE(b.extend(pool, 4).is_ok());
  EXPECT_EQ(pool.allocate().status().code(), StatusCode::kResourceExhausted);
}

TEST(KvPages, FinishedPrefixIsReusedByTheNextSequence) {
  PagePool pool = make_pool(8, 4);
  const std::vector<int32_t> prompt = iota_tokens(10);  // two full pages and two tokens
  SequencePages a;
  ASSERT_TRUE(a.extend(pool, 10).is_ok());
  a.publish_full(pool, prompt);
  const std::vector<int32_t> cells_a = {a.cell(0, 4), a.cell(4, 4)};
  a.release(pool);
  EXPECT_EQ(pool.stats().cached, 2);
  EXPECT_EQ(pool.stats().free, 6);

  SequencePages b;
  EXPECT_EQ(b.adopt_prefix(pool, prompt), 8);
  EXPECT_EQ(b.cell(0, 4), cells_a[0]);
  EXPECT_EQ(b.cell(4, 4), cells_a[1]);
  EXPECT_EQ(pool.stats().prefix_hits, 2);
  EXPECT_EQ(pool.stats().cached, 0);
  // The rest of the prompt goes to a fresh page of its own.
  ASSERT_TRUE(b.extend(pool, 2).is_ok());
  EXPECT_NE(b.table()[2], cells_a[0] / 4);
  EXPECT_NE(b.table()[2], cells_a[1] / 4);
}

TEST(KvPages, LiveSequencesSharePrefixPagesReadOnly) {
  PagePool pool = make_pool(8, 4);
  const std::vector<int32_t> prompt = iota_tokens(9);
  SequencePages a, b;
  ASSERT_TRUE(a.extend(pool, 9).is_ok());
  a.publish_full(pool, prompt);
  EXPECT_EQ(b.adopt_prefix(pool, prompt), 8);
  EXPECT_EQ(pool.references(a.table()[0]), 2);
  a.release(pool);
  EXPECT_EQ(pool.references(b.table()[0]), 1) << "still held by b";
  EXPECT_EQ(pool.stats().cached, 0);
}

TEST(KvPages, PrefixMustMatchExactlyAndInOrder) {
  PagePool pool = make_pool(8, 4);
  std::vector<int32_t> prompt = iota_tokens(12);
  SequencePages a;
  ASSERT_TRUE(a.extend(pool, 12).is_ok());
  a.publish_full(pool, prompt);
  a.release(pool);
  // Same second page after a different first page: nothing reused.
  std::vector<int32_t> other = prompt;
  other[1] = 7;
  SequencePages b;
  EXPECT_EQ(b.adopt_prefix(pool, other), 0);
  // A divergence in the second page: only the first page is reused.
  other = prompt;
  other[6] = 7;
  EXPECT_EQ(b.adopt_prefix(pool, other), 4);
  // The whole prompt cached: the last token is still left to compute.
  SequencePages c;
  EXPECT_EQ(c.adopt_prefix(pool, prompt), 8);
  SequencePages d;
  EXPECT_EQ(d.adopt_prefix(pool, std::span(prompt).first(4)), 0);
}

TEST(KvPages, CachedPagesAreEvictedLeastRecentlyUsedFirst) {
  PagePool pool = make_pool(3, 2);
  const std::vector<int32_t> p1 = {1, 2, 9}, p2 = {3, 4, 9};
  SequencePages a, b;
  ASSERT_TRUE(a.extend(pool, 2).is_ok());
  a.publish_full(pool, p1);
  a.release(pool);  // p1's page cached first
  ASSERT_TRUE(b.extend(pool, 2).is_ok());
  b.publish_full(pool, p2);
  b.release(pool);
  EXPECT_EQ(pool.stats().cached, 2);
  SequencePages c;
  ASSERT_TRUE(c.extend(pool, 4).is_ok());  // the free page, then one eviction
  EXPECT_EQ(pool.stats().evictions, 1);
  SequencePages d;
  EXPECT_EQ(d.adopt_prefix(pool, p1), 0) << "the oldest prefix went first";
  EXPECT_EQ(d.adopt_prefix(pool, p2), 2);
}

TEST(KvPages, TruncateNeverKeepsAPartOfAPublishedPage) {
  PagePool pool = make_pool(8, 4);
  const std::vector<int32_t> tokens = iota_tokens(10);
  SequencePages s;
  ASSERT_TRUE(s.extend(pool, 10).is_ok());
  s.publish_full(pool, tokens);
  s.truncate(pool, 9);  // inside the private third page: kept as asked
  EXPECT_EQ(s.size(), 9);
  EXPECT_EQ(s.n_pages(), 3);
  s.truncate(pool, 6);  // inside the published second page: the page goes
  EXPECT_EQ(s.size(), 4);
  EXPECT_EQ(s.n_pages(), 1);
  ASSERT_TRUE(s.extend(pool, 2).is_ok());
  EXPECT_EQ(s.n_pages(), 2);
  s.release(pool);
  EXPECT_EQ(pool.stats().referenced, 0);
}

}  // namespace
}  // namespace minfer::runtime
