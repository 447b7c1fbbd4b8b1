// Several matrix products of one launch: up to three segments, each with
// the arguments of its own launch, side by side along grid x (segment i
// takes blocks [end[i-1], end[i])). A block finds its segment and its
// block index within it and then computes exactly what it would in a
// launch of that segment alone: stacking changes the launch count, never a
// sum (mmq.cu stacks a layer's q, k and v products on one input).
#pragma once

#include <cstdint>

namespace minfer::cuda::mmq {

template <class Args>
struct Segments {
  static constexpr int kMax = 3;
  Args seg[kMax];
  unsigned end[kMax] = {};  // cumulative row blocks
  int n = 0;
  // Grid x walks the token groups and grid y the blocks above (else the
  // other way round); a block computes the same either way.
  bool tokens_fastest = false;

  // This block's segment; `bx` becomes its block index within it.
  __device__ __forceinline__ const Args& pick(unsigned& bx) const {
    int i = 0;
    while (i + 1 < n && bx >= end[i]) ++i;
    if (i > 0) bx -= end[i - 1];
    return seg[i];
  }
};

}  // namespace minfer::cuda::mmq
