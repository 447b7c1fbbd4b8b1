#!/usr/bin/env python3
"""`minfer serve` against hostile clients, on the real Gemma 3 270M: slow,
idle, many and abandoned connections and streams, and shutdown with them
open (docs/SERVER.md, "Limits" and "Shutdown"). One check (or a few) per
abuse; after every check that leaves the server running /health answers
200 within 1 s; a check that kills the server is reported as a crash and
the rest run on a fresh one (serve_testutil.run_suite).

  python3 tests/serve/hostile_connections_test.py MINFER_BINARY [CHECK_NAME_PREFIX...]

- slow clients: 300 connections that each sent one byte leave /health
  answering within 1 s and a 4-token completion prompt; with --read-timeout
  3 partial requests (one byte, or one byte every 0.5 s) get 408 and are
  closed, idle ones closed, within 3 + 2 s; with --max-connections-per-client
  50, 100 idle sockets leave /health answering (the oldest closed); with
  --max-connections 4, 20 idle sockets leave /health answering, and with 4
  streams running a fifth connection gets 503 and is closed.
- shutdown with slow sockets open: SIGTERM (--shutdown-timeout 2) exits 0
  within 2 + 5 s.
- GET / with 2,650 ranges: 200 with the page itself (or 416), never a
  multi-range 206.
- four non-streamed requests whose clients hang up after 1 s are cancelled:
  within 3 s nothing runs and the KV pages are back.
- SIGTERM with --shutdown-timeout 1 cuts a running stream with an error
  chunk, then [DONE], then the chunked body's end; exit 0.
- /v1/models while draining (--shutdown-timeout 5) is 503; exit 0.

Every socket wait has a deadline; no check waits longer than ~30 s.
"""
import json
import select
import signal
import sys
import time

from serve_testutil import (LONG_PROMPT, Reply, ReplyReader, chat_body, check, close_all,
                            connect, error_shape, expect_error, health_within, metrics_of,
                            open_sockets, request, run_suite, timed, wait_metrics)


def closed_by_server(sock):
    """(closed, bytes): whether the server closed (EOF or reset) a socket that
    select() found readable, and what it had sent before."""
    got = b""
    sock.setblocking(False)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True, got
            got += chunk
    except BlockingIOError:
        return False, got
    except OSError:
        return True, got


def stream_request(port, max_tokens=1000, path="/v1/chat/completions"):
    """A raw streaming request; returns (socket, bytes so far) once its first
    content chunk came (or after 15 s)."""
    data = json.dumps(chat_body([{"role": "user", "content": LONG_PROMPT}], max_tokens,
                                stream=True)).encode()
    s = connect(port, 5)
    s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
              b"\r\nContent-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    got, deadline = b"", time.time() + 15
    while got.count(b"data: ") < 2 and time.time() < deadline:
        s.settimeout(max(0.05, deadline - time.time()))
        try:
            chunk = s.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    return s, got


def sse_events(body):
    return [line[6:] for line in body.decode("utf-8", "replace").split("\n")
            if line.startswith("data: ")]


# ---------------------------------------------------------------- slow and many clients

def check_slow_clients(srv):
    socks = open_sockets(srv.port, 300, b"P")
    try:
        time.sleep(0.2)
        ok, what = health_within(srv.port, 1.0)
        check(ok, f"300 one-byte clients open: {what}")
        r, took = timed(request, srv.port, "POST", "/v1/chat/completions",
                        chat_body(max_tokens=4), timeout=10.0)
        check(r is not None and r.status == 200 and took < 5.0,
              f"300 one-byte clients open: a 4-token completion {r!r} after {took:.1f} s "
              f"(wanted 200 within 5 s)")
    finally:
        close_all(socks)


def check_read_timeout(srv):
    s_limit = 3  # --read-timeout 3
    drip = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 64\r\n\r\n")
    t0 = time.time()
    partial = open_sockets(srv.port, 10, b"G")
    idle = open_sockets(srv.port, 5)
    drips = open_sockets(srv.port, 5, drip[:1])
    sent = 1
    kinds = {**{s: "one byte" for s in partial}, **{s: "idle" for s in idle},
             **{s: "one byte every 0.5 s" for s in drips}}
    closed, got = {}, {s: b"" for s in kinds}
    next_drip = t0 + 0.5
    try:
        ok, what = health_within(srv.port, 1.0)
        check(ok, f"--read-timeout 3, 20 slow clients open: {what}")
        while len(closed) < len(kinds) and time.time() < t0 + s_limit + 4:
            if time.time() >= next_drip and sent < len(drip):
                for s in drips:
                    if s not in closed:
                        try:
                            s.send(drip[sent:sent + 1])
                        except OSError:
                            pass
                sent += 1
                next_drip += 0.5
            ready, _, _ = select.select([s for s in kinds if s not in closed], [], [], 0.05)
            for s in ready:
                done, data = closed_by_server(s)
                got[s] += data
                if done:
                    closed[s] = time.time() - t0
        for s, kind in kinds.items():
            when = closed.get(s)
            check(when is not None and when <= s_limit + 2,
                  f"--read-timeout 3: a client sending {kind} was closed after "
                  f"{'never' if when is None else f'{when:.1f} s'} (wanted within {s_limit + 2} s)")
            if kind != "idle":
                check(got[s].startswith(b"HTTP/1.1 408"),
                      f"--read-timeout 3: a client sending {kind} got {got[s][:120]!r}, wanted 408")
                body = got[s].partition(b"\r\n\r\n")[2]
                if got[s].startswith(b"HTTP/1.1 408") and body:
                    r = Reply()
                    r.status, r.body = 408, body
                    err = error_shape(r)
                    check(err is None, f"--read-timeout 3: the 408's body: {err}")
    finally:
        close_all(kinds)


def count_closed(socks, wait):
    """How many of `socks` the server closed, waiting up to `wait` s."""
    closed = set()
    deadline = time.time() + wait
    while time.time() < deadline:
        ready, _, _ = select.select([s for s in socks if s not in closed], [], [], 0.05)
        for s in ready:
            if closed_by_server(s)[0]:
                closed.add(s)
        if not ready and len(closed) >= len(socks):
            break
    return closed


def open_idle(port, n, what):
    """n idle sockets; /health must still answer within 1 s beside them."""
    socks = open_sockets(port, n)
    ok, how = health_within(port, 1.0)
    check(ok, f"{what}, {n} idle sockets: {how}")
    return socks


def check_per_client_cap(srv):
    socks = []
    try:
        socks = open_idle(srv.port, 100, "--max-connections-per-client 50")
        closed = count_closed(socks, 2.0)
        check(len(closed) >= 50 and socks[0] in closed,
              f"--max-connections-per-client 50: the server closed {len(closed)} of 100 idle "
              f"sockets (wanted >= 50, the oldest first; the oldest closed: {socks[0] in closed})")
    finally:
        close_all(socks)


def check_total_cap(srv):
    socks = []
    try:
        socks = open_idle(srv.port, 20, "--max-connections 4")
        close_all(socks)
        socks = []
        for _ in range(4):
            s, got = stream_request(srv.port)
            socks.append(s)
            check(b" 200 " in got.split(b"\r\n")[0], f"--max-connections 4: a stream {got[:100]!r}")
        with connect(srv.port, 3) as s:  # a fifth: 503, then closed
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            reader = ReplyReader(s)
            r = reader.next(time.time() + 3)
            expect_error(r, 503, "--max-connections 4, 4 streams running: a fifth connection")
            end = time.time() + 1
            while not reader.eof and reader._fill(end):
                pass
            check(reader.eof, "--max-connections 4: the fifth connection stayed open after its 503")
    finally:
        close_all(socks)
    t0 = time.time()  # the streams' clients hung up: their connections go
    while time.time() - t0 < 3 and not health_within(srv.port, 1.0)[0]:
        time.sleep(0.1)


# ---------------------------------------------------------------- shutdown

def check_sigterm_slow_sockets(srv):
    socks = open_sockets(srv.port, 30, b"P") + open_sockets(srv.port, 30)
    try:
        time.sleep(0.2)
        t0 = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        try:
            code = srv.proc.wait(timeout=2 + 5)
        except Exception:  # noqa: BLE001 - TimeoutExpired
            code = None
        took = time.time() - t0
        check(code == 0, f"SIGTERM with 60 slow sockets open (--shutdown-timeout 2): exit status "
                         f"{code} after {took:.1f} s (wanted 0 within 7 s)")
    finally:
        close_all(socks)


def check_shutdown_cuts_stream(srv):
    s, got = stream_request(srv.port)
    check(b" 200 " in got.split(b"\r\n")[0], f"the stream did not start: {got[:200]!r}")
    t0 = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    reader = ReplyReader(s)
    reader.buf = got
    r = reader.next(time.time() + 15)
    s.close()
    try:
        code = srv.proc.wait(timeout=max(0.1, t0 + 1 + 5 - time.time()))
    except Exception:  # noqa: BLE001 - TimeoutExpired
        code = None
    check(code == 0, f"SIGTERM with a stream running (--shutdown-timeout 1): exit status {code} "
                     f"after {time.time() - t0:.1f} s (wanted 0 within 6 s)")
    if r is None:
        check(False, "the cut stream: no reply")
        return
    events = sse_events(r.body)
    check(r.chunked_end, f"the cut stream's chunked body did not end (0 chunk): "
                         f"{r.body[-300:]!r}")
    check(len(events) >= 2 and events[-1] == "[DONE]",
          f"the cut stream does not end with [DONE]: {events[-3:]}")
    err = None
    if len(events) >= 2:
        try:
            err = json.loads(events[-2]).get("error")
        except ValueError:
            err = None
    check(isinstance(err, dict) and isinstance(err.get("message"), str) and
          isinstance(err.get("type"), str) and isinstance(err.get("code"), int),
          f"the cut stream's last chunk before [DONE] is no error object: {events[-3:]}")


def check_draining(srv):
    s, got = stream_request(srv.port)
    check(b" 200 " in got.split(b"\r\n")[0], f"the stream did not start: {got[:200]!r}")
    t0 = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    r = None
    while time.time() - t0 < 3:
        r = request(srv.port, "GET", "/v1/models", timeout=2.0)
        if r is None or r.status != 200:
            break
        time.sleep(0.05)
    expect_error(r, 503, "/v1/models while draining")
    s.close()  # the running request goes: the server may stop early
    try:
        code = srv.proc.wait(timeout=max(0.1, t0 + 5 + 5 - time.time()))
    except Exception:  # noqa: BLE001 - TimeoutExpired
        code = None
    check(code == 0, f"draining: exit status {code} (wanted 0 within 10 s)")


# ---------------------------------------------------------------- ranges

def check_ranges(srv):
    page = request(srv.port, "GET", "/", timeout=5.0)
    check(page is not None and page.status == 200 and page.body, f"GET /: {page!r}")
    if page is None or page.status != 200:
        return
    ranges = "bytes=" + ",".join(["0-"] * 2650)  # each the whole page: 8 KB of header
    data = (f"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nRange: {ranges}\r\n\r\n"
            ).encode()
    try:
        with connect(srv.port, 10) as s:
            s.sendall(data)
            reader = ReplyReader(s, limit=2 * len(page.body) + 65536)
            r = reader.next(time.time() + 10)
    except OSError as e:
        check(False, f"GET / with 2,650 ranges: {e!r}")
        return
    check(r is not None and r.status in (200, 416),
          f"GET / with 2,650 ranges ({len(ranges)} B header): {r!r}, wanted 200 or 416")
    if r is not None and r.status == 200:
        check(r.body == page.body, f"GET / with 2,650 ranges: a {len(r.body)} B body, "
                                   f"the page is {len(page.body)} B")
    check(r is None or len(r.body) <= len(page.body),
          f"GET / with 2,650 ranges: {len(r.body) if r else 0} B body > the page's "
          f"{len(page.body)} B")


# ---------------------------------------------------------------- abandoned requests

def check_abandoned(srv):
    idle = metrics_of(srv.port)
    data = json.dumps(chat_body([{"role": "user", "content": LONG_PROMPT}], 1000)).encode()
    socks = []
    for _ in range(4):
        s = connect(srv.port, 5)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nContent-Length: " + str(len(data)).encode() +
                  b"\r\n\r\n" + data)
        socks.append(s)
    # A fresh server's first prompts take a while.
    wait_metrics(srv.port, lambda m: m.get("minfer_sequences_running", 0) >= 1, 10, 0.05)
    time.sleep(1.0)
    busy = metrics_of(srv.port, timeout=2.0)
    keys = ("minfer_sequences_running", "minfer_sequences_waiting", "minfer_kv_pages_used")
    check(busy.get("minfer_sequences_running", 0) >= 1,
          f"four 1000-token requests are not running: { {k: busy.get(k) for k in keys} }")
    close_all(socks)

    def idle_again(m):
        return (m.get("minfer_sequences_running") == 0 and
                m.get("minfer_kv_pages_used", 1e9) <= idle.get("minfer_kv_pages_used", 0))
    now = wait_metrics(srv.port, idle_again, 3.0, 0.1)
    check(idle_again(now),
          f"3 s after four clients hung up: { {k: now.get(k) for k in keys} } "
          f"(idle { {k: idle.get(k) for k in keys} }, busy { {k: busy.get(k) for k in keys} })")


def main():
    return run_suite([
        ("300 one-byte clients", check_slow_clients),
        ("--read-timeout 3", check_read_timeout, {"flags": ("--read-timeout", "3")}),
        ("--max-connections-per-client 50", check_per_client_cap,
         {"flags": ("--max-connections-per-client", "50")}),
        ("--max-connections 4", check_total_cap, {"flags": ("--max-connections", "4")}),
        ("SIGTERM with slow sockets", check_sigterm_slow_sockets,
         {"flags": ("--shutdown-timeout", "2"), "fresh": True, "exits": True}),
        ("2,650 ranges", check_ranges),
        ("abandoned requests", check_abandoned),
        ("shutdown cuts a stream", check_shutdown_cuts_stream,
         {"flags": ("--shutdown-timeout", "1"), "fresh": True, "exits": True}),
        ("/v1/models while draining", check_draining,
         {"flags": ("--shutdown-timeout", "5"), "fresh": True, "exits": True}),
    ])


if __name__ == "__main__":
    sys.exit(main())
