// The seam between the HTTP transport (serve/http_server.h) and the
// endpoints (serve/server.cpp, serve/completion.cpp): a request as it
// arrived, whole, and the reply a handler answers through.
//
// Contract:
//   - HttpRequest holds a complete request: the body has been read to its
//     end (the transport enforces the size and time limits before a handler
//     runs). Header names compare case-insensitively.
//   - HttpReply: a handler answers exactly once, either send() (a whole
//     response) or begin_stream() + write()... + end() (a chunked one).
//     add_header() before either adds a header to whatever is sent (CORS).
//     write() returns false when the chunk could not be delivered (the client
//     went away, the write ran past its deadline, the server is stopping):
//     the handler stops and cancels its work. client_gone() turns true when
//     the client closes its connection while the request is being worked on
//     (a non-streamed completion polls it to cancel its sequences).
//     A handler that returns without answering gets a 500 error body.
// Threading: a handler runs on one thread (the transport's I/O thread for
// quick endpoints, a worker for the rest); an HttpReply is used by that
// thread only, except client_gone(), which any thread may read.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace minfer::serve {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // as sent: "GET", "POST", ...
  std::string path;    // the target without its query
  std::string query;   // after '?', "" when none
  HttpHeaders headers;
  std::string body;
  std::string client;  // the peer's address

  // The first header of that name (any case); "" when absent.
  std::string header(std::string_view name) const;
};

class HttpReply {
 public:
  virtual ~HttpReply() = default;
  virtual void add_header(std::string name, std::string value) = 0;
  virtual void send(int status, std::string_view content_type, std::string body) = 0;
  // A 200 with a chunked body of `content_type`; false if the client is gone.
  virtual bool begin_stream(std::string_view content_type) = 0;
  virtual bool write(std::string_view chunk) = 0;
  virtual void end() = 0;
  virtual bool client_gone() const = 0;
  virtual bool answered() const = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpReply&)>;

}  // namespace minfer::serve
