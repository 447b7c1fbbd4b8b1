// The in-process communicator (parallel/local_group.h): sums in rank order
// with the same bits on every rank, gathers in rank order, and errors (not
// hangs) on every rank when lengths disagree or a rank fails.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "parallel/local_group.h"
#include "parallel/parallel_testutil.h"

namespace minfer::parallel {
namespace {

// Runs body(rank communicator) on one thread per rank and returns each
// rank's status.
std::vector<Status> run_ranks(int n, const std::function<Status(Communicator&)>& body) {
  auto group = make_local_group(n);
  EXPECT_TRUE(group.is_ok()) << group.message();
  std::vector<Status> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { results[r] = body(*(*group)[r]); });
  }
  for (auto& t : threads) t.join();
  return results;
}

using testing::random_values;

TEST(LocalGroup, AllReduceSumsInRankOrderWithTheSameBitsEverywhere) {
  for (int n : {1, 2, 3, 4}) {
    for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}}) {
      std::vector<std::vector<float>> data;
      for (int r = 0; r < n; ++r) data.push_back(random_values(len, 17u * r + 3u));
      // The contract's order, written out: ((r0 + r1) + r2) + r3.
      std::vector<float> want(len);
      for (size_t i = 0; i < len; ++i) {
        float acc = data[0][i];
        for (int r = 1; r < n; ++r) acc += data[r][i];
        want[i] = acc;
      }
      auto results = run_ranks(n, [&](Communicator& c) {
        // Three rounds, so the barrier and the scratch are reused.
        for (int round = 0; round < 3; ++round) {
          std::vector<float> mine = data[c.rank()];
          MINFER_RETURN_IF_ERROR(c.all_reduce_sum(mine));
          if (len > 0 && std::memcmp(mine.data(), want.data(), len * sizeof(float)) != 0) {
            return Status::internal("rank " + std::to_string(c.rank()) + " differs");
          }
        }
        return Status::ok();
      });
      for (const Status& s : results)
        EXPECT_TRUE(s.is_ok()) << n << " ranks, " << len << ": " << s.message();
    }
  }
}

TEST(LocalGroup, AllGatherPutsRanksInOrder) {
  const int n = 4;
  const size_t len = 5;
  auto results = run_ranks(n, [&](Communicator& c) {
    std::vector<float> in(len, static_cast<float>(c.rank()));
    std::vector<float> out(len * n, -1.0f);
    MINFER_RETURN_IF_ERROR(c.all_gather(in, out));
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] != static_cast<float>(i / len)) return Status::internal("wrong value");
    }
    return c.barrier();
  });
  for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << s.message();
}

TEST(LocalGroup, BroadcastsFromAnyRoot) {
  const int n = 3;
  auto results = run_ranks(n, [&](Communicator& c) {
    for (int root : {0, 2}) {
      for (size_t len : {size_t{0}, size_t{13}, size_t{4099}}) {
        std::vector<std::byte> buf(len, std::byte{0});
        if (c.rank() == root) {
          for (size_t i = 0; i < len; ++i) buf[i] = static_cast<std::byte>((i * 7 + root) & 0xff);
        }
        MINFER_RETURN_IF_ERROR(c.broadcast(buf, root));
        for (size_t i = 0; i < len; ++i) {
          if (buf[i] != static_cast<std::byte>((i * 7 + root) & 0xff)) {
            return Status::internal("broadcast from " + std::to_string(root) + " differs");
          }
        }
      }
      // A message whose size only the root knows.
      std::vector<std::byte> msg(c.rank() == root ? 1000 + root : 3, std::byte{1});
      if (c.rank() == root) msg[5] = std::byte{42};
      MINFER_RETURN_IF_ERROR(broadcast_bytes(c, msg, root));
      if (msg.size() != static_cast<size_t>(1000 + root) || msg[5] != std::byte{42}) {
        return Status::internal("broadcast_bytes from " + std::to_string(root) + " differs");
      }
    }
    return Status::ok();
  });
  for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << s.message();
}

TEST(LocalGroup, BroadcastRootsMustAgreeAndExist) {
  auto differ = run_ranks(3, [&](Communicator& c) {
    std::vector<std::byte> buf(4);
    return c.broadcast(buf, c.rank() == 2 ? 1 : 0);
  });
  for (const Status& s : differ) {
    EXPECT_NE(s.message().find("different roots (rank 0: 0, rank 1: 0, rank 2: 1)"),
              std::string::npos)
        << s.message();
  }
  auto missing = run_ranks(2, [&](Communicator& c) {
    std::vector<std::byte> buf(4);
    return c.broadcast(buf, 5);
  });
  for (const Status& s : missing) {
    EXPECT_NE(s.message().find("root 5 is not a rank"), std::string::npos) << s.message();
  }
}

TEST(LocalGroup, DisagreeingLengthsAreAnErrorOnEveryRank) {
  auto results = run_ranks(3, [&](Communicator& c) {
    std::vector<float> mine(c.rank() == 1 ? 9 : 8, 1.0f);
    return c.all_reduce_sum(mine);
  });
  for (const Status& s : results) {
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("(rank 0: 8, rank 1: 9, rank 2: 8)"), std::string::npos)
        << s.message();
  }
  auto gathered = run_ranks(2, [&](Communicator& c) {
    std::vector<float> in(4, 1.0f), out(c.rank() == 0 ? 8 : 7);
    return c.all_gather(in, out);
  });
  for (const Status& s : gathered) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  }
}

// A rank that fails releases the others, which report it, and the group
// refuses later collectives.
TEST(LocalGroup, AFailedRankReleasesTheOthers) {
  auto results = run_ranks(4, [&](Communicator& c) -> Status {
    if (c.rank() == 2) {
      c.fail(Status::resource_exhausted("out of memory"));
      return Status::ok();
    }
    std::vector<float> mine(16, 1.0f);
    Status s = c.all_reduce_sum(mine);
    if (s.is_ok()) return Status::internal("the collective completed without rank 2");
    if (s.message().find("rank 2 failed") == std::string::npos) return s;
    Status again = c.barrier();
    return again.is_ok() ? Status::internal("the failed group went on") : Status::ok();
  });
  for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << s.message();
}

TEST(LocalGroup, NeedsARank) {
  auto g = make_local_group(0);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.message().find("at least one rank"), std::string::npos) << g.message();
}

}  // namespace
}  // namespace minfer::parallel
