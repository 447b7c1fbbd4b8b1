// A communicator: the ranks of one tensor-parallel group and the collective
// operations they use to combine their partial results (docs/PARALLEL.md).
//
// Contract: every rank of a group calls the same collectives in the same
// order with buffers of the same length; a call returns when every rank has
// made it. all_reduce_sum leaves every rank's buffer holding the elementwise
// sum over ranks, added in rank order ((r0 + r1) + r2) + ..., so every rank
// holds the same bits and the result does not depend on timing or on which
// rank arrives first. all_gather leaves rank r's n values at [r*n, (r+1)*n)
// of every rank's output. broadcast leaves every rank's buffer holding the
// bytes root passed. A call whose length disagrees with another
// rank's, or a group one of whose ranks has failed (fail()), returns an
// error on every rank instead of waiting forever; the group is then unusable.
// So does a broadcast whose ranks name different roots or a root that is not
// a rank of the group.
// Threading: one Communicator object per rank, each used by one thread at a
// time; the objects of one group are safe to use concurrently.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "base/status.h"

namespace minfer::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  [[nodiscard]] virtual Status all_reduce_sum(std::span<float> data) = 0;
  [[nodiscard]] virtual Status all_gather(std::span<const float> in, std::span<float> out) = 0;
  [[nodiscard]] virtual Status barrier() = 0;
  // Every rank passes a buffer of the same length; root's bytes end up in
  // all of them.
  [[nodiscard]] virtual Status broadcast(std::span<std::byte> data, int root) = 0;
  // This rank gives up (its own work failed): every rank's pending and
  // later collectives return an error naming it and `why`.
  virtual void fail(const Status& why) = 0;
};

// A message of any length from root to every rank: two broadcasts, the size
// (root's data.size()) and then the bytes. Ranks other than root resize
// `data` to root's size, whatever it held before; root's is left as it is.
[[nodiscard]] Status broadcast_bytes(Communicator& comm, std::vector<std::byte>& data, int root);

}  // namespace minfer::parallel
