#include "serve/json_reply.h"

#include <algorithm>

#include "serve/openai.h"

namespace minfer::serve {

using nlohmann::json;

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

double clamp_logprob(float lp) {
  return std::max(static_cast<double>(lp), -9999.0);
}

json bytes_of(const std::string& piece) {
  json b = json::array();
  for (unsigned char c : piece) b.push_back(static_cast<int>(c));
  return b;
}

void send_json(HttpReply& reply, int status, const json& body) {
  reply.send(status, "application/json", dump_json(body));
}

void send_error(HttpReply& reply, const Status& s) {
  const int status = http_status(s);
  if (status == 503) reply.add_header("Retry-After", "1");
  send_json(reply, status, error_body(s));
}

std::string error_json(int status, const std::string& message) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 429 ? "rate_limit_error"
                     : status < 500  ? "invalid_request_error"
                                     : "server_error";
  return dump_json({{"error", {{"message", message}, {"type", type}, {"code", status}}}});
}

}  // namespace minfer::serve
