// TCP plumbing under parallel/socket_group.cpp: an owned socket, listening,
// accepting and connecting, and whole-buffer sends and receives, every one
// of them bounded by a deadline.
//
// Contract: sockets are non-blocking and every wait is a poll() that ends at
// the deadline, so no call here blocks past it; EINTR is retried, partial
// sends and receives are continued, SIGPIPE is never raised (MSG_NOSIGNAL or
// SO_NOSIGPIPE), and connected sockets have TCP_NODELAY (collectives are
// small request/response exchanges that must not wait for Nagle). Errors
// name the peer they were given ("rank 2") and what happened: a closed or
// reset connection is kUnavailable, a deadline that passed kUnavailable, a
// bad address kInvalidArgument, anything else the system refused kIoError.
// Threading: plain functions; a Socket is used by one thread at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace minfer::parallel::net {

using Clock = std::chrono::steady_clock;

// When a wait must end, and the timeout it was made from (for messages).
struct Deadline {
  Clock::time_point at;
  double seconds = 0;

  static Deadline after(double seconds);
  // Milliseconds left for poll(), rounded up, 0 once passed.
  int remaining_ms() const;
  bool passed() const { return Clock::now() >= at; }
};

// An owned file descriptor of a socket; closed when destroyed.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  // Sends end-of-stream after what is queued, discards what has arrived
  // unread, then closes: a close with unread data resets the connection,
  // and a reset can throw away the peer's unread data too (say, the
  // failure notice this side just sent it).
  void close_gracefully();

 private:
  int fd_ = -1;
};

// "host:port" or "[v6 host]:port" split in two; the port must be 1..65535.
struct HostPort {
  std::string host;
  int port = 0;
};
[[nodiscard]] Result<HostPort> parse_address(const std::string& address);

// A socket listening on host:port (SO_REUSEADDR, so a restarted rank 0 can
// listen again on a port whose old connections are still closing).
[[nodiscard]] Result<Socket> listen_on(const HostPort& where);

// The next connection to `listener`, or an error once the deadline passes.
[[nodiscard]] Result<Socket> accept_before(const Socket& listener, const Deadline& deadline);

// A connection to host:port, retried while it is refused or unreachable
// (the listener may not have started yet) until the deadline.
[[nodiscard]] Result<Socket> connect_before(const HostPort& where, const Deadline& deadline);

// How send_all ended.
enum class SendEnd {
  kSent,       // every byte went out
  kPeerSpoke,  // the peer sent something first (stop_if_peer_speaks)
};

// Sends all of `data`. With stop_if_peer_speaks it stops early once the
// peer has something to read (a failure notice that makes the rest moot).
[[nodiscard]] Result<SendEnd> send_all(const Socket& s, std::span<const std::byte> data,
                                       const Deadline& deadline, const std::string& peer,
                                       bool stop_if_peer_speaks = false);

// Receives exactly data.size() bytes.
[[nodiscard]] Status recv_all(const Socket& s, std::span<std::byte> data, const Deadline& deadline,
                              const std::string& peer);

// Indices into `sockets` of those with something to read (or a hang-up or
// error, which the next receive reports), once at least one has; an error
// once the deadline passes first.
[[nodiscard]] Result<std::vector<size_t>> wait_readable(std::span<const Socket* const> sockets,
                                                        const Deadline& deadline);

// "timed out after 2 s" for the deadline's timeout.
std::string timeout_text(const Deadline& deadline);

}  // namespace minfer::parallel::net
