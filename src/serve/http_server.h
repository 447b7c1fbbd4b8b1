// HttpServer: HTTP/1.1 on Boost.Beast over one Asio event loop, built to stay
// responsive under hostile clients (docs/SERVER.md, "Limits"). It knows
// nothing of the API: endpoints are routes of (method, path) -> handler.
//
// Contract:
//   - Reading a request is event-driven: a connection that is slow, idle or
//     half-sent holds no thread. The whole request (headers and body) must
//     arrive within read_timeout_s of its first wait; past it a partial
//     request is answered 408, an idle connection just closed.
//   - Sizes: the header section at most max_header_bytes (431), the target
//     at most max_target_bytes (414), the body at most max_body_bytes
//     whether framed by Content-Length or chunked (413: the connection is
//     closed, nothing more is read). A malformed request (bad start line,
//     header, Content-Length or chunk) is 400; a POST, PUT or PATCH with
//     neither Content-Length nor chunked framing is 411; a path whose routes
//     take other methods is 405 with Allow (whatever the method); an unknown
//     path is 404, or 501 when the method too is one HTTP does not define.
//     Every error the transport raises carries the body ErrorBody(status,
//     message) builds. After a framing error the connection closes.
//   - Connections: at most max_connections in all and
//     max_connections_per_client per peer address. At a cap the server closes
//     the connection (of that peer for its cap, of anyone for the total)
//     that has waited longest for its request, to make room; when every
//     connection is busy with a request the new one is answered 503 and
//     closed.
//   - A route runs inline (on the I/O thread: only quick, non-blocking
//     handlers) or on one of `workers` threads. With every worker busy a
//     request for one is answered 503 at once, with Retry-After.
//   - While a worker handles a request, the connection is watched: the
//     client closing it sets HttpReply::client_gone().
//   - HEAD is answered as GET without the body; Range is not supported
//     (every answer is whole: no partial or multi-range replies).
//   - stop(grace): no new connections; handlers still running have `grace`
//     to finish (their last writes go out), then every connection is closed
//     and the loop ends. Bounded whatever the sockets do.
// Threading: serve() runs the event loop on the calling thread; route(),
// set_filter() and set_error_body() before serve(); stop() from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "serve/http.h"

namespace minfer::serve {

struct HttpLimits {
  size_t max_body_bytes = 8 << 20;
  size_t max_header_bytes = 16 << 10;
  size_t max_target_bytes = 8 << 10;
  int read_timeout_s = 30;    // a whole request, headers and body
  int write_timeout_s = 600;  // one response write (a chunk of a stream)
  int max_connections = 1024;
  int max_connections_per_client = 256;
  int workers = 64;
};

class HttpServer {
 public:
  enum class Runs { kInline, kOnWorker };
  // The body of an error the transport answers itself (e.g. OpenAI's error
  // object); the content type is application/json.
  using ErrorBody = std::function<std::string(int status, const std::string& message)>;
  // Runs before routing, inline; true when it answered the request (a 401,
  // a preflight, a 503 while loading).
  using Filter = std::function<bool(const HttpRequest&, HttpReply&)>;

  explicit HttpServer(HttpLimits limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void route(const std::string& method, const std::string& path, HttpHandler handler, Runs where);
  void set_filter(Filter filter);
  void set_error_body(ErrorBody make);

  // Binds and listens (the system's backlog); port 0 takes a free one.
  [[nodiscard]] Status bind(const std::string& host, int port);
  int port() const;
  // Serves until stop().
  [[nodiscard]] Status serve();
  void stop(std::chrono::milliseconds grace);
  // Requests being handled on workers now.
  int busy_workers() const;

  struct Impl;  // the loop, the routes and the connections (http_server.cpp)

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace minfer::serve
