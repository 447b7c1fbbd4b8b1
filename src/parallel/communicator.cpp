#include "parallel/communicator.h"

#include <array>
#include <cstdint>

namespace minfer::parallel {

Status broadcast_bytes(Communicator& comm, std::vector<std::byte>& data, int root) {
  // The size goes as 8 little-endian bytes, so ranks of any word size agree.
  std::array<std::byte, 8> size_bytes{};
  const uint64_t root_size = comm.rank() == root ? data.size() : 0;
  for (size_t i = 0; i < size_bytes.size(); ++i) {
    size_bytes[i] = static_cast<std::byte>((root_size >> (8 * i)) & 0xff);
  }
  MINFER_RETURN_IF_ERROR(comm.broadcast(size_bytes, root));
  uint64_t size = 0;
  for (size_t i = 0; i < size_bytes.size(); ++i) {
    size |= static_cast<uint64_t>(size_bytes[i]) << (8 * i);
  }
  if (comm.rank() != root) data.resize(static_cast<size_t>(size));
  return comm.broadcast(data, root);
}

}  // namespace minfer::parallel
