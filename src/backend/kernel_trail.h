// The kernel trail: the last 16 kernels a GPU backend launched or recorded,
// for the message of a wait that timed out or a device that failed
// (docs/ARCHITECTURE.md, "Contracts" 5). One trail for every GPU backend, so
// their errors name the recent kernels the same way.
//
// Contract: record() keeps the newest kCapacity entries; describe() lists
// them oldest first ("last 3 kernels (oldest first): a, b, c"), or says that
// none was recorded. Entries are labels such as "matmul.q4_0 'blk.0.attn_q'".
// Threading: not shared.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace minfer::backend {

class KernelTrail {
 public:
  static constexpr size_t kCapacity = 16;

  void record(std::string entry);
  std::string describe() const;
  size_t size() const { return count_; }

 private:
  std::array<std::string, kCapacity> ring_;
  size_t next_ = 0, count_ = 0;
};

}  // namespace minfer::backend
