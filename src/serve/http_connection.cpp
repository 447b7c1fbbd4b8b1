#include <array>
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "serve/http_server_impl.h"

namespace minfer::serve::transport {
namespace {

// Read errors as HTTP statuses (0: the peer left or timed out before sending
// a request, so there is nobody to answer).
Refusal refusal_of(const beast::error_code& ec, bool timed_out, bool got_some,
                   const HttpLimits& limits) {
  if (timed_out) {
    if (!got_some) return {};
    return {408, "the request did not arrive within " + std::to_string(limits.read_timeout_s) +
                     " s (--read-timeout)"};
  }
  if (ec == bhttp::error::body_limit) {
    return {413, "the body is too large (more than " + std::to_string(limits.max_body_bytes) +
                     " bytes)"};
  }
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
    return {431, "the header section is larger than " + std::to_string(limits.max_header_bytes) +
                     " bytes"};
  }
  if (ec.category() == bhttp::make_error_code(bhttp::error::end_of_stream).category() &&
      ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    return {400, "malformed HTTP request: " + ec.message()};
  }
  return {};
}

std::string str(beast::string_view s) {
  return std::string(s.data(), s.size());
}

Response error_response(const HttpServer::Impl& server, int status, const std::string& message,
                        HttpHeaders headers = {}) {
  Response r{status, "application/json", server.error_json(status, message), std::move(headers)};
  if (status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

// An answer collected on the I/O thread (quick handlers and the filter).
class InlineReply : public HttpReply {
 public:
  explicit InlineReply(HttpHeaders headers) { r_.headers = std::move(headers); }
  void add_header(std::string name, std::string value) override {
    r_.headers.emplace_back(std::move(name), std::move(value));
  }
  void send(int status, std::string_view content_type, std::string body) override {
    if (answered_) return;
    answered_ = true;
    r_.status = status;
    r_.content_type = std::string(content_type);
    r_.body = std::move(body);
  }
  bool begin_stream(std::string_view) override { return false; }  // inline handlers never stream
  bool write(std::string_view) override { return false; }
  void end() override {}
  bool client_gone() const override { return false; }
  bool answered() const override { return answered_; }
  Response take() { return std::move(r_); }

 private:
  Response r_;
  bool answered_ = false;
};

// An answer from a worker thread: each step is posted to the I/O thread;
// a stream's steps wait for their write (the client's pace is the
// stream's), at most the write deadline.
class WorkerReply : public HttpReply {
 public:
  WorkerReply(std::shared_ptr<Connection> conn, HttpServer::Impl* server, HttpHeaders headers)
      : conn_(std::move(conn)),
        server_(server),
        headers_(std::move(headers)),
        gone_(conn_->gone()) {}

  void add_header(std::string name, std::string value) override {
    headers_.emplace_back(std::move(name), std::move(value));
  }
  void send(int status, std::string_view content_type, std::string body) override {
    if (answered_) return;
    answered_ = true;
    Response r{status, std::string(content_type), std::move(body), std::move(headers_)};
    net::post(server_->ioc, [c = conn_, r = std::move(r)]() mutable { c->respond(std::move(r)); });
  }
  bool begin_stream(std::string_view content_type) override {
    if (answered_) return false;
    answered_ = streaming_ = true;
    Response head{200, std::string(content_type), "", std::move(headers_)};
    return wait_for([c = conn_, head = std::move(head)](std::function<void(bool)> done) mutable {
      c->stream_begin(std::move(head), std::move(done));
    });
  }
  bool write(std::string_view chunk) override {
    if (!streaming_ || ended_ || gone_->load()) return false;
    if (chunk.empty()) return true;
    auto data = std::make_shared<std::string>(chunk);
    return wait_for([c = conn_, data](std::function<void(bool)> done) {
      c->stream_chunk(data, std::move(done));
    });
  }
  void end() override {
    if (!streaming_ || ended_) return;
    ended_ = true;
    (void)wait_for([c = conn_](std::function<void(bool)> done) { c->stream_end(std::move(done)); });
  }
  bool client_gone() const override { return gone_->load(); }
  bool answered() const override { return answered_; }

 private:
  bool wait_for(std::function<void(std::function<void(bool)>)> op);

  std::shared_ptr<Connection> conn_;
  HttpServer::Impl* server_;
  HttpHeaders headers_;
  std::shared_ptr<std::atomic<bool>> gone_;
  bool answered_ = false;
  bool streaming_ = false;
  bool ended_ = false;
};

bool WorkerReply::wait_for(std::function<void(std::function<void(bool)>)> op) {
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    bool ok = false;
  };
  auto w = std::make_shared<Waiter>();
  net::post(server_->ioc, [op = std::move(op), w] {
    op([w](bool ok) {
      {
        std::lock_guard lock(w->mu);
        w->done = true;
        w->ok = ok;
      }
      w->cv.notify_all();
    });
  });
  // The I/O thread enforces the write deadline; this bound only covers a
  // loop that ended before running the step.
  const auto limit = Clock::now() + std::chrono::seconds(server_->limits.write_timeout_s + 5);
  std::unique_lock lock(w->mu);
  while (!w->done) {
    w->cv.wait_for(lock, std::chrono::milliseconds(100));
    if (!w->done && (server_->loop_ended || Clock::now() > limit)) break;
  }
  if (!w->done || !w->ok) gone_->store(true);
  return w->done && w->ok;
}

// One chunk of a chunked body: its size in hex, CRLF, the bytes, CRLF.
std::shared_ptr<std::string> chunk_of(const std::string& data) {
  char size[32];
  const int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  auto out = std::make_shared<std::string>();
  out->reserve(static_cast<size_t>(n) + data.size() + 2);
  out->append(size, static_cast<size_t>(n)).append(data).append("\r\n");
  return out;
}

}  // namespace

void Connection::read_request() {
  if (state_ == State::kClosed) return;
  if (server_->stopping) return close();
  state_ = State::kReading;
  waiting_since_ = Clock::now();
  timed_out_ = false;
  head_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(server_->limits.max_header_bytes));
  parser_->body_limit(server_->limits.max_body_bytes);
  arm(server_->limits.read_timeout_s);
  bhttp::async_read_header(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](const beast::error_code& ec, size_t) { self->on_header(ec); });
}

void Connection::on_header(const beast::error_code& ec) {
  if (state_ == State::kClosed) return;
  if (ec) return refuse(refusal_of(ec, timed_out_, parser_->got_some(), server_->limits));
  const auto& m = parser_->get();
  const HttpLimits& limits = server_->limits;
  if (m.target().size() > limits.max_target_bytes) {
    return refuse({414, "the request target is longer than " +
                            std::to_string(limits.max_target_bytes) + " bytes"});
  }
  const bool framed = parser_->content_length().has_value() || parser_->chunked();
  if (!framed && (m.method() == bhttp::verb::post || m.method() == bhttp::verb::put ||
                  m.method() == bhttp::verb::patch)) {
    return refuse({411, "a " + str(m.method_string()) +
                            " needs a Content-Length or Transfer-Encoding: chunked"});
  }
  const auto read_body = [self = shared_from_this()] {
    bhttp::async_read(self->socket_, self->buffer_, *self->parser_,
                      [self](const beast::error_code& e, size_t) { self->on_body(e); });
  };
  if (parser_->is_done()) return on_body({});
  if (beast::iequals(m[bhttp::field::expect], "100-continue")) {
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(socket_, net::buffer(kContinue),
                     [self = shared_from_this(), read_body](const beast::error_code& e, size_t) {
                       if (e) return self->close();
                       read_body();
                     });
    return;
  }
  read_body();
}

void Connection::on_body(const beast::error_code& ec) {
  if (state_ == State::kClosed) return;
  if (ec) return refuse(refusal_of(ec, timed_out_, true, server_->limits));
  ++timer_generation_;
  timer_.cancel();
  dispatch();
}

void Connection::refuse(const Refusal& r) {
  if (r.status == 0) return close();
  keep_alive_ = false;
  respond(error_response(*server_, r.status, r.message));
}

HttpRequest Connection::take_request() {
  auto& m = parser_->get();
  HttpRequest r;
  r.method = str(m.method_string());
  const beast::string_view target = m.target();
  const size_t q = target.find('?');
  r.path = str(target.substr(0, q));
  if (q != beast::string_view::npos) r.query = str(target.substr(q + 1));
  for (const auto& f : m) r.headers.emplace_back(str(f.name_string()), str(f.value()));
  r.body = std::move(m.body());
  r.client = client_;
  return r;
}

void Connection::dispatch() {
  keep_alive_ = parser_->get().keep_alive() && !server_->stopping;
  HttpRequest req = take_request();
  head_ = req.method == "HEAD";
  InlineReply pre({});
  if (server_->filter && server_->filter(req, pre)) return respond(pre.take());
  HttpHeaders headers = pre.take().headers;
  std::string allow;
  const Route* route = server_->find(req.method, req.path, allow);
  if (route == nullptr && allow.empty()) {
    // A method no route knows is 501 only where the path is no route's
    // either: on a known path any other method is 405, with what it allows.
    if (parser_->get().method() == bhttp::verb::unknown) {
      return respond(error_response(*server_, 501, "the method " + req.method + " is not supported",
                                    std::move(headers)));
    }
    return respond(error_response(*server_, 404, "no endpoint " + req.method + " " + req.path,
                                  std::move(headers)));
  }
  if (route == nullptr) {
    headers.emplace_back("Allow", allow);
    return respond(error_response(
        *server_, 405,
        "the method " + req.method + " is not allowed on " + req.path + " (allowed: " + allow + ")",
        std::move(headers)));
  }
  if (route->where == HttpServer::Runs::kOnWorker) {
    return run_on_worker(*route, std::move(req), std::move(headers));
  }
  InlineReply reply(std::move(headers));
  try {
    route->handler(req, reply);
  } catch (const std::exception& e) {
    reply.send(
        500, "application/json",
        server_->error_json(500, std::string("the request failed inside the server: ") + e.what()));
  }
  if (!reply.answered()) {
    reply.send(500, "application/json", server_->error_json(500, "the endpoint gave no answer"));
  }
  respond(reply.take());
}

void Connection::run_on_worker(const Route& route, HttpRequest req, HttpHeaders headers) {
  if (server_->busy.load() >= server_->limits.workers) {
    return respond(error_response(*server_, 503,
                                  "every HTTP worker is busy (" +
                                      std::to_string(server_->limits.workers) +
                                      ", --threads-http); retry later",
                                  std::move(headers)));
  }
  ++server_->busy;
  state_ = State::kHandling;
  watch();
  net::post(server_->pool, [self = shared_from_this(), server = server_, handler = &route.handler,
                            req = std::move(req), headers = std::move(headers)]() mutable {
    WorkerReply reply(self, server, std::move(headers));
    try {
      (*handler)(req, reply);
    } catch (const std::exception& e) {
      reply.send(500, "application/json",
                 server->error_json(
                     500, std::string("the request failed inside the server: ") + e.what()));
    }
    if (!reply.answered()) {
      reply.send(500, "application/json", server->error_json(500, "the endpoint gave no answer"));
    }
    reply.end();
    --server->busy;
  });
}

void Connection::respond(Response r) {
  if (state_ == State::kClosed) return;
  auto res = std::make_shared<bhttp::response<bhttp::string_body>>(
      static_cast<bhttp::status>(r.status), 11);
  res->set(bhttp::field::server, "minfer");
  if (!r.content_type.empty()) res->set(bhttp::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers) res->insert(name, value);
  res->keep_alive(keep_alive_);
  res->body() = std::move(r.body);
  res->prepare_payload();
  if (head_) {  // the length GET would have, no body
    const size_t n = res->body().size();
    res->body().clear();
    res->content_length(n);
  }
  write(std::move(res));
}

void Connection::write(std::shared_ptr<bhttp::response<bhttp::string_body>> res) {
  state_ = State::kWriting;
  arm(server_->limits.write_timeout_s);
  bhttp::async_write(
      socket_, *res,
      [self = shared_from_this(), res](const beast::error_code& ec, size_t) { self->finish(!ec); });
}

void Connection::finish(bool ok) {
  if (state_ == State::kClosed) return;
  ++timer_generation_;
  timer_.cancel();
  if (!ok) return close();
  if (!keep_alive_ || server_->stopping) return linger_close();
  if (watching_) {  // its completion reads the next request
    next_after_watch_ = true;
    beast::error_code ec;
    socket_.cancel(ec);
    return;
  }
  read_request();
}

void Connection::stream_begin(Response head, std::function<void(bool)> done) {
  if (state_ == State::kClosed) return done(false);
  stream_head_ = std::make_shared<bhttp::response<bhttp::empty_body>>(
      static_cast<bhttp::status>(head.status), 11);
  stream_head_->set(bhttp::field::server, "minfer");
  stream_head_->set(bhttp::field::content_type, head.content_type);
  for (const auto& [name, value] : head.headers) stream_head_->insert(name, value);
  stream_head_->keep_alive(keep_alive_);
  stream_head_->chunked(true);
  stream_serializer_ =
      std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*stream_head_);
  state_ = State::kWriting;
  arm(server_->limits.write_timeout_s);
  bhttp::async_write_header(
      socket_, *stream_serializer_,
      [self = shared_from_this(), done = std::move(done)](const beast::error_code& ec, size_t) {
        ++self->timer_generation_;
        self->timer_.cancel();
        if (ec) self->close();
        if (self->state_ != State::kClosed) self->state_ = State::kHandling;
        done(!ec);
      });
}

void Connection::stream_chunk(std::shared_ptr<std::string> data, std::function<void(bool)> done) {
  if (state_ == State::kClosed) return done(false);
  auto bytes = chunk_of(*data);
  state_ = State::kWriting;
  arm(server_->limits.write_timeout_s);
  net::async_write(socket_, net::buffer(*bytes),
                   [self = shared_from_this(), bytes, done = std::move(done)](
                       const beast::error_code& ec, size_t) {
                     ++self->timer_generation_;
                     self->timer_.cancel();
                     if (ec) self->close();
                     if (self->state_ != State::kClosed) self->state_ = State::kHandling;
                     done(!ec);
                   });
}

void Connection::stream_end(std::function<void(bool)> done) {
  if (state_ == State::kClosed) return done(false);
  static const std::string kLast = "0\r\n\r\n";
  state_ = State::kWriting;
  arm(server_->limits.write_timeout_s);
  net::async_write(
      socket_, net::buffer(kLast),
      [self = shared_from_this(), done = std::move(done)](const beast::error_code& ec, size_t) {
        self->finish(!ec);
        done(!ec);
      });
}

// While a worker handles the request, a read stays pending: the client
// closing its side ends it (client_gone), and a pipelined next request is
// kept in the buffer for later.
void Connection::watch() {
  if (buffer_.size() + 4096 > buffer_.max_size()) return;  // enough pipelined: stop reading
  watching_ = true;
  socket_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this()](const beast::error_code& ec, size_t n) {
                            self->watching_ = false;
                            if (!ec) self->buffer_.commit(n);
                            if (self->next_after_watch_) {
                              self->next_after_watch_ = false;
                              return self->read_request();
                            }
                            if (ec) {
                              if (ec != net::error::operation_aborted) self->gone_->store(true);
                              return;
                            }
                            if (self->state_ == State::kHandling || self->state_ == State::kWriting)
                              self->watch();
                          });
}

// After a refusal the client may still be sending (a body past the limit):
// closing at once would reset the connection and could lose the answer.
// So the sending side closes, what arrives is read and dropped, for 2 s.
void Connection::linger_close() {
  if (state_ == State::kClosed) return;
  state_ = State::kReading;  // evictable
  lingering_ = true;
  beast::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  arm(2);
  drain();
}

void Connection::drain() {
  auto scratch = std::make_shared<std::array<char, 16384>>();
  socket_.async_read_some(net::buffer(*scratch), [self = shared_from_this(), scratch](
                                                     const beast::error_code& ec, size_t) {
    if (ec || self->state_ == State::kClosed) return self->close();
    self->drain();
  });
}

void Connection::arm(int seconds) {
  const uint64_t generation = ++timer_generation_;
  timer_.expires_after(std::chrono::seconds(seconds));
  timer_.async_wait([self = shared_from_this(), generation](const beast::error_code& ec) {
    if (!ec && generation == self->timer_generation_) self->on_timeout();
  });
}

void Connection::on_timeout() {
  if (lingering_ || state_ == State::kWriting) return close();
  if (state_ == State::kReading) {  // the pending read ends with operation_aborted
    timed_out_ = true;
    beast::error_code ec;
    socket_.cancel(ec);
  }
}

void Connection::close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  gone_->store(true);
  ++timer_generation_;
  timer_.cancel();
  beast::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  if (!registered_) return;
  registered_ = false;
  server_->connections.erase(this);
  const auto it = server_->per_client.find(client_);
  if (it != server_->per_client.end() && --it->second <= 0) server_->per_client.erase(it);
}

}  // namespace minfer::serve::transport
