#include "backend/shader/host_parts.h"

#include <algorithm>
#include <numeric>

namespace minfer::shader {

HostPartPlan plan_host_parts(std::span<const HostRange> ranges, uint64_t page, uint64_t max_bytes) {
  HostPartPlan plan;
  plan.part_of.assign(ranges.size(), HostPartPlan::kNoPart);
  const auto down = [page](uintptr_t a) { return a & ~static_cast<uintptr_t>(page - 1); };
  const auto up = [page](uintptr_t a) {
    return (a + page - 1) & ~static_cast<uintptr_t>(page - 1);
  };
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ranges[a].begin != ranges[b].begin ? ranges[a].begin < ranges[b].begin : a < b;
  });
  for (size_t i : order) {
    const HostRange& r = ranges[i];
    if (r.end <= r.begin) continue;
    const uintptr_t begin = down(r.begin), end = up(r.end);
    if (end - begin > max_bytes) continue;
    if (!plan.parts.empty()) {
      HostRange& last = plan.parts.back();
      const uintptr_t joined_end = std::max(last.end, end);
      if (begin <= last.end && joined_end - last.begin <= max_bytes) {
        last.end = joined_end;
        plan.part_of[i] = plan.parts.size() - 1;
        continue;
      }
    }
    plan.parts.push_back({begin, end});
    plan.part_of[i] = plan.parts.size() - 1;
  }
  return plan;
}

}  // namespace minfer::shader
