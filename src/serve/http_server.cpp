#include <sys/resource.h>

#include <thread>

#include "serve/http_server_impl.h"

namespace minfer::serve {

using transport::Connection;
using transport::Route;
namespace net = transport::net;
namespace beast = transport::beast;
using transport::Clock;
using transport::tcp;

void HttpServer::Impl::accept() {
  acceptor.async_accept([this](const beast::error_code& ec, tcp::socket socket) {
    on_accept(ec, std::move(socket));
  });
}

void HttpServer::Impl::on_accept(const beast::error_code& ec, tcp::socket socket) {
  if (stopping || !acceptor.is_open()) return;
  if (ec) {  // out of descriptors, most likely: wait a moment rather than spin
    accept_retry.expires_after(std::chrono::milliseconds(20));
    accept_retry.async_wait([this](const beast::error_code& e) {
      if (!e) accept();
    });
    return;
  }
  beast::error_code e;
  const tcp::endpoint peer = socket.remote_endpoint(e);
  if (!e) {
    std::string client = peer.address().to_string();
    if (!make_room(client)) {
      reject(std::move(socket));
    } else {
      auto c = std::make_shared<Connection>(this, std::move(socket), client);
      connections.insert(c.get());
      ++per_client[client];
      c->start();
    }
  }
  accept();
}

Connection* HttpServer::Impl::oldest_waiting(const std::string* client) const {
  Connection* oldest = nullptr;
  for (Connection* c : connections) {
    if (!c->waiting() || (client != nullptr && c->client() != *client)) continue;
    if (oldest == nullptr || c->waiting_since() < oldest->waiting_since()) oldest = c;
  }
  return oldest;
}

bool HttpServer::Impl::make_room(const std::string& client) {
  const auto it = per_client.find(client);
  if (it != per_client.end() && it->second >= limits.max_connections_per_client) {
    Connection* victim = oldest_waiting(&client);
    if (victim == nullptr) return false;
    victim->evict();
  }
  if (static_cast<int>(connections.size()) >= limits.max_connections) {
    Connection* victim = oldest_waiting(nullptr);
    if (victim == nullptr) return false;
    victim->evict();
  }
  return true;
}

void HttpServer::Impl::reject(tcp::socket socket) {
  const std::string body =
      error_json(503, "too many connections, each busy with a request; retry later");
  auto s = std::make_shared<tcp::socket>(std::move(socket));
  auto msg = std::make_shared<std::string>(
      "HTTP/1.1 503 Service Unavailable\r\nServer: minfer\r\nContent-Type: application/json\r\n"
      "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body);
  net::async_write(*s, net::buffer(*msg), [s, msg](const beast::error_code&, size_t) {
    beast::error_code e;
    s->shutdown(tcp::socket::shutdown_both, e);
    s->close(e);
  });
}

void HttpServer::Impl::close_all() {
  const std::vector<Connection*> open(connections.begin(), connections.end());
  for (Connection* c : open) c->close();
}

const Route* HttpServer::Impl::find(const std::string& method, const std::string& path,
                                    std::string& allow) const {
  const std::string want = method == "HEAD" ? "GET" : method;
  const Route* hit = nullptr;
  for (const Route& r : routes) {
    if (r.path != path) continue;
    if (r.method == want) hit = &r;
    allow += (allow.empty() ? "" : ", ") + r.method + (r.method == "GET" ? ", HEAD" : "");
  }
  return hit;
}

HttpServer::HttpServer(HttpLimits limits) : impl_(std::make_shared<Impl>(limits)) {}

HttpServer::~HttpServer() {
  stop(std::chrono::milliseconds(0));
}

void HttpServer::route(const std::string& method, const std::string& path, HttpHandler handler,
                       Runs where) {
  impl_->routes.push_back({method, path, std::move(handler), where});
}

void HttpServer::set_filter(Filter filter) {
  impl_->filter = std::move(filter);
}

void HttpServer::set_error_body(ErrorBody make) {
  impl_->error_body = std::move(make);
}

int HttpServer::port() const {
  return impl_->port;
}

int HttpServer::busy_workers() const {
  return impl_->busy.load();
}

Status HttpServer::bind(const std::string& host, int port) {
  // Every connection is a descriptor: take the whole allowance.
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  const std::string where = host + ":" + std::to_string(port);
  beast::error_code ec;
  tcp::resolver resolver(impl_->ioc);
  const auto found = resolver.resolve(host, std::to_string(port), ec);
  if (ec || found.empty()) {
    return Status::unavailable("cannot listen on " + where + ": " + ec.message());
  }
  const tcp::endpoint endpoint = found.begin()->endpoint();
  tcp::acceptor& a = impl_->acceptor;
  if (a.open(endpoint.protocol(), ec); !ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::unavailable("cannot listen on " + where + " (" + ec.message() +
                               ": in use, or not an address of this machine)");
  }
  impl_->port = a.local_endpoint(ec).port();
  return Status::ok();
}

Status HttpServer::serve() {
  Impl& s = *impl_;
  if (s.stopping) return Status::ok();
  s.guard.emplace(net::make_work_guard(s.ioc));
  s.serving = true;
  s.accept();
  for (;;) {
    try {
      s.ioc.run();
      break;
    } catch (const std::exception&) {
      // A handler threw past its own catch (allocation failure): the loop
      // goes on serving the other connections.
    }
  }
  s.loop_ended = true;
  return Status::ok();
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  net::post(s.ioc, [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
    s.accept_retry.cancel();
  });
  const auto until = Clock::now() + grace;
  while (s.busy.load() > 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  net::post(s.ioc, [&s] {
    s.close_all();
    s.guard.reset();
  });
  for (int i = 0; i < 100 && s.serving && !s.loop_ended; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  s.ioc.stop();
  for (int i = 0; i < 100 && s.serving && !s.loop_ended; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  s.pool.stop();
  s.pool.join();
}

}  // namespace minfer::serve
