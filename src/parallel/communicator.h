// A communicator: the ranks of one tensor-parallel group and the collective
// operations they use to combine their partial results (docs/PARALLEL.md).
//
// Contract: every rank of a group calls the same collectives in the same
// order with buffers of the same length; a call returns when every rank has
// made it. all_reduce_sum leaves every rank's buffer holding the elementwise
// sum over ranks, added in rank order ((r0 + r1) + r2) + ..., so every rank
// holds the same bits and the result does not depend on timing or on which
// rank arrives first. all_gather leaves rank r's n values at [r*n, (r+1)*n)
// of every rank's output. A call whose length disagrees with another
// rank's, or a group one of whose ranks has failed (fail()), returns an
// error on every rank instead of waiting forever; the group is then unusable.
// Threading: one Communicator object per rank, each used by one thread at a
// time; the objects of one group are safe to use concurrently.
#pragma once

#include <span>

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
  // This rank gives up (its own work failed): every rank's pending and
  // later collectives return an error naming it and `why`.
  virtual void fail(const Status& why) = 0;
};

}  // namespace minfer::parallel
