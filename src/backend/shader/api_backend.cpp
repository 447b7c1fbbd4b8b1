#include "backend/shader/api_backend.h"

#include <utility>

namespace minfer::shader {

Status status(const ApiKind& api, const Options& options) {
  if (api.disabled(options)) {
    return Status::unavailable("disabled by " + std::string(api.disabled_by));
  }
  return api.device(options).status();
}

std::string unavailable_reason(const ApiKind& api, const Options& options) {
  const Status s = status(api, options);
  return s.code() == StatusCode::kUnavailable ? s.message() : "";
}

Result<std::unique_ptr<backend::Backend>> create_backend(const ApiKind& api,
                                                         const model::Weights& weights,
                                                         const Options& options) {
  MINFER_RETURN_IF_ERROR(status(api, options).with_context(std::string(api.name)));
  MINFER_ASSIGN_OR_RETURN(std::shared_ptr<Device> device, api.device(options));
  return create_shader_backend(std::string(api.name), std::move(device), weights, options,
                               api.cache_policy);
}

}  // namespace minfer::shader
