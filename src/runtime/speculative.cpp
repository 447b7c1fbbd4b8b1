#include "runtime/speculative.h"

#include <string>

namespace minfer::runtime {

Status check(const SpeculativeParams& p) {
  if (p.n_max < 0 || p.n_max > kMostDrafted) {
    return Status::invalid_argument("speculative.n_max " + std::to_string(p.n_max) +
                                    " must be 0 (off) to " + std::to_string(kMostDrafted));
  }
  if (p.n_min < 0 || p.n_min > kMostDrafted) {
    return Status::invalid_argument("speculative.n_min " + std::to_string(p.n_min) +
                                    " must be 0 to " + std::to_string(kMostDrafted));
  }
  if (!(p.p_min >= 0.0f && p.p_min <= 1.0f)) {
    return Status::invalid_argument("speculative.p_min " + std::to_string(p.p_min) +
                                    " must be in [0, 1]");
  }
  return Status::ok();
}

}  // namespace minfer::runtime
