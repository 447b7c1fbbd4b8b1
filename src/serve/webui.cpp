#include "serve/webui.h"

#include <cstddef>

namespace minfer::serve {
namespace embedded {
// Defined in the source generated from webui/index.html (the root CMakeLists.txt).
extern const char kWebPage[];
extern const std::size_t kWebPage_size;
}  // namespace embedded

std::string_view web_page() {
  return {embedded::kWebPage, embedded::kWebPage_size};
}

}  // namespace minfer::serve
