// The HTTP transport on its own (serve/http_server.h), driven over raw
// sockets on loopback: the whole-request deadline, the body limit of a
// chunked body, the connection caps and who is closed to make room, the
// workers' cap, a client that leaves while its request is worked on, a
// chunked answer, and a stop that is bounded whatever the sockets do.
#include "serve/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace minfer::serve {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// One client socket; every wait bounded.
class Client {
 public:
  explicit Client(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  bool send(const std::string& s) {
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // Reads until `until` appears, the peer closes, or `wait` passes.
  std::string read(const std::string& until, milliseconds wait = milliseconds(5000)) {
    std::string got;
    const auto end = Clock::now() + wait;
    while (Clock::now() < end && (until.empty() || got.find(until) == std::string::npos)) {
      pollfd p{fd_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now()).count();
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 1))) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }
  // Whether the server closed the connection within `wait`.
  bool closed_within(milliseconds wait) {
    (void)read("\x01\x02never", wait);
    return closed_;
  }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_ = false;
};

std::string get(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: t\r\n\r\n";
}

int status_of(const std::string& reply) {
  if (reply.rfind("HTTP/1.1 ", 0) != 0 || reply.size() < 12) return 0;
  return std::stoi(reply.substr(9, 3));
}

// A transport on a free port with /ping (inline), /slow (a worker that
// waits for release or its client's departure) and /stream (three chunks).
class Transport {
 public:
  explicit Transport(HttpLimits limits) : http_(limits) {
    http_.set_error_body([](int status, const std::string& m) {
      return "{\"code\":" + std::to_string(status) + ",\"message\":\"" + m + "\"}";
    });
    http_.route(
        "GET", "/ping", [](const HttpRequest&, HttpReply& r) { r.send(200, "text/plain", "pong"); },
        HttpServer::Runs::kInline);
    http_.route(
        "GET", "/slow",
        [this](const HttpRequest&, HttpReply& r) {
          ++started;
          const auto end = Clock::now() + std::chrono::seconds(10);
          while (!release && !r.client_gone() && Clock::now() < end) {
            std::this_thread::sleep_for(milliseconds(5));
          }
          if (r.client_gone()) ++saw_gone;
          r.send(200, "text/plain", "done");
        },
        HttpServer::Runs::kOnWorker);
    http_.route(
        "POST", "/stream",
        [](const HttpRequest& q, HttpReply& r) {
          if (!r.begin_stream("text/event-stream")) return;
          for (const char* part : {"one ", "two ", "three"}) (void)r.write(part);
          (void)r.write(" body=" + std::to_string(q.body.size()));
          r.end();
        },
        HttpServer::Runs::kOnWorker);
    EXPECT_TRUE(http_.bind("127.0.0.1", 0).is_ok());
    loop_ = std::thread([this] { (void)http_.serve(); });
  }
  ~Transport() { stop(milliseconds(0)); }
  void stop(milliseconds grace) {
    release = true;
    http_.stop(grace);
    if (loop_.joinable()) loop_.join();
  }
  int port() const { return http_.port(); }
  int busy() const { return http_.busy_workers(); }

  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  std::atomic<int> saw_gone{0};

 private:
  HttpServer http_;
  std::thread loop_;
};

void wait_for(const std::function<bool()>& cond, milliseconds limit = milliseconds(3000)) {
  const auto end = Clock::now() + limit;
  while (!cond() && Clock::now() < end) std::this_thread::sleep_for(milliseconds(5));
}

TEST(HttpServer, AnswersRoutesAndItsOwnErrorsWithTheirStatus) {
  Transport t(HttpLimits{});
  Client c(t.port());
  ASSERT_TRUE(c.send(get("/ping")));
  const std::string pong = c.read("pong");
  EXPECT_EQ(status_of(pong), 200) << pong;
  ASSERT_TRUE(c.send(get("/nowhere")));  // keep-alive: the same connection
  const std::string missing = c.read("}");
  EXPECT_EQ(status_of(missing), 404) << missing;
  EXPECT_NE(missing.find("\"code\":404"), std::string::npos) << missing;
  Client p(t.port());
  ASSERT_TRUE(p.send("POST /ping HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"));
  const std::string wrong = p.read("}");
  EXPECT_EQ(status_of(wrong), 405) << wrong;
  EXPECT_NE(wrong.find("Allow: GET, HEAD"), std::string::npos) << wrong;
  Client h(t.port());
  ASSERT_TRUE(h.send("HEAD /ping HTTP/1.1\r\nHost: t\r\n\r\n"));
  const std::string head = h.read("\r\n\r\n");
  EXPECT_EQ(status_of(head), 200) << head;
  EXPECT_NE(head.find("Content-Length: 4"), std::string::npos) << head;
  EXPECT_EQ(h.read("pong", milliseconds(200)).find("pong"), std::string::npos);
}

TEST(HttpServer, AWholeRequestHasOneDeadlineNotOnePerByte) {
  HttpLimits l;
  l.read_timeout_s = 1;
  Transport t(l);
  Client slow(t.port());
  const auto start = Clock::now();
  std::string answer;
  for (const char ch : std::string("GET /ping HTTP/1.1\r\nX-Trickle: abcdefghijklmnop")) {
    if (!slow.send(std::string(1, ch))) break;
    answer += slow.read("", milliseconds(100));
    if (!answer.empty()) break;
  }
  answer += slow.read("}", milliseconds(3000));
  EXPECT_EQ(status_of(answer), 408) << answer;
  EXPECT_LT(seconds_since(start), 2.5);
  Client idle(t.port());  // nothing sent: closed, without an answer
  EXPECT_TRUE(idle.closed_within(milliseconds(3000)));
}

TEST(HttpServer, AChunkedBodyPastTheLimitIs413) {
  HttpLimits l;
  l.max_body_bytes = 1024;
  Transport t(l);
  Client c(t.port());
  const std::string chunk = "400\r\n" + std::string(1024, 'a') + "\r\n";
  ASSERT_TRUE(c.send("POST /stream HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
                     chunk + chunk));
  const std::string reply = c.read("}");
  EXPECT_EQ(status_of(reply), 413) << reply;
  Client ok(t.port());
  ASSERT_TRUE(ok.send("POST /stream HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
                      chunk + "0\r\n\r\n"));
  const std::string streamed = ok.read("0\r\n\r\n");
  EXPECT_EQ(status_of(streamed), 200) << streamed;
  EXPECT_NE(streamed.find("Transfer-Encoding: chunked"), std::string::npos) << streamed;
  EXPECT_NE(streamed.find("4\r\none \r\n4\r\ntwo \r\n5\r\nthree\r\n"), std::string::npos)
      << streamed;
  EXPECT_NE(streamed.find("body=1024"), std::string::npos) << streamed;
}

TEST(HttpServer, AtTheCapTheLongestWaitingConnectionMakesRoom) {
  HttpLimits l;
  l.max_connections_per_client = 4;
  Transport t(l);
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<Client>(t.port()));
    std::this_thread::sleep_for(milliseconds(20));  // an order of arrival
  }
  Client fresh(t.port());
  ASSERT_TRUE(fresh.send(get("/ping")));
  EXPECT_EQ(status_of(fresh.read("pong")), 200);
  EXPECT_TRUE(idle.front()->closed_within(milliseconds(2000)));  // the oldest made room
  EXPECT_FALSE(idle.back()->closed_within(milliseconds(100)));
}

TEST(HttpServer, WhenEveryConnectionIsBusyTheNewOneIs503) {
  HttpLimits l;
  l.max_connections = 2;
  Transport t(l);
  Client a(t.port()), b(t.port());
  ASSERT_TRUE(a.send(get("/slow")));
  ASSERT_TRUE(b.send(get("/slow")));
  wait_for([&] { return t.started == 2; });
  Client c(t.port());
  const std::string refused = c.read("}");
  EXPECT_EQ(status_of(refused), 503) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos) << refused;
  t.release = true;
  EXPECT_EQ(status_of(a.read("done")), 200);
}

TEST(HttpServer, WithEveryWorkerBusyARequestIs503AtOnce) {
  HttpLimits l;
  l.workers = 1;
  Transport t(l);
  Client a(t.port());
  ASSERT_TRUE(a.send(get("/slow")));
  wait_for([&] { return t.started == 1; });
  Client b(t.port());
  const auto start = Clock::now();
  ASSERT_TRUE(b.send(get("/slow")));
  const std::string refused = b.read("}");
  EXPECT_EQ(status_of(refused), 503) << refused;
  EXPECT_LT(seconds_since(start), 1.0);
  ASSERT_TRUE(b.send(get("/ping")));  // inline endpoints need no worker
  EXPECT_EQ(status_of(b.read("pong")), 200);
}

TEST(HttpServer, AClientThatLeavesIsSeenByItsWorker) {
  Transport t(HttpLimits{});
  {
    Client a(t.port());
    ASSERT_TRUE(a.send(get("/slow")));
    wait_for([&] { return t.started == 1; });
  }  // closed
  wait_for([&] { return t.saw_gone == 1; });
  EXPECT_EQ(t.saw_gone, 1);
  wait_for([&] { return t.busy() == 0; });
  EXPECT_EQ(t.busy(), 0);
}

TEST(HttpServer, StopIsBoundedWhateverTheSocketsDo) {
  auto t = std::make_unique<Transport>(HttpLimits{});
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 50; ++i) {
    slow.push_back(std::make_unique<Client>(t->port()));
    ASSERT_TRUE(slow.back()->send("G"));
  }
  Client busy(t->port());
  ASSERT_TRUE(busy.send(get("/slow")));
  wait_for([&] { return t->started == 1; });
  const auto start = Clock::now();
  t->stop(milliseconds(200));
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_TRUE(slow.front()->closed_within(milliseconds(1000)));
}

}  // namespace
}  // namespace minfer::serve
