// Fuzzes the GGUF reader: any input must parse or fail with an error, never crash
// or read outside the buffer (the buffer is an exactly-sized heap copy, so ASan
// sees any overrun). Accepted files are walked fully.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gguf/file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace minfer::gguf;
  auto f = File::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
  if (!f.is_ok()) return 0;
  const File& file = **f;
  size_t sink = 0;
  for (const auto& [key, value] : file.metadata()) {
    sink += value.display().size() + key.size();
    (void)value.to_u64();
    (void)value.to_i64();
    (void)value.to_f64();
    (void)file.get_u32(key);
    (void)file.get_string_array(key);
    (void)file.get_i32_array(key);
    (void)file.get_f32_array(key);
  }
  for (const TensorInfo& t : file.tensors()) {
    sink += static_cast<size_t>(t.n_elements());
    if (t.nbytes > 0) sink += t.data[0] + t.data[t.nbytes - 1];
    if (file.find_tensor(t.name) != &t) __builtin_trap();
  }
  (void)file.total_tensor_bytes();
  return sink == 1 ? 1 : 0;
}
