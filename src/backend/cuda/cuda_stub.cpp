// The CUDA entry points of a build without CUDA (MINFER_CUDA=OFF): no device.
#include "backend/cuda/cuda_backend.h"

namespace minfer::cuda {

bool available() {
  return false;
}

std::string unavailable_reason() {
  return "built without CUDA (MINFER_CUDA=OFF)";
}

Result<std::unique_ptr<backend::Backend>> create_backend(const model::Weights&, const Options&) {
  return Status::unavailable(unavailable_reason());
}

}  // namespace minfer::cuda
