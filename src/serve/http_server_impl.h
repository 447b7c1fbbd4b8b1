// Inside the HTTP transport (serve/http_server.h): the server's state and
// one connection, shared by http_server.cpp (the loop, accepting, the caps)
// and http_connection.cpp (reading, dispatching, writing). Included by those
// two files only: it brings in Boost.Asio and Beast.
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "serve/http_server.h"

namespace minfer::serve::transport {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Route {
  std::string method, path;
  HttpHandler handler;
  HttpServer::Runs where;
};

// What a handler answered, before it is written.
struct Response {
  int status = 500;
  std::string content_type;
  std::string body;
  HttpHeaders headers;
};

class Connection;

// A request the transport answers itself (then closes the connection).
struct Refusal {
  int status = 0;  // 0: close without an answer
  std::string message;
};

}  // namespace minfer::serve::transport

namespace minfer::serve {
struct HttpServer::Impl {
  explicit Impl(HttpLimits l) : limits(l), pool(static_cast<size_t>(std::max(1, l.workers))) {}

  HttpLimits limits;
  std::vector<transport::Route> routes;
  Filter filter;
  ErrorBody error_body = [](int, const std::string& m) { return m; };
  std::atomic<int> busy{0};
  std::atomic<bool> stopping{false};
  std::atomic<bool> loop_ended{false};
  std::atomic<bool> serving{false};
  int port = 0;

  // The I/O thread's: the open connections, by peer. Declared before the
  // loop so that they outlive the handlers it destroys.
  std::unordered_set<transport::Connection*> connections;
  std::unordered_map<std::string, int> per_client;

  transport::net::io_context ioc{1};
  transport::tcp::acceptor acceptor{ioc};
  transport::net::steady_timer accept_retry{ioc};
  std::optional<transport::net::executor_work_guard<transport::net::io_context::executor_type>>
      guard;
  transport::net::thread_pool pool;

  void accept();
  void on_accept(const transport::beast::error_code& ec, transport::tcp::socket socket);
  bool make_room(const std::string& client);
  transport::Connection* oldest_waiting(const std::string* client) const;
  void reject(transport::tcp::socket socket);
  void close_all();
  const transport::Route* find(const std::string& method, const std::string& path,
                               std::string& allow) const;
  std::string error_json(int status, const std::string& message) const {
    return error_body(status, message);
  }
};

}  // namespace minfer::serve

namespace minfer::serve::transport {

// The connection: reads requests, runs their handlers, writes their
// answers. Every member is touched on the I/O thread only, except gone_
// (read by a worker's HttpReply).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class State { kReading, kHandling, kWriting, kClosed };

  Connection(HttpServer::Impl* server, tcp::socket socket, std::string client)
      : server_(server),
        socket_(std::move(socket)),
        timer_(server->ioc),
        buffer_(server->limits.max_header_bytes + (64 << 10)),
        client_(std::move(client)) {}

  void start() { read_request(); }
  void close();
  // The server needs the room: closed, without an answer.
  void evict() { close(); }
  bool waiting() const { return state_ == State::kReading; }
  Clock::time_point waiting_since() const { return waiting_since_; }
  const std::string& client() const { return client_; }
  std::shared_ptr<std::atomic<bool>> gone() const { return gone_; }

  // The answer of the current request (I/O thread).
  void respond(Response r);
  // A chunked answer: the head, then each chunk, then its end; `done` gets
  // whether the write went out.
  void stream_begin(Response head, std::function<void(bool)> done);
  void stream_chunk(std::shared_ptr<std::string> data, std::function<void(bool)> done);
  void stream_end(std::function<void(bool)> done);

 private:
  void read_request();
  void on_header(const beast::error_code& ec);
  void on_body(const beast::error_code& ec);
  void refuse(const Refusal& r);
  void dispatch();
  void run_on_worker(const Route& route, HttpRequest req, HttpHeaders headers);
  HttpRequest take_request();  // moves the body out of the parser
  void write(std::shared_ptr<bhttp::response<bhttp::string_body>> res);
  void finish(bool ok);
  void watch();
  void linger_close();
  void drain();
  void arm(int seconds);
  void on_timeout();

  HttpServer::Impl* server_;
  tcp::socket socket_;
  net::steady_timer timer_;
  uint64_t timer_generation_ = 0;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::shared_ptr<bhttp::response<bhttp::empty_body>> stream_head_;
  std::shared_ptr<bhttp::response_serializer<bhttp::empty_body>> stream_serializer_;
  std::string client_;
  State state_ = State::kReading;
  Clock::time_point waiting_since_ = Clock::now();
  bool timed_out_ = false;
  bool keep_alive_ = false;
  bool head_ = false;      // a HEAD request: no body goes out
  bool watching_ = false;  // a read is pending while a worker handles the request
  bool next_after_watch_ = false;
  bool lingering_ = false;
  bool registered_ = true;
  std::shared_ptr<std::atomic<bool>> gone_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace minfer::serve::transport
