#!/usr/bin/env python3
"""`minfer serve` under overload and at its edges, on the real Gemma 3 270M:

  python3 tests/serve/lifecycle_test.py MINFER_BINARY

- A bounded queue: one slot, a queue of one; a third request while one runs
  and one waits is a 503 error object with Retry-After, and the other two
  finish.
- CORS: none without --cors; with it, preflights get 204 (allowing the
  OpenAI and Anthropic request headers) and every reply the
  Access-Control-Allow-Origin header.
- Bad input (huge and negative numbers, an overflowing float, a 10 MB
  body): each a 4xx error object; a client stalled in its headers is
  answered 408 and cut off after --read-timeout while /health answers.
- --timeout: a request that runs longer is cancelled: not yet answered, a
  503 naming the timeout; streamed, an error chunk and [DONE].
- SIGTERM: new requests get 503 while a running stream finishes whole (its
  finish_reason and [DONE]), then the server exits 0.
"""
import json
import re
import signal
import socket
import sys
import threading
import time

from serve_testutil import Server, check, error_object, finish, gemma_path


def body(text, max_tokens, stream=False):
    return json.dumps({"messages": [{"role": "user", "content": text}],
                       "max_tokens": max_tokens, "temperature": 0, "stream": stream}).encode()


def open_stream(port, data):
    """A raw streaming request; returns the socket after the first chunk."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Type: application/json\r\nContent-Length: " +
                 str(len(data)).encode() + b"\r\n\r\n" + data)
    first = sock.recv(65536)
    check(b" 200 " in first.split(b"\r\n")[0], f"stream start {first[:80]!r}")
    return sock, first


def read_all(sock, got=b"", limit=120):
    sock.settimeout(limit)
    while b"data: [DONE]" not in got:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def metric(srv, name):
    _, text = srv.raw("GET", "/metrics")
    m = re.search(rb"^" + name.encode() + rb" (\S+)$", text, re.M)
    return float(m.group(1)) if m else -1


def queue_checks(model):
    srv = Server(model, "--max-queue", "1", slots=1, ctx=2048)
    try:
        sock, _ = open_stream(srv.port, body("Tell a long story.", 400, stream=True))
        for _ in range(200):  # the role chunk comes before the sequence runs
            if metric(srv, "minfer_sequences_running") == 1:
                break
            time.sleep(0.02)
        waiting = {}
        t = threading.Thread(target=lambda: waiting.update(
            r=srv_raw(srv, "/v1/chat/completions", body("Name a colour.", 4))))
        t.start()
        for _ in range(200):
            if metric(srv, "minfer_sequences_waiting") >= 1:
                break
            time.sleep(0.02)
        check(metric(srv, "minfer_sequences_waiting") == 1, "the second request waits")
        status, reply = srv.raw("POST", "/v1/chat/completions", body("Name a fruit.", 4))
        error_object(status, reply, 503, "busy")
        check(srv.headers.get("retry-after") == "1", f"Retry-After: {srv.headers}")
        sock.close()  # the first hangs up: the waiting one runs
        t.join(60)
        status, reply = waiting.get("r", (0, b""))
        check(status == 200 and json.loads(reply)["choices"][0]["message"]["content"],
              f"the queued request {status} {reply[:120]!r}")
        check(srv.headers.get("access-control-allow-origin") is None, "CORS without --cors")
    finally:
        srv.stop()


def srv_raw(srv, path, data):
    # A second Server view for the thread (raw() keeps the last headers).
    import urllib.request
    import urllib.error
    req = urllib.request.Request(srv.url + path, data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def cors_and_timeout_checks(model):
    srv = Server(model, "--cors", "http://example.test", "--timeout", "2", "--read-timeout", "2",
                 ctx=8192)
    try:
        status, _ = srv.raw("OPTIONS", "/v1/chat/completions", None,
                            {"Origin": "http://example.test",
                             "Access-Control-Request-Method": "POST"})
        check(status == 204, f"preflight {status}")
        check(srv.headers.get("access-control-allow-origin") == "http://example.test" and
              "POST" in srv.headers.get("access-control-allow-methods", ""),
              f"preflight headers {srv.headers}")
        allowed = srv.headers.get("access-control-allow-headers", "").lower()
        check(all(h in allowed for h in ("authorization", "content-type", "x-api-key",
                                           "anthropic-version", "anthropic-beta")),
              f"preflight allows {allowed!r}")
        status, _ = srv.raw("GET", "/v1/models")
        check(srv.headers.get("access-control-allow-origin") == "http://example.test",
              f"reply headers {srv.headers}")

        # Bad input, each a 4xx error object, the server unaffected.
        msgs = [{"role": "user", "content": "hi"}]
        for bad, needle in [({"messages": msgs, "max_tokens": 10 ** 30}, "max_tokens"),
                            ({"messages": msgs, "max_tokens": -5}, "max_tokens"),
                            ({"messages": msgs, "temperature": 1e308 * 10}, "JSON"),
                            ({"messages": msgs, "n": 2 ** 63}, "'n'"),
                            ({"messages": msgs, "top_k": -1}, "top_k")]:
            data = json.dumps(bad).encode() if "JSON" != needle else \
                b'{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e999}'
            status, reply = srv.raw("POST", "/v1/chat/completions", data)
            check(400 <= status < 500, f"{bad}: {status} {reply[:120]!r}")
            error_object(status, reply, status, needle if needle != "JSON" else "")
        status, reply = srv.raw("POST", "/v1/chat/completions", b"{" + b" " * (10 << 20) + b"}")
        error_object(status, reply, 413, "too large")
        # A client that stops in the middle of its headers is answered 408
        # and cut off after --read-timeout (2 s), and the server answers
        # everyone else meanwhile.
        slow = socket.create_connection(("127.0.0.1", srv.port))
        slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n")
        t0 = time.time()
        closed = False
        answer = b""
        slow.settimeout(0.25)
        while time.time() - t0 < 10:
            status, _ = srv.raw("GET", "/health")
            check(status == 200, f"/health during a stalled client: {status}")
            try:
                got = slow.recv(1024)
                answer += got
                if got == b"":
                    closed = True
                    break
            except socket.timeout:
                continue
            except OSError:
                closed = True
                break
        slow.close()
        check(closed and time.time() - t0 < 7,
              f"a client stalled in its headers was not cut off ({time.time() - t0:.1f} s)")
        check(answer.startswith(b"HTTP/1.1 408 "), f"the stalled client's answer {answer[:80]!r}")

        start = time.time()
        status, reply = srv.raw("POST", "/v1/chat/completions",
                                body("Tell a very long story.", 1500))
        error_object(status, reply, 503, "timeout")
        check(time.time() - start < 10, f"the timeout took {time.time() - start:.1f} s")
        sock, got = open_stream(srv.port, body("Tell a very long story.", 1500, stream=True))
        got = read_all(sock, got)
        sock.close()
        check(b"timeout" in got and got.rstrip().endswith(b"data: [DONE]"),
              f"streamed timeout {got[-300:]!r}")
        for _ in range(100):
            if metric(srv, "minfer_sequences_running") == 0:
                break
            time.sleep(0.05)
        check(metric(srv, "minfer_sequences_running") == 0, "timed-out sequences still running")
    finally:
        srv.stop()


def sigterm_checks(model):
    srv = Server(model)
    sock, got = open_stream(srv.port, body("Count from one to one hundred.", 150, stream=True))
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    status, reply = srv.raw("POST", "/v1/chat/completions", body("Name a colour.", 4))
    check(status in (0, 503), f"a request during shutdown: {status} {reply[:100]!r}")
    if status == 503:
        error_object(status, reply, 503, "shutting down")
    got = read_all(sock, got)
    sock.close()
    finishes = re.findall(rb'"finish_reason":"(\w+)"', got)
    check(finishes and finishes[-1] in (b"length", b"stop") and got.rstrip().endswith(
        b"data: [DONE]"), f"the running stream did not finish: {got[-300:]!r}")
    try:
        code = srv.proc.wait(timeout=40)
    except Exception:
        srv.proc.kill()
        code = -9
    check(code == 0, f"exit status after SIGTERM: {code}")


def main():
    model = gemma_path()
    queue_checks(model)
    cors_and_timeout_checks(model)
    sigterm_checks(model)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
