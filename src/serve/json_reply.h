// JSON answers through an HttpReply: a body, or the OpenAI error object
// ({"error": {"message", "type", "code"}}, its code the HTTP status).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "base/status.h"
#include "serve/http.h"

namespace minfer::serve {

void send_json(HttpReply& reply, int status, const nlohmann::json& body);
// The Status's HTTP status (serve/openai.h) and its error object; a 503
// adds Retry-After.
void send_error(HttpReply& reply, const Status& s);
// The error object of a status the transport raises itself (408, 411, ...).
std::string error_json(int status, const std::string& message);
// Compact JSON; invalid UTF-8 in strings is replaced rather than thrown on.
std::string dump_json(const nlohmann::json& j);
// A log-probability as the APIs write it: -9999 where the probability is 0
// (JSON has no -inf).
double clamp_logprob(float lp);
// A token's bytes as a list of numbers (a piece may split a UTF-8 sequence).
nlohmann::json bytes_of(const std::string& piece);

}  // namespace minfer::serve
