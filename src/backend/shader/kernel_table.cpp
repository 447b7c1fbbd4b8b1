#include "backend/shader/kernel_table.h"

namespace minfer::shader {

std::optional<uint32_t> find_kernel(std::string_view name, std::string_view variant) {
  const std::span<const KernelInfo> table = embedded_kernels();
  for (uint32_t i = 0; i < table.size(); ++i) {
    if (table[i].name == name && table[i].variant == variant) return i;
  }
  return std::nullopt;
}

}  // namespace minfer::shader
