#include "parallel/socket_group.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "parallel/socket_io.h"

namespace minfer::parallel {
namespace {

using net::Deadline;
using net::SendEnd;
using net::Socket;

// The messages on the wire. Every message is a fixed header and then
// `bytes` of payload, so a reader always knows where the next one starts.
enum class Op : uint32_t {
  kHello = 1,  // worker -> rank 0: arg0 rank, arg1 n_ranks, payload kNumberFormat
  kWelcome,    // rank 0 -> worker: every rank joined and agreed
  kAllReduce,  // arg0 elements; payload the floats
  kAllGather,  // arg0 input elements, arg1 output elements; payload the input
  kBarrier,
  kBroadcast,  // arg0 bytes, arg1 root; payload the bytes (from the root only)
  kResult,     // rank 0 -> worker: the collective's result
  kFail,       // arg0 a StatusCode; payload the message. The group has failed.
};

const char* op_name(Op op) {
  switch (op) {
    case Op::kHello:
      return "hello";
    case Op::kWelcome:
      return "welcome";
    case Op::kAllReduce:
      return "all_reduce_sum";
    case Op::kAllGather:
      return "all_gather";
    case Op::kBarrier:
      return "barrier";
    case Op::kBroadcast:
      return "broadcast";
    case Op::kResult:
      return "result";
    case Op::kFail:
      return "failure notice";
  }
  return "unknown message";
}

// "MNF" and the protocol version: a peer of another version, or a program
// that is not minfer, is refused at its first message.
constexpr uint32_t kMagic = 0x4d4e4601;
constexpr size_t kHeaderBytes = 32;  // magic u32, op u32, bytes u64, arg0 u64, arg1 u64
constexpr uint64_t kMaxNoticeBytes = 1 << 16;

struct Header {
  Op op = Op::kFail;
  uint64_t bytes = 0;
  uint64_t arg0 = 0;
  uint64_t arg1 = 0;
};

// Floats travel in the host's own format; the handshake compares these
// bytes so that hosts that store numbers differently are refused.
struct NumberFormat {
  uint32_t order = 0x01020304;
  float one_and_a_half = 1.5f;
};
constexpr size_t kNumberFormatBytes = sizeof(NumberFormat);

void put_le(std::byte* p, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
uint64_t get_le(const std::byte* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

std::string rank_name(int r) {
  return "rank " + std::to_string(r);
}

// A buffer of float-aligned storage viewed as bytes.
struct Payload {
  std::vector<float> storage;
  size_t size = 0;

  void resize(size_t bytes) {
    storage.resize((bytes + sizeof(float) - 1) / sizeof(float));
    size = bytes;
  }
  std::span<std::byte> bytes() { return std::as_writable_bytes(std::span(storage)).first(size); }
  std::span<const std::byte> bytes() const { return std::as_bytes(std::span(storage)).first(size); }
};

Result<SendEnd> send_message(const Socket& s, const Header& h, std::span<const std::byte> payload,
                             const Deadline& deadline, const std::string& peer,
                             bool stop_if_peer_speaks = false) {
  // Header and a small payload leave in one write (one packet under
  // TCP_NODELAY); a large payload follows the header on its own.
  constexpr size_t kJoinBelow = 1 << 16;
  std::vector<std::byte> head(kHeaderBytes + (payload.size() < kJoinBelow ? payload.size() : 0));
  put_le(head.data(), kMagic, 4);
  put_le(head.data() + 4, static_cast<uint32_t>(h.op), 4);
  put_le(head.data() + 8, payload.size(), 8);
  put_le(head.data() + 16, h.arg0, 8);
  put_le(head.data() + 24, h.arg1, 8);
  const bool joined = head.size() > kHeaderBytes;
  if (joined) std::memcpy(head.data() + kHeaderBytes, payload.data(), payload.size());
  MINFER_ASSIGN_OR_RETURN(SendEnd end, net::send_all(s, head, deadline, peer, stop_if_peer_speaks));
  if (joined || end == SendEnd::kPeerSpoke || payload.empty()) return end;
  return net::send_all(s, payload, deadline, peer, stop_if_peer_speaks);
}

Result<Header> recv_header(const Socket& s, const Deadline& deadline, const std::string& peer) {
  std::array<std::byte, kHeaderBytes> raw{};
  MINFER_RETURN_IF_ERROR(net::recv_all(s, raw, deadline, peer));
  const uint32_t op = static_cast<uint32_t>(get_le(raw.data() + 4, 4));
  if (get_le(raw.data(), 4) != kMagic || op < static_cast<uint32_t>(Op::kHello) ||
      op > static_cast<uint32_t>(Op::kFail)) {
    return Status::invalid_argument(
        peer + " sent a message that is not of this minfer version's protocol");
  }
  return Header{static_cast<Op>(op), get_le(raw.data() + 8, 8), get_le(raw.data() + 16, 8),
                get_le(raw.data() + 24, 8)};
}

// The Status a failure notice carries (its header already read).
Status read_notice(const Socket& s, const Header& h, const Deadline& deadline,
                   const std::string& peer) {
  if (h.bytes > kMaxNoticeBytes) {
    return Status::invalid_argument(peer + " sent a failure notice of " + std::to_string(h.bytes) +
                                    " bytes");
  }
  std::string text(h.bytes, '\0');
  MINFER_RETURN_IF_ERROR(net::recv_all(s, std::as_writable_bytes(std::span(text)), deadline, peer));
  const bool known = h.arg0 > static_cast<uint64_t>(StatusCode::kOk) &&
                     h.arg0 <= static_cast<uint64_t>(StatusCode::kInternal);
  return Status::error(known ? static_cast<StatusCode>(h.arg0) : StatusCode::kUnknown, text);
}

Status send_notice(const Socket& s, const Status& why, const Deadline& deadline,
                   const std::string& peer) {
  const std::string& text = why.message();
  Header h{Op::kFail, 0, static_cast<uint64_t>(why.code()), 0};
  return send_message(s, h, std::as_bytes(std::span(text)), deadline, peer).status();
}

class SocketCommunicator final : public Communicator {
 public:
  // Rank 0 holds a connection to every worker at peers[r] (peers[0] empty);
  // a worker holds its connection to rank 0 at peers[0].
  SocketCommunicator(int rank, int n_ranks, double timeout_s, std::vector<Socket> peers)
      : rank_(rank), n_(n_ranks), timeout_s_(timeout_s), peers_(std::move(peers)) {}
  ~SocketCommunicator() override {
    for (Socket& s : peers_) s.close_gracefully();
  }

  int rank() const override { return rank_; }
  int size() const override { return n_; }

  Status all_reduce_sum(std::span<float> data) override {
    Call call{Op::kAllReduce, data.size(), 0, std::as_bytes(data), std::as_writable_bytes(data)};
    if (rank_ != 0) return worker_call(call);
    MINFER_ASSIGN_OR_RETURN(std::vector<Payload> in, root_gather(call));
    // Rank by rank, so each element is ((r0 + r1) + r2) + ...: the
    // contract's order and LocalGroup's bits.
    for (int r = 1; r < n_; ++r) {
      const float* src = in[static_cast<size_t>(r)].storage.data();
      for (size_t i = 0; i < data.size(); ++i) data[i] += src[i];
    }
    return root_reply(call, [&](int) { return std::as_bytes(data); });
  }

  Status all_gather(std::span<const float> in, std::span<float> out) override {
    Call call{Op::kAllGather, in.size(), out.size(), std::as_bytes(in),
              std::as_writable_bytes(out)};
    if (rank_ != 0) return worker_call(call);
    MINFER_ASSIGN_OR_RETURN(std::vector<Payload> parts, root_gather(call));
    std::copy(in.begin(), in.end(), out.begin());
    for (int r = 1; r < n_; ++r) {
      const float* src = parts[static_cast<size_t>(r)].storage.data();
      std::copy(src, src + in.size(), out.begin() + static_cast<size_t>(r) * in.size());
    }
    return root_reply(call, [&](int) { return std::as_bytes(out); });
  }

  Status barrier() override {
    Call call{Op::kBarrier, 0, 0, {}, {}};
    if (rank_ != 0) return worker_call(call);
    MINFER_ASSIGN_OR_RETURN(std::vector<Payload> unused, root_gather(call));
    (void)unused;
    return root_reply(call, [](int) { return std::span<const std::byte>(); });
  }

  Status broadcast(std::span<std::byte> data, int root) override {
    const bool sending = rank_ == root;
    Call call{Op::kBroadcast, data.size(), static_cast<uint64_t>(static_cast<int64_t>(root)),
              sending ? data : std::span<std::byte>(), sending ? std::span<std::byte>() : data};
    if (rank_ != 0) return worker_call(call);
    MINFER_ASSIGN_OR_RETURN(std::vector<Payload> in, root_gather(call));
    if (root != 0 && !data.empty()) {
      std::memcpy(data.data(), in[static_cast<size_t>(root)].bytes().data(), data.size());
    }
    return root_reply(call, [&](int r) {
      return r == root ? std::span<const std::byte>() : std::span<const std::byte>(data);
    });
  }

  void fail(const Status& why) override {
    if (!failure_.is_ok()) return;  // the others already know, or will at their next call
    const std::string who = rank_name(rank_) + " failed";
    Status s = why.is_ok() ? Status::internal(who) : why.with_context(who);
    if (rank_ == 0) {
      (void)fail_group(s);
    } else {
      failure_ = s;
      (void)send_notice(peers_[0], s, Deadline::after(timeout_s_), rank_name(0));
    }
  }

 private:
  // One collective as this rank describes it to rank 0.
  struct Call {
    Op op;
    uint64_t arg0 = 0;
    uint64_t arg1 = 0;
    std::span<const std::byte> payload;  // what this rank sends
    std::span<std::byte> result;         // where a worker's result lands
  };

  // The payload rank `sender` sends for a collective described by (arg0, arg1).
  static uint64_t payload_bytes(Op op, uint64_t arg0, uint64_t arg1, int sender) {
    switch (op) {
      case Op::kAllReduce:
      case Op::kAllGather:
        return arg0 * sizeof(float);
      case Op::kBroadcast:
        return static_cast<int64_t>(arg1) == sender ? arg0 : 0;
      default:
        return 0;
    }
  }

  Status worker_call(const Call& call);
  Result<std::vector<Payload>> root_gather(const Call& call);
  Status receive_part(int r, const Call& call, const Deadline& deadline, Header& h, Payload& part);
  Status check_agreement(const Call& call, const std::vector<Header>& headers);
  Status root_reply(const Call& call,
                    const std::function<std::span<const std::byte>(int)>& result_for);
  Status fail_group(Status s);

  const int rank_;
  const int n_;
  const double timeout_s_;
  std::vector<Socket> peers_;
  Status failure_;  // the first failure; every later call returns it
};

// Send this rank's part, then wait for rank 0's answer: the result, or a
// notice that the group failed. Any error here also fails the group for
// this rank, so a late answer is never taken for the next call's.
Status SocketCommunicator::worker_call(const Call& call) {
  if (!failure_.is_ok()) return failure_;
  const Deadline deadline = Deadline::after(timeout_s_);
  const std::string peer = rank_name(0);
  const std::string what = op_name(call.op);
  auto give_up = [&](Status s) {
    failure_ = s;
    // Rank 0 learns why instead of waiting out its own timeout.
    (void)send_notice(peers_[0], s.with_context(rank_name(rank_) + " failed"),
                      Deadline::after(timeout_s_), peer);
    return s;
  };
  Header mine{call.op, call.payload.size(), call.arg0, call.arg1};
  Result<SendEnd> sent = send_message(peers_[0], mine, call.payload, deadline, peer, true);
  if (!sent.is_ok()) return give_up(sent.status().with_context(what));
  Result<Header> reply = recv_header(peers_[0], deadline, peer);
  if (!reply.is_ok()) return give_up(reply.status().with_context(what));
  if (reply->op == Op::kFail) {
    Status notice = read_notice(peers_[0], *reply, deadline, peer);
    failure_ = notice.is_ok() ? Status::internal(what + ": the group failed") : notice;
    return failure_;
  }
  if (*sent != SendEnd::kSent || reply->op != Op::kResult || reply->bytes != call.result.size()) {
    return give_up(Status::internal(what + ": rank 0 answered with a " + op_name(reply->op) +
                                    " of " + std::to_string(reply->bytes) + " bytes, expected " +
                                    std::to_string(call.result.size())));
  }
  Status got = net::recv_all(peers_[0], call.result, deadline, peer);
  return got.is_ok() ? got : give_up(got.with_context(what));
}

// Every worker's part of the collective, taken in whatever order they come
// (so a failure notice or a hang-up is seen at once, whichever rank sent
// it), checked against rank 0's own call. parts[r] holds rank r's payload.
Result<std::vector<Payload>> SocketCommunicator::root_gather(const Call& call) {
  if (!failure_.is_ok()) return failure_;
  const Deadline deadline = Deadline::after(timeout_s_);
  std::vector<Payload> parts(static_cast<size_t>(n_));
  std::vector<Header> headers(static_cast<size_t>(n_));
  headers[0] = Header{call.op, call.payload.size(), call.arg0, call.arg1};
  std::vector<int> waiting;
  for (int r = 1; r < n_; ++r) waiting.push_back(r);
  while (!waiting.empty()) {
    std::vector<const Socket*> sockets;
    for (int r : waiting) sockets.push_back(&peers_[static_cast<size_t>(r)]);
    Result<std::vector<size_t>> ready = net::wait_readable(sockets, deadline);
    if (!ready.is_ok()) {
      std::string who;
      for (int r : waiting) who += (who.empty() ? "" : ", ") + rank_name(r);
      return fail_group(Status::unavailable(std::string(op_name(call.op)) + ": no message from " +
                                            who + " (" + ready.message() + ")"));
    }
    std::vector<int> still;
    std::vector<bool> is_ready(waiting.size(), false);
    for (size_t i : *ready) is_ready[i] = true;
    for (size_t i = 0; i < waiting.size(); ++i) {
      const int r = waiting[i];
      if (!is_ready[i]) {
        still.push_back(r);
        continue;
      }
      const size_t ri = static_cast<size_t>(r);
      MINFER_RETURN_IF_ERROR(fail_group(receive_part(r, call, deadline, headers[ri], parts[ri])));
    }
    waiting = std::move(still);
  }
  MINFER_RETURN_IF_ERROR(check_agreement(call, headers));
  return parts;
}

// Rank r's message: its header into `h` and, when it describes the same
// collective as rank 0's, its payload into `part`. An error is the group's.
Status SocketCommunicator::receive_part(int r, const Call& call, const Deadline& deadline,
                                        Header& h, Payload& part) {
  const std::string peer = rank_name(r);
  const std::string what = op_name(call.op);
  const Socket& s = peers_[static_cast<size_t>(r)];
  Result<Header> got = recv_header(s, deadline, peer);
  if (!got.is_ok()) return got.status().with_context(what);
  h = *got;
  if (h.op == Op::kFail) {
    Status notice = read_notice(s, h, deadline, peer);
    return notice.is_ok() ? Status::internal(peer + " failed") : notice;
  }
  if (h.op != call.op) {
    return Status::internal("collective mismatch: rank 0 called " + what + ", " + peer +
                            " called " + op_name(h.op));
  }
  // Lengths that disagree are reported by check_agreement, for every rank
  // at once; such a payload is never read, since the group fails anyway.
  if (h.arg0 != call.arg0 || h.arg1 != call.arg1) return Status::ok();
  const uint64_t want = payload_bytes(h.op, h.arg0, h.arg1, r);
  if (h.bytes != want) {
    return Status::internal(what + ": " + peer + " sent " + std::to_string(h.bytes) +
                            " bytes, expected " + std::to_string(want));
  }
  part.resize(static_cast<size_t>(want));
  return net::recv_all(s, part.bytes(), deadline, peer).with_context(what);
}

// The same checks, and messages, as LocalGroup's, over every rank's header.
Status SocketCommunicator::check_agreement(const Call& call, const std::vector<Header>& headers) {
  const std::string what = op_name(call.op);
  auto listing = [&](const std::function<std::string(const Header&)>& field) {
    std::string text;
    for (int r = 0; r < n_; ++r) {
      text += (r ? ", rank " : "rank ") + std::to_string(r) + ": " +
              field(headers[static_cast<size_t>(r)]);
    }
    return text;
  };
  bool same_length = true;
  bool same_arg1 = true;
  for (const Header& h : headers) {
    same_length = same_length && h.arg0 == call.arg0;
    same_arg1 = same_arg1 && h.arg1 == call.arg1;
  }
  if (call.op == Op::kBarrier) return Status::ok();
  if (!same_length) {
    return fail_group(Status::invalid_argument(
        what + ": ranks gave different lengths (" +
        listing([](const Header& h) { return std::to_string(h.arg0); }) + ")"));
  }
  if (call.op == Op::kAllGather) {
    for (int r = 0; r < n_; ++r) {
      const uint64_t out_n = headers[static_cast<size_t>(r)].arg1;
      if (out_n != call.arg0 * static_cast<uint64_t>(n_)) {
        return fail_group(Status::invalid_argument("all_gather: rank " + std::to_string(r) +
                                                   " gave an output of " + std::to_string(out_n) +
                                                   " values for " + std::to_string(n_) +
                                                   " ranks of " + std::to_string(call.arg0)));
      }
    }
  }
  if (call.op == Op::kBroadcast) {
    if (!same_arg1) {
      return fail_group(Status::invalid_argument(
          "broadcast: ranks gave different roots (" +
          listing([](const Header& h) { return std::to_string(static_cast<int64_t>(h.arg1)); }) +
          ")"));
    }
    const int64_t root = static_cast<int64_t>(call.arg1);
    if (root < 0 || root >= n_) {
      return fail_group(Status::invalid_argument("broadcast: root " + std::to_string(root) +
                                                 " is not a rank of a group of " +
                                                 std::to_string(n_)));
    }
  }
  return Status::ok();
}

Status SocketCommunicator::root_reply(
    const Call& call, const std::function<std::span<const std::byte>(int)>& result_for) {
  const Deadline deadline = Deadline::after(timeout_s_);
  for (int r = 1; r < n_; ++r) {
    const Header h{Op::kResult, 0, 0, 0};
    Result<SendEnd> sent =
        send_message(peers_[static_cast<size_t>(r)], h, result_for(r), deadline, rank_name(r));
    if (!sent.is_ok()) return fail_group(sent.status().with_context(op_name(call.op)));
  }
  return Status::ok();
}

// Records the group's first failure and tells every worker (as far as they
// can still be reached); returns `s` (ok passes through).
Status SocketCommunicator::fail_group(Status s) {
  if (s.is_ok() || !failure_.is_ok()) return s;
  failure_ = s;
  const Deadline deadline = Deadline::after(timeout_s_);
  for (int r = 1; r < n_; ++r) {
    (void)send_notice(peers_[static_cast<size_t>(r)], s, deadline, rank_name(r));
  }
  return s;
}

// A connecting rank's hello checked against rank 0's group: its rank, or
// what is wrong (a disagreement between the ranks, or a failed read).
struct Hello {
  int rank = -1;
  std::string problem;
  bool disagreement = false;
};

Hello read_hello(const Socket& s, int n, const std::vector<Socket>& peers,
                 const Deadline& deadline) {
  const std::string peer = "a connecting rank";
  Result<Header> h = recv_header(s, deadline, peer);
  std::array<std::byte, kNumberFormatBytes> theirs{};
  Status read = h.is_ok() ? Status::ok() : h.status();
  if (read.is_ok() && (h->op != Op::kHello || h->bytes != kNumberFormatBytes)) {
    read = Status::invalid_argument(peer + " sent a " + op_name(h->op) + " instead of a hello");
  }
  if (read.is_ok()) read = net::recv_all(s, theirs, deadline, peer);
  if (!read.is_ok()) return Hello{-1, read.message(), false};
  const int64_t r = static_cast<int64_t>(h->arg0);
  const int64_t their_n = static_cast<int64_t>(h->arg1);
  const NumberFormat format;
  std::string problem;
  if (their_n != n) {
    problem = "the ranks disagree on the group size: rank 0 has " + std::to_string(n) + ", rank " +
              std::to_string(r) + " has " + std::to_string(their_n);
  } else if (r < 1 || r >= n) {
    problem = "a process connected as rank " + std::to_string(r) +
              ", which is not a worker rank of a group of " + std::to_string(n);
  } else if (peers[static_cast<size_t>(r)].valid()) {
    problem = "two processes connected as rank " + std::to_string(r);
  } else if (std::memcmp(theirs.data(), &format, kNumberFormatBytes) != 0) {
    problem = "rank " + std::to_string(r) + " stores numbers differently from rank 0";
  }
  return Hello{static_cast<int>(r), problem, !problem.empty()};
}

// Rank 0's side of the handshake: accept n - 1 connections and read each
// one's hello; then either welcome them all or tell every one what
// disagreed. peers[r] is rank r's connection.
Result<std::vector<Socket>> accept_workers(const Socket& listener, int n,
                                           const Deadline& deadline) {
  std::vector<Socket> peers(static_cast<size_t>(n));
  std::vector<Socket> refused;  // connections that get only the error
  std::vector<std::string> problems;
  bool disagreement = false;
  for (int joined = 0; joined < n - 1; ++joined) {
    Result<Socket> s = net::accept_before(listener, deadline);
    if (!s.is_ok()) {
      std::string missing;
      for (int r = 1; r < n; ++r) {
        if (!peers[static_cast<size_t>(r)].valid()) {
          missing += (missing.empty() ? "" : ", ") + rank_name(r);
        }
      }
      problems.push_back("waiting for " + missing + " to connect: " + s.message());
      break;
    }
    const Hello hello = read_hello(*s, n, peers, deadline);
    if (hello.problem.empty()) {
      peers[static_cast<size_t>(hello.rank)] = std::move(*s);
      continue;
    }
    disagreement = disagreement || hello.disagreement;
    problems.push_back(hello.problem);
    refused.push_back(std::move(*s));
  }
  Status verdict;
  if (!problems.empty()) {
    std::string text;
    for (const std::string& p : problems) text += (text.empty() ? "" : "; ") + p;
    verdict = disagreement ? Status::invalid_argument(text) : Status::unavailable(text);
  }
  for (int r = 1; r < n && verdict.is_ok(); ++r) {
    // A welcomed rank that hears of a later failure gets the notice below
    // at its first collective.
    verdict = send_message(peers[static_cast<size_t>(r)], Header{Op::kWelcome}, {}, deadline,
                           rank_name(r))
                  .status();
  }
  if (verdict.is_ok()) return peers;
  for (const Socket& s : refused) (void)send_notice(s, verdict, deadline, "a connecting rank");
  for (int r = 1; r < n; ++r) {
    if (peers[static_cast<size_t>(r)].valid()) {
      (void)send_notice(peers[static_cast<size_t>(r)], verdict, deadline, rank_name(r));
    }
  }
  return verdict;
}

// A worker's side of the handshake: connect, say who it is, and wait for
// rank 0's welcome or its reason to refuse.
Result<Socket> join_root(const net::HostPort& where, int rank, int n, const Deadline& deadline) {
  const std::string peer = rank_name(0);
  MINFER_ASSIGN_OR_RETURN(Socket s, net::connect_before(where, deadline));
  const NumberFormat format;
  const Header hello{Op::kHello, kNumberFormatBytes, static_cast<uint64_t>(rank),
                     static_cast<uint64_t>(n)};
  const auto format_bytes = std::as_bytes(std::span(&format, 1));
  MINFER_RETURN_IF_ERROR(send_message(s, hello, format_bytes, deadline, peer).status());
  MINFER_ASSIGN_OR_RETURN(Header reply, recv_header(s, deadline, peer));
  if (reply.op == Op::kFail) {
    Status notice = read_notice(s, reply, deadline, peer);
    return notice.is_ok() ? Status::internal("rank 0 refused the group") : notice;
  }
  if (reply.op != Op::kWelcome) {
    return Status::internal("rank 0 answered the hello with a " + std::string(op_name(reply.op)));
  }
  return s;
}

}  // namespace

Result<std::unique_ptr<Communicator>> connect_socket_group(const std::string& address, int rank,
                                                           int n_ranks, double timeout_s) {
  if (n_ranks < 1) {
    return Status::invalid_argument("a group needs at least one rank, got " +
                                    std::to_string(n_ranks));
  }
  if (rank < 0 || rank >= n_ranks) {
    return Status::invalid_argument("rank " + std::to_string(rank) +
                                    " is not a rank of a group of " + std::to_string(n_ranks));
  }
  if (!(timeout_s > 0) || !std::isfinite(timeout_s)) {
    return Status::invalid_argument("the timeout must be a positive number of seconds");
  }
  MINFER_ASSIGN_OR_RETURN(net::HostPort where, net::parse_address(address));
  const Deadline deadline = Deadline::after(timeout_s);
  const std::string context = "rank " + std::to_string(rank) + " of " + std::to_string(n_ranks) +
                              " joining the group at " + address;
  std::vector<Socket> peers;
  if (rank == 0) {
    if (n_ranks > 1) {
      Result<Socket> listener = net::listen_on(where);
      if (!listener.is_ok()) return listener.status().with_context(context);
      Result<std::vector<Socket>> joined = accept_workers(*listener, n_ranks, deadline);
      if (!joined.is_ok()) return joined.status().with_context(context);
      peers = std::move(*joined);
    }
  } else {
    Result<Socket> s = join_root(where, rank, n_ranks, deadline);
    if (!s.is_ok()) return s.status().with_context(context);
    peers.push_back(std::move(*s));
  }
  return std::unique_ptr<Communicator>(
      std::make_unique<SocketCommunicator>(rank, n_ranks, timeout_s, std::move(peers)));
}

}  // namespace minfer::parallel
