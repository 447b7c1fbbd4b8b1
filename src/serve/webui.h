// The web chat page `minfer serve` answers GET / with: src/serve/webui/index.html,
// one self-contained HTML file (its CSS and JavaScript inline) that fetches
// nothing from any other host and talks to the server through the OpenAI API
// (GET /v1/models, POST /v1/chat/completions streamed). It is embedded in the
// binary at build time (src/serve/webui/embed.cmake turns it into a generated
// source), so the server needs no files at run time.
#pragma once

#include <string_view>

namespace minfer::serve {

// The page's bytes (UTF-8 HTML), valid for the whole program; never empty.
// The Content-Security-Policy the server sends with it (connect-src 'self',
// inline script and style only) is what the page is written for.
std::string_view web_page();

}  // namespace minfer::serve
