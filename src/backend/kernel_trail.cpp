#include "backend/kernel_trail.h"

#include <utility>

namespace minfer::backend {

void KernelTrail::record(std::string entry) {
  ring_[next_] = std::move(entry);
  next_ = (next_ + 1) % kCapacity;
  if (count_ < kCapacity) ++count_;
}

std::string KernelTrail::describe() const {
  if (count_ == 0) return "no kernel dispatched yet";
  std::string out = "last " + std::to_string(count_) + " kernels (oldest first): ";
  for (size_t i = 0; i < count_; ++i) {
    if (i > 0) out += ", ";
    out += ring_[(next_ + kCapacity - count_ + i) % kCapacity];
  }
  return out;
}

}  // namespace minfer::backend
