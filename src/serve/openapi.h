// The OpenAPI 3.0 description of the server's endpoints, served at
// GET /openapi.json: what clients and API fuzzers (schemathesis, in the
// tests) read to know the request bodies and the replies.
//
// Contract: a valid OpenAPI 3.0.3 document (JSON) naming every endpoint
// server.h lists, with the request fields openai.h reads and their types
// and ranges; replies are described by status code (the error object for
// 4xx/5xx). The API key, when set, is an http bearer security scheme; the
// embeddings endpoints are described when the server answers them.
#pragma once

#include <string>

namespace minfer::serve {

std::string openapi_document(bool api_key, bool embeddings = false);

}  // namespace minfer::serve
