#include "parallel/socket_io.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <thread>

namespace minfer::parallel::net {
namespace {

#ifdef MSG_NOSIGNAL
constexpr int kSendFlags = MSG_NOSIGNAL;
#else
constexpr int kSendFlags = 0;  // SO_NOSIGPIPE on the socket instead
#endif

std::string errno_text(int err) {
  return std::strerror(err);
}

// A connection the peer closed or reset, as opposed to a local failure.
bool is_disconnect(int err) {
  return err == ECONNRESET || err == EPIPE || err == ENOTCONN || err == ECONNABORTED ||
         err == ETIMEDOUT;
}

Status socket_error(const std::string& peer, int err) {
  if (is_disconnect(err)) return Status::unavailable(peer + " disconnected: " + errno_text(err));
  return Status::io_error("connection to " + peer + ": " + errno_text(err));
}

// Non-blocking, no SIGPIPE, and (for a connection) no Nagle delay.
Status configure(int fd, bool connection) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return Status::io_error("cannot make a socket non-blocking: " + errno_text(errno));
  }
  const int one = 1;
#ifdef SO_NOSIGPIPE
  if (setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof(one)) < 0) {
    return Status::io_error("cannot set SO_NOSIGPIPE: " + errno_text(errno));
  }
#endif
  if (connection && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
    return Status::io_error("cannot set TCP_NODELAY: " + errno_text(errno));
  }
  return Status::ok();
}

// poll() on one descriptor until it reports one of `events` (or an error
// or hang-up, which the following call reads), or the deadline passes.
Result<short> wait_for(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, deadline.remaining_ms());
    if (n > 0) return static_cast<short>(p.revents);
    if (n == 0) return Status::unavailable(timeout_text(deadline));
    if (errno != EINTR) return Status::io_error("poll: " + errno_text(errno));
  }
}

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoDeleter>;

Result<AddrInfoList> resolve(const HostPort& where, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* list = nullptr;
  const std::string port = std::to_string(where.port);
  const int rc = getaddrinfo(where.host.c_str(), port.c_str(), &hints, &list);
  if (rc != 0) {
    return Status::invalid_argument("cannot resolve host '" + where.host +
                                    "': " + gai_strerror(rc));
  }
  return AddrInfoList(list);
}

std::string address_text(const HostPort& where) {
  return where.host + ":" + std::to_string(where.port);
}

// One non-blocking connect attempt to one address; ok when connected.
Result<Socket> try_connect(const addrinfo& a, const Deadline& deadline) {
  Socket s(socket(a.ai_family, a.ai_socktype, a.ai_protocol));
  if (!s.valid()) return Status::io_error("socket: " + errno_text(errno));
  MINFER_RETURN_IF_ERROR(configure(s.fd(), true));
  if (connect(s.fd(), a.ai_addr, a.ai_addrlen) == 0) return s;
  if (errno != EINPROGRESS && errno != EINTR) return Status::unavailable(errno_text(errno));
  MINFER_ASSIGN_OR_RETURN(short revents, wait_for(s.fd(), POLLOUT, deadline));
  (void)revents;
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
  if (err != 0) return Status::unavailable(errno_text(err));
  return s;
}

}  // namespace

Deadline Deadline::after(double seconds) {
  const auto span = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::min(seconds, 1e9)));
  return {Clock::now() + span, seconds};
}

int Deadline::remaining_ms() const {
  const auto left = at - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

std::string timeout_text(const Deadline& deadline) {
  std::ostringstream out;
  out << "timed out after " << deadline.seconds << " s";
  return out.str();
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::close_gracefully() {
  if (fd_ < 0) return;
  shutdown(fd_, SHUT_WR);
  std::byte sink[4096];
  while (recv(fd_, sink, sizeof(sink), 0) > 0) {
  }
  close();
}

Result<HostPort> parse_address(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return Status::invalid_argument("address '" + address + "' is not host:port");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port_text = address.substr(colon + 1);
  int port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9' || port > 65535) {
      return Status::invalid_argument("address '" + address + "' has a bad port");
    }
    port = port * 10 + (c - '0');
  }
  if (port == 0) {
    return Status::invalid_argument("address '" + address +
                                    "': port 0 is not allowed, the other ranks must know the port");
  }
  if (port > 65535) {
    return Status::invalid_argument("address '" + address + "': the port must be 1 to 65535");
  }
  return HostPort{host, port};
}

Result<Socket> listen_on(const HostPort& where) {
  MINFER_ASSIGN_OR_RETURN(AddrInfoList list, resolve(where, true));
  std::string last = "no address";
  for (const addrinfo* a = list.get(); a; a = a->ai_next) {
    Socket s(socket(a->ai_family, a->ai_socktype, a->ai_protocol));
    if (!s.valid()) {
      last = errno_text(errno);
      continue;
    }
    const int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s.fd(), a->ai_addr, a->ai_addrlen) < 0 || listen(s.fd(), 128) < 0) {
      last = errno_text(errno);
      continue;
    }
    MINFER_RETURN_IF_ERROR(configure(s.fd(), false));
    return s;
  }
  return Status::unavailable("cannot listen on " + address_text(where) + ": " + last);
}

Result<Socket> accept_before(const Socket& listener, const Deadline& deadline) {
  for (;;) {
    MINFER_ASSIGN_OR_RETURN(short revents, wait_for(listener.fd(), POLLIN, deadline));
    (void)revents;
    Socket s(accept(listener.fd(), nullptr, nullptr));
    if (s.valid()) {
      MINFER_RETURN_IF_ERROR(configure(s.fd(), true));
      return s;
    }
    // The connection may have gone between poll and accept; wait again.
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED) {
      return Status::io_error("accept: " + errno_text(errno));
    }
  }
}

Result<Socket> connect_before(const HostPort& where, const Deadline& deadline) {
  MINFER_ASSIGN_OR_RETURN(AddrInfoList list, resolve(where, false));
  std::string last = "no address";
  for (;;) {
    for (const addrinfo* a = list.get(); a; a = a->ai_next) {
      Result<Socket> s = try_connect(*a, deadline);
      if (s.is_ok()) return s;
      last = s.message();
    }
    if (deadline.passed()) break;
    // Rank 0 may not be listening yet: try again shortly.
    std::this_thread::sleep_for(std::min(std::chrono::milliseconds(50),
                                         std::chrono::milliseconds(deadline.remaining_ms())));
    if (deadline.passed()) break;
  }
  return Status::unavailable("cannot connect to " + address_text(where) + " (" +
                             timeout_text(deadline) + "): " + last);
}

Result<SendEnd> send_all(const Socket& s, std::span<const std::byte> data, const Deadline& deadline,
                         const std::string& peer, bool stop_if_peer_speaks) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(s.fd(), data.data() + done, data.size() - done, kSendFlags);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return socket_error(peer, errno);
    const short events = stop_if_peer_speaks ? POLLOUT | POLLIN : POLLOUT;
    Result<short> revents = wait_for(s.fd(), events, deadline);
    if (!revents.is_ok()) return revents.status().with_context("sending to " + peer);
    if (stop_if_peer_speaks && (*revents & POLLIN)) return SendEnd::kPeerSpoke;
  }
  return SendEnd::kSent;
}

Result<std::vector<size_t>> wait_readable(std::span<const Socket* const> sockets,
                                          const Deadline& deadline) {
  std::vector<pollfd> fds;
  for (const Socket* s : sockets) fds.push_back(pollfd{s->fd(), POLLIN, 0});
  for (;;) {
    const int n = poll(fds.data(), static_cast<nfds_t>(fds.size()), deadline.remaining_ms());
    if (n == 0) return Status::unavailable(timeout_text(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::io_error("poll: " + errno_text(errno));
    std::vector<size_t> ready;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0) ready.push_back(i);
    }
    return ready;
  }
}

Status recv_all(const Socket& s, std::span<std::byte> data, const Deadline& deadline,
                const std::string& peer) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = recv(s.fd(), data.data() + done, data.size() - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Status::unavailable(peer + " disconnected (connection closed)");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return socket_error(peer, errno);
    Result<short> revents = wait_for(s.fd(), POLLIN, deadline);
    if (!revents.is_ok()) return revents.status().with_context("waiting for " + peer);
  }
  return Status::ok();
}

}  // namespace minfer::parallel::net
