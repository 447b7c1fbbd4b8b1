#include "parallel/local_group.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>

namespace minfer::parallel {
namespace {

// What the ranks of one group share: a barrier that counts generations, the
// buffers each rank publishes for the collective in progress, and the
// first failure.
class Group {
 public:
  explicit Group(int n) : n_(n), data_(static_cast<size_t>(n)), scratch_(static_cast<size_t>(n)) {}

  int size() const { return n_; }

  // Returns when all n ranks have arrived, or an error once any has failed.
  Status arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!failure_.is_ok()) return failure_;
    const uint64_t gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return Status::ok();
    }
    cv_.wait(lock, [&] { return generation_ != gen || !failure_.is_ok(); });
    return generation_ != gen ? Status::ok() : failure_;
  }

  void fail(const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.is_ok()) failure_ = why.is_ok() ? Status::internal("a rank failed") : why;
    cv_.notify_all();
  }

  // Rank r's buffers for the collective in progress (written before the
  // first barrier of a collective, read by every rank after it).
  struct Published {
    const float* data = nullptr;
    size_t n = 0;
    size_t out_n = 0;
    const std::byte* bytes = nullptr;  // broadcast's buffer
    int root = 0;                      // broadcast's root
  };
  Published& published(int r) { return data_[static_cast<size_t>(r)]; }
  std::vector<float>& scratch(int r) { return scratch_[static_cast<size_t>(r)]; }

 private:
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  Status failure_;
  std::vector<Published> data_;
  std::vector<std::vector<float>> scratch_;
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<Group> g, int rank) : g_(std::move(g)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return g_->size(); }

  Status all_reduce_sum(std::span<float> data) override {
    g_->published(rank_) = {data.data(), data.size(), 0};
    MINFER_RETURN_IF_ERROR(g_->arrive());
    MINFER_RETURN_IF_ERROR(check_lengths("all_reduce_sum", data.size()));
    const auto [begin, end] = chunk(rank_, data.size());
    std::vector<float>& mine = g_->scratch(rank_);
    mine.resize(end - begin);
    for (size_t i = begin; i < end; ++i) {
      float acc = g_->published(0).data[i];
      for (int r = 1; r < size(); ++r) acc += g_->published(r).data[i];
      mine[i - begin] = acc;
    }
    MINFER_RETURN_IF_ERROR(g_->arrive());  // every chunk summed; inputs no longer read
    for (int r = 0; r < size(); ++r) {
      const auto [b, e] = chunk(r, data.size());
      std::copy(g_->scratch(r).begin(), g_->scratch(r).begin() + (e - b), data.begin() + b);
    }
    return g_->arrive();  // no rank reuses its scratch while another copies from it
  }

  Status all_gather(std::span<const float> in, std::span<float> out) override {
    g_->published(rank_) = {in.data(), in.size(), out.size()};
    MINFER_RETURN_IF_ERROR(g_->arrive());
    MINFER_RETURN_IF_ERROR(check_lengths("all_gather", in.size()));
    for (int r = 0; r < size(); ++r) {
      if (g_->published(r).out_n != in.size() * static_cast<size_t>(size())) {
        return fail_all(Status::invalid_argument(
            "all_gather: rank " + std::to_string(r) + " gave an output of " +
            std::to_string(g_->published(r).out_n) + " values for " + std::to_string(size()) +
            " ranks of " + std::to_string(in.size())));
      }
    }
    for (int r = 0; r < size(); ++r) {
      const float* src = g_->published(r).data;
      std::copy(src, src + in.size(), out.begin() + static_cast<size_t>(r) * in.size());
    }
    return g_->arrive();  // inputs no longer read
  }

  Status barrier() override { return g_->arrive(); }

  Status broadcast(std::span<std::byte> data, int root) override {
    g_->published(rank_) = {nullptr, data.size(), 0, data.data(), root};
    MINFER_RETURN_IF_ERROR(g_->arrive());
    MINFER_RETURN_IF_ERROR(check_lengths("broadcast", data.size()));
    MINFER_RETURN_IF_ERROR(check_roots(root));
    if (rank_ != root && !data.empty()) {
      std::memcpy(data.data(), g_->published(root).bytes, data.size());
    }
    return g_->arrive();  // root's buffer no longer read
  }

  void fail(const Status& why) override {
    g_->fail(why.is_ok() ? Status::internal("rank " + std::to_string(rank_) + " failed")
                         : Status(why).with_context("rank " + std::to_string(rank_) + " failed"));
  }

 private:
  // Rank r's share [begin, end) of n elements: contiguous, in rank order.
  std::pair<size_t, size_t> chunk(int r, size_t n) const {
    const size_t s = static_cast<size_t>(size());
    return {n * static_cast<size_t>(r) / s, n * static_cast<size_t>(r + 1) / s};
  }

  // Every rank sees the same published lengths, so all of them agree on
  // the error, and the group is marked failed for whoever comes later.
  Status check_lengths(const char* what, size_t n) {
    bool same = true;
    std::string counts;
    for (int r = 0; r < size(); ++r) {
      same = same && g_->published(r).n == n;
      counts +=
          (r ? ", rank " : "rank ") + std::to_string(r) + ": " + std::to_string(g_->published(r).n);
    }
    if (same) return Status::ok();
    return fail_all(Status::invalid_argument(std::string(what) +
                                             ": ranks gave different lengths (" + counts + ")"));
  }

  // Like check_lengths, for broadcast's roots: the same on every rank and a
  // rank of the group.
  Status check_roots(int root) {
    bool same = true;
    std::string roots;
    for (int r = 0; r < size(); ++r) {
      same = same && g_->published(r).root == root;
      roots += (r ? ", rank " : "rank ") + std::to_string(r) + ": " +
               std::to_string(g_->published(r).root);
    }
    if (!same) {
      return fail_all(
          Status::invalid_argument("broadcast: ranks gave different roots (" + roots + ")"));
    }
    if (root < 0 || root >= size()) {
      return fail_all(Status::invalid_argument("broadcast: root " + std::to_string(root) +
                                               " is not a rank of a group of " +
                                               std::to_string(size())));
    }
    return Status::ok();
  }

  Status fail_all(Status s) {
    g_->fail(s);
    return s;
  }

  std::shared_ptr<Group> g_;
  int rank_;
};

}  // namespace

Result<std::vector<std::unique_ptr<Communicator>>> make_local_group(int n_ranks) {
  if (n_ranks < 1) {
    return Status::invalid_argument("a group needs at least one rank, got " +
                                    std::to_string(n_ranks));
  }
  auto group = std::make_shared<Group>(n_ranks);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < n_ranks; ++r) out.push_back(std::make_unique<LocalCommunicator>(group, r));
  return out;
}

}  // namespace minfer::parallel
