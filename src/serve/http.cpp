#include "serve/http.h"

#include <strings.h>

namespace minfer::serve {

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && ::strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  }
  return "";
}

}  // namespace minfer::serve
