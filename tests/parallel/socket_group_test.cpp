// The TCP communicator (parallel/socket_group.h) on loopback: ranks as
// threads (and once as processes) give the same bits as the local group,
// gather and broadcast in order, and turn a failed, vanished, silent or
// disagreeing rank into an error naming it on every rank, within the
// timeout.
#include "parallel/socket_group.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "free_port.h"
#include "parallel/local_group.h"
#include "parallel/parallel_testutil.h"

namespace minfer::parallel {
namespace {

using Clock = std::chrono::steady_clock;

int free_port() {
  const int port = minfer::testing::free_loopback_port();
  EXPECT_GT(port, 0);
  return port;
}

std::string loopback_address() {
  return "127.0.0.1:" + std::to_string(free_port());
}

// Connects n ranks as threads (rank r told the group has sizes[r] ranks,
// n by default) and runs body on each joined rank; returns each rank's
// status, a connect error included.
std::vector<Status> run_ranks(int n, double timeout_s,
                              const std::function<Status(std::unique_ptr<Communicator>&)>& body,
                              std::vector<int> sizes = {}) {
  if (sizes.empty()) sizes.assign(static_cast<size_t>(n), n);
  const std::string address = loopback_address();
  std::vector<Status> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto c = connect_socket_group(address, r, sizes[static_cast<size_t>(r)], timeout_s);
      results[static_cast<size_t>(r)] = c.is_ok() ? body(*c) : c.status();
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

using testing::random_values;

const std::vector<size_t> kLengths = {0, 1, 7, 4099};

// What the local group's all_reduce_sum gives rank 0 for these inputs.
std::vector<float> local_sum(const std::vector<std::vector<float>>& data) {
  const int n = static_cast<int>(data.size());
  auto group = make_local_group(n);
  EXPECT_TRUE(group.is_ok()) << group.message();
  std::vector<std::vector<float>> bufs = data;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { EXPECT_TRUE((*group)[r]->all_reduce_sum(bufs[r]).is_ok()); });
  }
  for (auto& t : threads) t.join();
  return bufs[0];
}

bool mentions(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(SocketGroup, AllReduceGivesTheLocalGroupsBits) {
  for (int n : {1, 2, 4}) {
    std::vector<std::vector<std::vector<float>>> inputs;  // [length][rank]
    std::vector<std::vector<float>> want;
    for (size_t len : kLengths) {
      inputs.emplace_back();
      for (int r = 0; r < n; ++r) inputs.back().push_back(random_values(len, 31u * r + len));
      want.push_back(local_sum(inputs.back()));
    }
    auto results = run_ranks(n, 5.0, [&](std::unique_ptr<Communicator>& c) {
      for (size_t k = 0; k < kLengths.size(); ++k) {
        for (int round = 0; round < 2; ++round) {
          std::vector<float> mine = inputs[k][static_cast<size_t>(c->rank())];
          MINFER_RETURN_IF_ERROR(c->all_reduce_sum(mine));
          if (!mine.empty() &&
              std::memcmp(mine.data(), want[k].data(), mine.size() * sizeof(float)) != 0) {
            return Status::internal("rank " + std::to_string(c->rank()) + " differs at length " +
                                    std::to_string(kLengths[k]));
          }
        }
      }
      return Status::ok();
    });
    for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << n << " ranks: " << s.message();
  }
}

TEST(SocketGroup, AllGatherPutsRanksInOrder) {
  const int n = 3;
  auto results = run_ranks(n, 5.0, [&](std::unique_ptr<Communicator>& c) {
    for (size_t len : kLengths) {
      std::vector<float> in(len, static_cast<float>(c->rank()));
      std::vector<float> out(len * n, -1.0f);
      MINFER_RETURN_IF_ERROR(c->all_gather(in, out));
      for (size_t i = 0; i < out.size(); ++i) {
        if (out[i] != static_cast<float>(i / len)) return Status::internal("wrong value");
      }
    }
    return c->barrier();
  });
  for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << s.message();
}

TEST(SocketGroup, BroadcastsFromAnyRoot) {
  const int n = 3;
  auto results = run_ranks(n, 5.0, [&](std::unique_ptr<Communicator>& c) {
    for (int root : {0, 2}) {
      for (size_t len : {size_t{0}, size_t{13}, size_t{4099}}) {
        std::vector<std::byte> buf(len, std::byte{0});
        if (c->rank() == root) {
          for (size_t i = 0; i < len; ++i) buf[i] = static_cast<std::byte>((i * 7 + root) & 0xff);
        }
        MINFER_RETURN_IF_ERROR(c->broadcast(buf, root));
        for (size_t i = 0; i < len; ++i) {
          if (buf[i] != static_cast<std::byte>((i * 7 + root) & 0xff)) {
            return Status::internal("broadcast from " + std::to_string(root) + " differs");
          }
        }
      }
      // A message whose size only the root knows.
      std::vector<std::byte> msg(c->rank() == root ? 1000 + root : 3, std::byte{1});
      if (c->rank() == root) msg[5] = std::byte{42};
      MINFER_RETURN_IF_ERROR(broadcast_bytes(*c, msg, root));
      if (msg.size() != static_cast<size_t>(1000 + root) || msg[5] != std::byte{42}) {
        return Status::internal("broadcast_bytes from " + std::to_string(root) + " differs");
      }
    }
    return Status::ok();
  });
  for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << s.message();
}

TEST(SocketGroup, DisagreementsAreAnErrorOnEveryRank) {
  auto lengths = run_ranks(3, 5.0, [&](std::unique_ptr<Communicator>& c) {
    std::vector<float> mine(c->rank() == 1 ? 9 : 8, 1.0f);
    return c->all_reduce_sum(mine);
  });
  for (const Status& s : lengths) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
    EXPECT_TRUE(mentions(s, "(rank 0: 8, rank 1: 9, rank 2: 8)")) << s.message();
  }
  auto roots = run_ranks(3, 5.0, [&](std::unique_ptr<Communicator>& c) {
    std::vector<std::byte> buf(4);
    return c->broadcast(buf, c->rank() == 2 ? 1 : 0);
  });
  for (const Status& s : roots) EXPECT_TRUE(mentions(s, "different roots")) << s.message();
  auto ops = run_ranks(3, 5.0, [&](std::unique_ptr<Communicator>& c) {
    std::vector<float> mine(4, 1.0f);
    return c->rank() == 1 ? c->barrier() : c->all_reduce_sum(mine);
  });
  for (const Status& s : ops) {
    EXPECT_TRUE(mentions(s, "rank 0 called all_reduce_sum, rank 1 called barrier")) << s.message();
  }
}

// Waits (a few seconds at most) until `count` reaches `want`.
void wait_for_count(const std::atomic<int>& count, int want) {
  const auto give_up = Clock::now() + std::chrono::seconds(5);
  while (count.load() < want && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// This rank's next collective ends with an error naming `text` well before
// the timeout, and the group refuses later calls.
Status expect_error_naming(Communicator& c, const std::string& text) {
  const auto start = Clock::now();
  std::vector<float> mine(64, 1.0f);
  Status s = c.all_reduce_sum(mine);
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  if (s.is_ok()) return Status::internal("the collective completed");
  if (!mentions(s, text)) return Status::internal("error without '" + text + "': " + s.message());
  if (waited > 1.5) return Status::internal("took " + std::to_string(waited) + " s");
  if (c.barrier().is_ok()) return Status::internal("the failed group went on");
  return Status::ok();
}

TEST(SocketGroup, AFailedRankReleasesTheOthers) {
  for (int culprit : {0, 2}) {
    std::atomic<int> released{0};
    auto results = run_ranks(4, 2.0, [&](std::unique_ptr<Communicator>& c) -> Status {
      if (c->rank() == culprit) {
        c->fail(Status::resource_exhausted("out of memory"));
        // Stay connected until the others have read the notice: this test
        // is about fail(); a rank that vanishes is the next one's.
        wait_for_count(released, 3);
        return Status::ok();
      }
      Status s =
          expect_error_naming(*c, "rank " + std::to_string(culprit) + " failed: out of memory");
      ++released;
      return s;
    });
    for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << culprit << ": " << s.message();
  }
}

TEST(SocketGroup, ARankThatDisconnectsIsNamed) {
  for (int culprit : {0, 2}) {
    auto results = run_ranks(3, 2.0, [&](std::unique_ptr<Communicator>& c) -> Status {
      if (c->rank() == culprit) {
        c.reset();  // closes its connections, as an exiting process would
        return Status::ok();
      }
      return expect_error_naming(*c, "rank " + std::to_string(culprit) + " disconnected");
    });
    for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << culprit << ": " << s.message();
  }
}

TEST(SocketGroup, ASilentRankTimesOut) {
  std::atomic<int> late_done{0};
  auto results = run_ranks(2, 0.5, [&](std::unique_ptr<Communicator>& c) -> Status {
    std::vector<float> mine(4, 1.0f);
    if (c->rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1200));
      // Rank 0 has given up by now and told this rank so.
      Status late = c->all_reduce_sum(mine);
      ++late_done;
      return mentions(late, "no message from rank 1") ? Status::ok() : late;
    }
    const auto start = Clock::now();
    Status s = c->all_reduce_sum(mine);
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    wait_for_count(late_done, 1);  // connected while rank 1 reads the notice
    if (!mentions(s, "no message from rank 1")) return Status::internal("got: " + s.message());
    return waited < 1.1 ? Status::ok() : Status::internal("waited " + std::to_string(waited));
  });
  for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << s.message();
}

TEST(SocketGroup, MismatchedGroupSizesAreRefusedAtConnect) {
  auto results =
      run_ranks(3, 2.0, [](std::unique_ptr<Communicator>&) { return Status::ok(); }, {3, 3, 4});
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
    EXPECT_TRUE(mentions(s, "disagree on the group size: rank 0 has 3, rank 2 has 4"))
        << s.message();
  }
}

TEST(SocketGroup, RefusesBadArguments) {
  auto port0 = connect_socket_group("127.0.0.1:0", 0, 2, 1.0);
  ASSERT_FALSE(port0.is_ok());
  EXPECT_TRUE(mentions(port0.status(), "port 0 is not allowed")) << port0.message();
  EXPECT_FALSE(connect_socket_group("127.0.0.1", 0, 2, 1.0).is_ok());
  EXPECT_FALSE(connect_socket_group("127.0.0.1:5000", 2, 2, 1.0).is_ok());
  EXPECT_FALSE(connect_socket_group("127.0.0.1:5000", 0, 0, 1.0).is_ok());
  EXPECT_FALSE(connect_socket_group("127.0.0.1:5000", 1, 2, 0.0).is_ok());
  // Nobody listens: the worker gives up at the timeout.
  auto alone = connect_socket_group(loopback_address(), 1, 2, 0.3);
  ASSERT_FALSE(alone.is_ok());
  EXPECT_EQ(alone.status().code(), StatusCode::kUnavailable) << alone.message();
}

// Rank r's input for the multi-process test, and the contract's sum.
float process_input(int r, size_t i) {
  return static_cast<float>(r + 1) * 0.1f * (i + 1);
}

// One rank as its own process; exits 0 when its result is the sum in rank
// order, 1 otherwise.
[[noreturn]] void run_child(const std::string& address, int rank, int n) {
  auto c = connect_socket_group(address, rank, n, 5.0);
  if (!c.is_ok()) _exit(2);
  std::vector<float> data(1031);
  for (size_t i = 0; i < data.size(); ++i) data[i] = process_input(rank, i);
  if (!(*c)->all_reduce_sum(data).is_ok()) _exit(3);
  for (size_t i = 0; i < data.size(); ++i) {
    float want = process_input(0, i);
    for (int r = 1; r < n; ++r) want += process_input(r, i);
    if (std::memcmp(&want, &data[i], sizeof(float)) != 0) _exit(1);
  }
  _exit((*c)->barrier().is_ok() ? 0 : 4);
}

TEST(SocketGroup, RanksAsProcesses) {
  const int n = 3;
  const std::string address = loopback_address();
  std::vector<pid_t> children;
  for (int r = n - 1; r >= 0; --r) {  // rank 0 last: the workers wait for it
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) run_child(address, r, n);
    children.push_back(pid);
  }
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  for (pid_t pid : children) {
    int status = 0;
    pid_t done = 0;
    while ((done = waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (done == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "child " << pid << " did not finish";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "child " << pid << " ended with status " << status;
  }
}

}  // namespace
}  // namespace minfer::parallel
