// A tensor-parallel group of ranks inside one process, one thread each: the
// communicator CPU ranks use (and tests use to check tensor-parallel
// numerics on any machine), with the contract of parallel/communicator.h.
//
// Collectives meet at a reusable barrier; all_reduce_sum has each rank add
// its own slice of the buffer over every rank's published copy in rank
// order into a shared result, which every rank then copies back, so the
// work is spread over the ranks and the bits are the same on all of them.
// broadcast has every rank copy from root's published buffer.
#pragma once

#include <memory>
#include <vector>

#include "parallel/communicator.h"

namespace minfer::parallel {

// n_ranks >= 1 communicators of one group; communicator r is rank r.
[[nodiscard]] Result<std::vector<std::unique_ptr<Communicator>>> make_local_group(int n_ranks);

}  // namespace minfer::parallel
