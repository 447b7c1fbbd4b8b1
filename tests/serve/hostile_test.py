#!/usr/bin/env python3
"""`minfer serve` against hostile input, on the real Gemma 3 270M: one check
(or a few) per finding of the security review, each asserting the fixed
behaviour. Between checks and at the end /health answers 200 within 1 s; a
check that kills the server is reported as a crash and the rest run on a
fresh one.

  python3 tests/serve/hostile_test.py MINFER_BINARY [CHECK_NAME_PREFIX...]

1. nesting: bodies nesting arrays or objects deeper than 64 levels (a
   json_schema whose `items` nest 2,000 deep, a content list 100,000 and
   3,000,000 deep, a schema value 100,000 deep, a prompt and a /tokenize
   body 100,000 deep, a body 70 deep, and 100,000 deep at /completion,
   /apply-template and the Anthropic endpoints, whose error object is
   Anthropic's, a tool's parameters, an earlier call's arguments and
   chat_template_kwargs 100,000 deep, and Anthropic's input_schema, tool_use
   input and tool_result content 100,000 deep) are 400 naming "64"; a schema 20 deep
   still answers 200 and a call's arguments *text* 100,000 deep is read (200,
   or the prompt's 400 for the context it exceeds); 2,000 tools
   with a call required are 400 naming the grammar's branching limit.
2. slow clients: 300 connections that each sent one byte leave /health
   answering within 1 s and a 4-token completion prompt; with --read-timeout
   3 partial requests (one byte, or one byte every 0.5 s) get 408 and are
   closed, idle ones closed, within 3 + 2 s; with --max-connections-per-client
   50, 100 idle sockets leave /health answering (the oldest closed); with
   --max-connections 4, 20 idle sockets leave /health answering, and with 4
   streams running a fifth connection gets 503 and is closed.
3. shutdown with slow sockets open: SIGTERM (--shutdown-timeout 2) exits 0
   within 2 + 5 s.
4. costly schemas: a 100,000-value enum is 4xx within 2 s and a concurrent
   4-token request is not held up; 10,000 properties are 4xx or 200, never
   5xx; arrays nested 70 deep through $defs with minItems 1 are 400 at once.
5. chunked bodies: 9 MiB is 413 (an error object); a 256 MiB never-ending
   one is answered 413 and closed soon past 8 MiB while the server's RSS
   grows by less than 64 MiB.
6. GET / with 2,650 ranges: 200 with the page itself (or 416), never a
   multi-range 206.
7. four non-streamed requests whose clients hang up after 1 s are cancelled:
   within 3 s nothing runs and the KV pages are back.
8. SIGTERM with --shutdown-timeout 1 cuts a running stream with an error
   chunk, then [DONE], then the chunked body's end; exit 0.
9. status codes, each with an error object whose code is the status: token
   id out of the vocabulary in a streamed prompt 400, target over 8 KiB 414,
   headers over 16 KiB 431, bad chunk size 400, unknown method 501 (405 on a known path), GET on a
   POST path 405 + Allow, Content-Length -1 or 2^64 400 within 1 s, a POST
   without a length 411 within 1 s, /v1/models while draining 503; with
   --api-key a key followed by a NUL byte is 401/400, HEAD / needs no key;
   logit_bias +100 forces a token and -100 bans greedy's; 100,000 messages
   400 within 1 s.
10. embeddings (--embedding --pooling mean): /v1/embeddings and /embedding
   bodies 100,000 deep are 400 naming "64"; a 6 MB text is 400
   exceed_context_size_error within 1 s (never tokenized); 2,049 inputs are
   400 within 1 s; a client that hangs up on 64 inputs has none running
   within 3 s, and the KV pages are back.

Every socket wait has a deadline; no check waits longer than ~30 s.
"""
import json
import select
import signal
import socket
import sys
import threading
import time
import traceback

from serve_testutil import (FAILURES, Reply, ReplyReader, check, connect, end_server,
                            error_shape, exchange, finish, gemma_path, health_within,
                            metrics_of, request, rss_mib, start_server)

RESULTS = []  # (check, pass | fail | crash | no server, seconds)
USER_HI = [{"role": "user", "content": "Hi"}]
# Greedy Gemma 3 270M keeps counting far past 1000 tokens on this prompt.
LONG_PROMPT = "Count from 1 to 2000, one number per line, with no other text."


# ---------------------------------------------------------------- harness

class Harness:
    """Servers by their flags, started on demand and replaced when dead."""

    def __init__(self, model):
        self.model, self.servers = model, {}

    def server(self, flags, fresh=False):
        srv = self.servers.get(flags)
        if srv is not None and (fresh or srv.proc.poll() is not None):
            self.retire(flags)
            srv = None
        if srv is None:
            srv = start_server(self.model, *flags)
            if srv is not None:
                self.servers[flags] = srv
        return srv

    def retire(self, flags):
        srv = self.servers.pop(flags, None)
        if srv is not None and srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait(timeout=10)

    def close(self):
        for flags, srv in list(self.servers.items()):
            if srv.proc.poll() is None:
                code = end_server(srv, signal.SIGTERM, timeout=15)
                check(code == 0, f"the server {list(flags)} exited with {code} on SIGTERM")
            self.servers.pop(flags)


def run_check(h, only, name, fn, flags=(), fresh=False, exits=False):
    """Runs fn(srv) on the server with `flags`; records pass/fail/crash. A
    check that fails or kills the server leaves a fresh one for the next."""
    if only and not any(name.startswith(p) for p in only):
        return
    print(f"-- {name}", flush=True)
    t0, n0 = time.time(), len(FAILURES)
    srv = h.server(tuple(flags), fresh=fresh)
    if srv is None:
        RESULTS.append((name, "no server", time.time() - t0))
        return
    try:
        fn(srv)
    except Exception:  # noqa: BLE001 - a check's own error is its failure
        check(False, f"{name} raised:\n{traceback.format_exc()}")
    code = srv.proc.poll()
    if code is None and not exits and not health_within(srv.port, 1.0)[0]:
        try:  # no answer: dying, or just slow?
            code = srv.proc.wait(timeout=1.0)
        except Exception:  # noqa: BLE001 - TimeoutExpired: alive
            code = None
    died = code is not None and not exits
    if died:
        check(False, f"{name}: the server died (exit status {code})")
        if getattr(srv, "log", None):
            print("server stderr:", "".join(srv.log[-10:])[-1500:], flush=True)
    elif not exits:
        ok, what = health_within(srv.port, 1.0)
        check(ok, f"after {name}: {what}")
    took = time.time() - t0
    result = "pass" if len(FAILURES) == n0 else "crash" if died else "fail"
    if result != "pass" or exits:
        h.retire(tuple(flags))
    RESULTS.append((name, result, took))
    print(f"   {result} ({took:.1f} s)", flush=True)


def expect_error(r, statuses, what, needle=None, within=None, took=None, anthropic=False):
    """r is one of `statuses` with the error object (Anthropic's, with
    `anthropic`); its message holds needle."""
    statuses = statuses if isinstance(statuses, (tuple, list, range)) else (statuses,)
    if r is None:
        check(False, f"{what}: no reply")
        return
    check(r.status in statuses, f"{what}: status {r.status}, wanted {list(statuses)}: {r!r}")
    if r.status in statuses:
        err = error_shape(r, anthropic)
        check(err is None, f"{what}: {err}")
        if needle is not None and err is None:
            msg = json.loads(r.body)["error"]["message"]
            check(needle in msg, f"{what}: {needle!r} not in the message {msg!r}")
    if within is not None:
        check(took is not None and took <= within, f"{what}: answered after {took:.2f} s, "
                                                   f"wanted within {within} s")


def timed(fn, *a, **kw):
    t0 = time.time()
    r = fn(*a, **kw)
    return r, time.time() - t0


def chat_body(messages=None, max_tokens=4, **kw):
    return {"messages": messages or USER_HI, "max_tokens": max_tokens, "temperature": 0, **kw}


def post_raw(port, path, data, timeout=10.0, extra=b""):
    return exchange(port, b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\nConnection: close\r\n" + extra +
                    b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data, timeout)


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


def open_sockets(port, n, first=b""):
    socks = []
    for _ in range(n):
        s = connect(port, 5)
        if first:
            s.sendall(first)
        socks.append(s)
    return socks


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


# ---------------------------------------------------------------- 1. nesting

def nested_schema(depth):
    # The review's repro: `items` nested `depth` deep.
    return ('{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"response_format":'
            '{"type":"json_schema","json_schema":{"schema":' + '{"type":"array","items":' * depth +
            '{"type":"integer"}' + "}" * depth + "}}}").encode()


DEEP = 100_000
NESTING = {  # check name: {what: (path, body)}
    "1a nesting: schema items 2,000 deep": {
        "schema items 2,000 deep": ("/v1/chat/completions", nested_schema(2000))},
    "1b nesting: content 100,000 and 3,000,000 deep": {
        "content list 100,000 deep": (
            "/v1/chat/completions",
            b'{"messages":[{"role":"user","content":' + b"[" * DEEP + b"]" * DEEP + b"}]}"),
        # 6 MB, under the body limit: deep enough to overflow the stack of any
        # recursive copy or destructor (a release build survives 100,000).
        "content list 3,000,000 deep": (
            "/v1/chat/completions",
            b'{"messages":[{"role":"user","content":' + b"[" * (30 * DEEP) + b"]" * (30 * DEEP) +
            b"}]}")},
    "1c nesting: schema value 100,000 deep": {
        "schema value 100,000 deep": (
            "/v1/chat/completions",
            b'{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"response_format":'
            b'{"type":"json_schema","json_schema":{"schema":{"type":"object","default":' +
            b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}}}}")},
    "1d nesting: prompt, /tokenize, 70 deep": {
        "prompt 100,000 deep": ("/v1/completions",
                                b'{"max_tokens":4,"prompt":' + b"[" * DEEP + b"]" * DEEP + b"}"),
        "/tokenize 100,000 deep": ("/tokenize",
                                   b'{"content":"x","extra":' + b"[" * DEEP + b"]" * DEEP + b"}"),
        "a body 70 deep": ("/v1/chat/completions",
                           b'{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"x":' +
                           b"[" * 70 + b"]" * 70 + b"}")},
    # The tool-calling fields: a tool's parameters schema, an earlier call's
    # arguments, chat_template_kwargs.
    "1g nesting: tools, tool_calls, chat_template_kwargs, 100,000 deep": {
        "tools[0].function.parameters": (
            "/v1/chat/completions",
            b'{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"tools":[{"type":'
            b'"function","function":{"name":"f","parameters":{"type":"object","properties":'
            b'{"a":' + b'{"items":' * DEEP + b"{}" + b"}" * DEEP + b"}}}}]}"),
        "tool_calls arguments": (
            "/v1/chat/completions",
            b'{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":'
            b'"function","function":{"name":"f","arguments":' + b"[" * DEEP + b"]" * DEEP +
            b'}}]}],"max_tokens":4}'),
        "chat_template_kwargs": (
            "/v1/chat/completions",
            b'{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,'
            b'"chat_template_kwargs":{"x":' + b"[" * DEEP + b"]" * DEEP + b"}}")},
    # Anthropic's: a tool's input_schema, an earlier tool_use's input, a
    # tool_result's content.
    "1h nesting: input_schema, tool_use input, tool_result content, 100,000 deep": {
        "tools[0].input_schema": (
            "/v1/messages",
            b'{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"Hi"}],'
            b'"tools":[{"name":"f","input_schema":{"type":"object","properties":{"a":' +
            b'{"items":' * DEEP + b"{}" + b"}" * DEEP + b"}}}]}"),
        "tool_use input": (
            "/v1/messages",
            b'{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"Hi"},'
            b'{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":'
            b'{"a":' + b"[" * DEEP + b"]" * DEEP + b"}}]}]}"),
        "tool_result content": (
            "/v1/messages/count_tokens",
            b'{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result",'
            b'"tool_use_id":"t","content":' + b"[" * DEEP + b"]" * DEEP + b"}]}]}")},
    "1f nesting: the other front doors, 100,000 deep": {
        "/completion": ("/completion",
                        b'{"n_predict":4,"prompt":' + b"[" * DEEP + b"]" * DEEP + b"}"),
        "/apply-template": ("/apply-template", b'{"messages":[{"role":"user","content":' +
                            b"[" * DEEP + b"]" * DEEP + b"}]}"),
        "/v1/messages": ("/v1/messages", b'{"model":"m","max_tokens":4,"messages":[{"role":'
                         b'"user","content":' + b"[" * DEEP + b"]" * DEEP + b"}]}"),
        "/v1/messages/count_tokens": (
            "/v1/messages/count_tokens", b'{"model":"m","messages":[{"role":"user","content":' +
            b"[" * DEEP + b"]" * DEEP + b"}]}")},
}


def nesting_check(bodies):
    def run(srv):
        for what, (path, data) in bodies.items():
            r = post_raw(srv.port, path, data, 10.0)
            expect_error(r, 400, f"nesting, {what}", needle="64",
                         anthropic=path.startswith("/v1/messages"))
            if srv.proc.poll() is not None:
                return  # the harness reports the crash
    return run


def check_nesting_ok(srv):
    # A schema 20 deep (about 27 levels of body) is no concern of the limit.
    r = post_raw(srv.port, "/v1/chat/completions", nested_schema(20), 30.0)
    check(r is not None and r.status == 200, f"nesting, a schema 20 deep: {r!r}")
    # An earlier call's arguments as a JSON string nesting 100,000 deep: no
    # body nesting, so read, and handed to the template as the string.
    args = json.dumps("[" * DEEP + "]" * DEEP)
    r = post_raw(srv.port, "/v1/chat/completions", (
        '{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,'
        '"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":' + args +
        '}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],"max_tokens":4}').encode(), 30.0)
    check(r is not None and (r.status == 200 or (r.status == 400 and b"context" in r.body)),
          f"nesting, arguments text 100,000 deep: {r!r}")
    # 2,000 tools, one call required: the union of their calls is past the
    # grammar's branching limit, refused naming it before anything runs.
    tools = [{"type": "function", "function": {"name": f"f{i}"}} for i in range(2000)]
    r, took = timed(post_raw, srv.port, "/v1/chat/completions", json.dumps(chat_body(
        tools=tools, tool_choice="required")).encode(), 10.0)
    expect_error(r, 400, "2,000 tools, a call required", needle="1024", within=3.0, took=took)


# ---------------------------------------------------------------- 2. slow clients

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


def check_per_client_cap(srv):
    socks = []
    try:
        socks = open_sockets(srv.port, 100)
        ok, what = health_within(srv.port, 1.0)
        check(ok, f"--max-connections-per-client 50, 100 idle sockets: {what}")
        closed = count_closed(socks, 2.0)
        check(len(closed) >= 50 and socks[0] in closed,
              f"--max-connections-per-client 50: the server closed {len(closed)} of 100 idle "
              f"sockets (wanted >= 50, the oldest first; the oldest closed: {socks[0] in closed})")
    finally:
        close_all(socks)


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


def check_total_cap(srv):
    socks = []
    try:
        socks = open_sockets(srv.port, 20)
        ok, what = health_within(srv.port, 1.0)
        check(ok, f"--max-connections 4, 20 idle sockets: {what}")
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


# ---------------------------------------------------------------- 3. shutdown, slow sockets

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


# ---------------------------------------------------------------- 4. costly schemas

def schema_body(schema, max_tokens=4):
    return json.dumps(chat_body(max_tokens=max_tokens, response_format={
        "type": "json_schema", "json_schema": {"name": "x", "schema": schema}})).encode()


def check_costly_enum(srv):
    small = json.dumps(chat_body(max_tokens=4)).encode()
    _, baseline = timed(post_raw, srv.port, "/v1/chat/completions", small, 10.0)
    big = schema_body({"enum": [f"value-{i:06d}" for i in range(100_000)]})
    out = {}

    def send_big():
        out["r"], out["took"] = timed(post_raw, srv.port, "/v1/chat/completions", big, 15.0)
    t = threading.Thread(target=send_big)
    t.start()
    time.sleep(0.2)
    r, took = timed(post_raw, srv.port, "/v1/chat/completions", small, 15.0)
    t.join(20)
    check(r is not None and r.status == 200 and took <= baseline + 2.0,
          f"a 4-token request beside a 100,000-value enum: {r!r} after {took:.2f} s "
          f"(alone {baseline:.2f} s; wanted within + 2 s)")
    big_r = out.get("r")
    check(big_r is not None and 400 <= big_r.status < 500 and out["took"] <= 2.0,
          f"a 100,000-value enum ({len(big) >> 10} KiB): {big_r!r} after "
          f"{out.get('took', -1):.2f} s (wanted a 4xx within 2 s)")
    if big_r is not None and 400 <= big_r.status < 500:
        check(error_shape(big_r) is None, f"the enum's error: {error_shape(big_r)}")


def check_costly_properties(srv):
    props = {f"p{i}": {"type": "integer"} for i in range(10_000)}
    r, took = timed(post_raw, srv.port, "/v1/chat/completions",
                    schema_body({"type": "object", "properties": props}), 25.0)
    check(r is not None and (r.status == 200 or 400 <= r.status < 500),
          f"10,000 properties: {r!r} after {took:.1f} s (wanted 4xx or 200 within 25 s)")
    if r is not None and 400 <= r.status < 500:
        check(error_shape(r) is None, f"10,000 properties: {error_shape(r)}")


def check_deep_refs(srv):
    defs = {f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}, "minItems": 1}
            for i in range(69)}
    defs["d69"] = {"type": "array", "items": {"type": "integer"}, "minItems": 1}
    r, took = timed(post_raw, srv.port, "/v1/chat/completions",
                    schema_body({"$ref": "#/$defs/d0", "$defs": defs}), 10.0)
    expect_error(r, 400, "arrays nested 70 deep through $defs", within=2.0, took=took)


# ---------------------------------------------------------------- 5. chunked bodies

def send_chunked(port, total, deadline, rss_pid=None):
    """POSTs a chunked body of `total` bytes (64 KiB chunks; the 0 chunk only
    when all went). Returns (Reply or None, bytes sent when the server answered
    or stopped reading, whether the server closed after, peak RSS MiB)."""
    s = connect(port, 5)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
              b"\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"{" + b" " * (64 * 1024 - 1)
    chunk = b"%x\r\n" % len(piece) + piece + b"\r\n"
    sent, peak = 0, rss_mib(rss_pid) if rss_pid else -1
    s.settimeout(2.0)
    try:
        while sent < total and time.time() < deadline:
            readable, _, _ = select.select([s], [], [], 0)
            if readable:
                break
            s.sendall(chunk)
            sent += len(piece)
            if rss_pid and sent % (1 << 20) == 0:
                peak = max(peak, rss_mib(rss_pid))
        else:
            if sent >= total:
                s.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # it stopped reading (or closed): its reply is read below
    if rss_pid:
        peak = max(peak, rss_mib(rss_pid))
    reader = ReplyReader(s)
    r = reader.next(min(deadline, time.time() + 10))
    closed = False
    if r is not None:
        end = time.time() + 2
        while not reader.eof and time.time() < end:
            reader._fill(end)
        closed = reader.eof
    s.close()
    return r, sent, closed, peak


def check_chunked_9mib(srv):
    r, sent, _, _ = send_chunked(srv.port, 9 << 20, time.time() + 20)
    expect_error(r, 413, f"a chunked 9 MiB body ({sent >> 20} MiB sent)")


def check_chunked_endless(srv):
    pid = srv.proc.pid
    before = rss_mib(pid)
    r, sent, closed, peak = send_chunked(srv.port, 256 << 20, time.time() + 20, rss_pid=pid)
    expect_error(r, 413, "a never-ending chunked body")
    # Past 8 MiB the server answers; the socket buffers on both sides hold a
    # few MiB more that it need not read.
    check(r is not None and sent <= 24 << 20,
          f"a never-ending chunked body: {sent >> 20} MiB went before the answer {r!r}")
    check(closed, f"a never-ending chunked body: the connection stayed open after {r!r}")
    check(peak - before < 64, f"a never-ending chunked body: RSS {before:.0f} -> {peak:.0f} MiB "
                              f"(wanted under + 64 MiB)")


# ---------------------------------------------------------------- 6. ranges

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


# ---------------------------------------------------------------- 7. abandoned requests

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
    t0, busy = time.time(), {}
    while time.time() - t0 < 10:  # a fresh server's first prompts take a while
        busy = metrics_of(srv.port, timeout=2.0)
        if busy.get("minfer_sequences_running", 0) >= 1:
            break
        time.sleep(0.05)
    time.sleep(1.0)
    busy = metrics_of(srv.port, timeout=2.0)
    keys = ("minfer_sequences_running", "minfer_sequences_waiting", "minfer_kv_pages_used")
    check(busy.get("minfer_sequences_running", 0) >= 1,
          f"four 1000-token requests are not running: { {k: busy.get(k) for k in keys} }")
    close_all(socks)
    t0, now = time.time(), {}
    while time.time() - t0 < 3.0:
        now = metrics_of(srv.port, timeout=2.0)
        if (now.get("minfer_sequences_running") == 0 and
                now.get("minfer_kv_pages_used", 1e9) <= idle.get("minfer_kv_pages_used", 0)):
            break
        time.sleep(0.1)
    check(now.get("minfer_sequences_running") == 0 and
          now.get("minfer_kv_pages_used", 1e9) <= idle.get("minfer_kv_pages_used", 0),
          f"3 s after four clients hung up: { {k: now.get(k) for k in keys} } "
          f"(idle { {k: idle.get(k) for k in keys} }, busy { {k: busy.get(k) for k in keys} })")


# ---------------------------------------------------------------- 8. shutdown cuts streams

def sse_events(body):
    return [line[6:] for line in body.decode("utf-8", "replace").split("\n")
            if line.startswith("data: ")]


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


# ---------------------------------------------------------------- 9. status codes

def check_bad_token_id(srv):
    r = request(srv.port, "POST", "/v1/completions",
                {"prompt": [2, 10 ** 9], "max_tokens": 4, "stream": True}, timeout=10.0)
    expect_error(r, 400, "a streamed prompt with token id 10**9")


def check_long_target(srv):
    r = exchange(srv.port, b"GET /health?x=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 5.0)
    expect_error(r, 414, "a 9 KB request target")


def check_long_headers(srv):
    r = exchange(srv.port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 17000 +
                 b"\r\n\r\n", 5.0)
    expect_error(r, 431, "a 17 KB header")
    r = exchange(srv.port, b"GET /health HTTP/1.1\r\nHost: x\r\n" +
                 b"".join(b"X-H%d: %s\r\n" % (i, b"c" * 90) for i in range(200)) + b"\r\n", 5.0)
    expect_error(r, 431, "200 headers of 100 B")


def check_bad_chunk_size(srv):
    r = exchange(srv.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 b"application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
                 5.0)
    expect_error(r, 400, "a chunk size 'zz'")


def check_methods(srv):
    # A method HTTP does not define: 501 where no endpoint has the path, 405
    # (with what the path allows) where one has.
    r = exchange(srv.port, b"BREW /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 5.0)
    expect_error(r, 501, "BREW /nowhere")
    r = exchange(srv.port, b"BREW / HTTP/1.1\r\nHost: x\r\n\r\n", 5.0)
    expect_error(r, 405, "BREW /")
    r = request(srv.port, "GET", "/v1/chat/completions", timeout=5.0)
    expect_error(r, 405, "GET /v1/chat/completions")
    check(r is not None and "POST" in (r.header("allow") or ""),
          f"GET /v1/chat/completions: Allow {r.header('allow') if r else None!r}")


def check_lengths(srv):
    for length in (b"-1", b"18446744073709551616"):
        r, took = timed(exchange, srv.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Type: application/json\r\nContent-Length: " + length +
                        b"\r\n\r\n{}", 3.0)
        expect_error(r, 400, f"Content-Length: {length.decode()}", within=1.0, took=took)
    r, took = timed(exchange, srv.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\n\r\n", 3.0)
    expect_error(r, 411, "a POST with no length", within=1.0, took=took)


def check_many_messages(srv):
    msgs = [{"role": "user", "content": "hi"}] * 100_000
    r, took = timed(post_raw, srv.port, "/v1/chat/completions",
                    json.dumps(chat_body(msgs)).encode(), 10.0)
    expect_error(r, 400, "100,000 messages", within=1.0, took=took)


def tokens(port, text):
    r = request(port, "POST", "/tokenize", {"content": text}, timeout=5.0)
    return json.loads(r.body)["tokens"] if r is not None and r.status == 200 else None


def first_token(port, **extra):
    r = request(port, "POST", "/v1/completions",
                {"prompt": "The capital of France is", "max_tokens": 1, "temperature": 0,
                 **extra}, timeout=15.0)
    if r is None or r.status != 200:
        return None, r
    return json.loads(r.body)["choices"][0]["text"], r


def check_logit_bias(srv):
    p = srv.port
    greedy, r = first_token(p)
    check(greedy, f"logit_bias: the greedy first token: {r!r}")
    ids = tokens(p, greedy.strip() or greedy) if greedy else None
    forced = tokens(p, " banana")
    check(ids and forced, f"logit_bias: /tokenize {ids} {forced}")
    if not (greedy and ids and forced):
        return
    x = forced[-1]
    want = request(p, "POST", "/detokenize", {"tokens": [x]}, timeout=5.0)
    want = json.loads(want.body)["content"] if want and want.status == 200 else None
    got, r = first_token(p, logit_bias={str(x): 100})
    check(got is not None and want is not None and got.strip() == want.strip(),
          f"logit_bias {{{x}: +100}}: first token {got!r}, wanted {want!r} ({r!r})")
    # The token greedy picks: tokenized as it came, and without its space.
    g_ids = set((tokens(p, greedy) or [])[:1])
    if greedy.strip():
        g_ids |= set(ids[:1])
    got, r = first_token(p, logit_bias={str(g): -100 for g in g_ids})
    check(got is not None and got != greedy,
          f"logit_bias -100 on greedy's {sorted(g_ids)} ({greedy!r}): first token {got!r} ({r!r})")


def check_api_key(srv):
    p = srv.port
    r = request(p, "GET", "/v1/models", timeout=5.0)
    check(r is not None and r.status == 401, f"--api-key, no key: {r!r}")
    r = request(p, "GET", "/v1/models", headers={"Authorization": "Bearer KEY"}, timeout=5.0)
    check(r is not None and r.status == 200, f"--api-key, the key: {r!r}")
    r = exchange(p, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer KEY\x00junk"
                 b"\r\nConnection: close\r\n\r\n", 5.0)
    check(r is not None and r.status in (400, 401),
          f"--api-key, 'Bearer KEY\\0junk': {r!r}, wanted 401 or 400")
    if r is not None and r.status in (400, 401):
        check(error_shape(r) is None, f"--api-key, 'Bearer KEY\\0junk': {error_shape(r)}")
    r = request(p, "GET", "/", timeout=5.0)
    check(r is not None and r.status == 200, f"--api-key, GET / without a key: {r!r}")
    r = request(p, "HEAD", "/", timeout=5.0)
    check(r is not None and r.status == 200, f"--api-key, HEAD / without a key: {r!r}")


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


# ---------------------------------------------------------------- 10. embeddings

EMBEDDING_FLAGS = ("--embedding", "--pooling", "mean")


def check_embeddings(srv):
    for path, data in [("/v1/embeddings", b'{"input":' + b"[" * DEEP + b"]" * DEEP + b"}"),
                       ("/embedding", b'{"content":' + b"[" * DEEP + b"]" * DEEP + b"}")]:
        expect_error(post_raw(srv.port, path, data, 10.0), 400, f"{path} 100,000 deep",
                     needle="64")
    huge = json.dumps({"input": "word " * 1_200_000}).encode()
    r, took = timed(post_raw, srv.port, "/v1/embeddings", huge, 10.0)
    expect_error(r, 400, "a 6 MB input", needle="context", within=1.0, took=took)
    many = json.dumps({"input": ["x"] * 2049}).encode()
    r, took = timed(post_raw, srv.port, "/v1/embeddings", many, 10.0)
    expect_error(r, 400, "2,049 inputs", needle="2048", within=1.0, took=took)


def check_embeddings_abandoned(srv):
    idle = metrics_of(srv.port)
    data = json.dumps({"input": [f"{i} " + LONG_PROMPT * 6 for i in range(64)]}).encode()
    s = connect(srv.port, 5)
    s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    t0, busy = time.time(), {}
    while time.time() - t0 < 10:
        busy = metrics_of(srv.port, timeout=2.0)
        if busy.get("minfer_sequences_running", 0) >= 1:
            break
        time.sleep(0.05)
    check(busy.get("minfer_sequences_running", 0) >= 1, "64 embedding inputs are not running")
    close_all([s])
    t0, now = time.time(), {}
    while time.time() - t0 < 3.0:
        now = metrics_of(srv.port, timeout=2.0)
        if (now.get("minfer_sequences_running") == 0 and now.get("minfer_sequences_waiting") == 0
                and now.get("minfer_kv_pages_used", 1e9) <= idle.get("minfer_kv_pages_used", 0)):
            break
        time.sleep(0.1)
    check(now.get("minfer_sequences_running") == 0 and now.get("minfer_sequences_waiting") == 0,
          f"3 s after an embeddings client hung up: running "
          f"{now.get('minfer_sequences_running')}, waiting {now.get('minfer_sequences_waiting')}")


# ---------------------------------------------------------------- main

def main():
    only = sys.argv[2:]
    h = Harness(gemma_path())
    start = time.time()
    try:
        for name, bodies in NESTING.items():
            run_check(h, only, name, nesting_check(bodies))
        run_check(h, only, "1e nesting: a schema 20 deep answers", check_nesting_ok)
        run_check(h, only, "2a 300 one-byte clients", check_slow_clients)
        run_check(h, only, "2b --read-timeout 3", check_read_timeout, ("--read-timeout", "3"))
        run_check(h, only, "2c --max-connections-per-client 50", check_per_client_cap,
                  ("--max-connections-per-client", "50"))
        run_check(h, only, "2d --max-connections 4", check_total_cap, ("--max-connections", "4"))
        run_check(h, only, "3 SIGTERM with slow sockets", check_sigterm_slow_sockets,
                  ("--shutdown-timeout", "2"), fresh=True, exits=True)
        run_check(h, only, "4a 100,000-value enum", check_costly_enum)
        run_check(h, only, "4b 10,000 properties", check_costly_properties)
        run_check(h, only, "4c 70-deep $defs", check_deep_refs)
        run_check(h, only, "5a chunked 9 MiB", check_chunked_9mib)
        run_check(h, only, "5b chunked 256 MiB endless", check_chunked_endless)
        run_check(h, only, "6 2,650 ranges", check_ranges)
        run_check(h, only, "7 abandoned requests", check_abandoned)
        run_check(h, only, "8 shutdown cuts a stream", check_shutdown_cuts_stream,
                  ("--shutdown-timeout", "1"), fresh=True, exits=True)
        run_check(h, only, "9a streamed bad token id: 400", check_bad_token_id)
        run_check(h, only, "9b target > 8 KiB: 414", check_long_target)
        run_check(h, only, "9c headers > 16 KiB: 431", check_long_headers)
        run_check(h, only, "9d bad chunk size: 400", check_bad_chunk_size)
        run_check(h, only, "9e BREW 501/405, GET on POST 405", check_methods)
        run_check(h, only, "9f Content-Length -1, 2^64, none", check_lengths)
        run_check(h, only, "9g /v1/models while draining", check_draining,
                  ("--shutdown-timeout", "5"), fresh=True, exits=True)
        run_check(h, only, "9h --api-key NUL, HEAD /", check_api_key, ("--api-key", "KEY"))
        run_check(h, only, "9i logit_bias", check_logit_bias)
        run_check(h, only, "9j 100,000 messages", check_many_messages)
        run_check(h, only, "10a embeddings: nesting, a 6 MB input, 2,049 inputs",
                  check_embeddings, EMBEDDING_FLAGS)
        run_check(h, only, "10b embeddings: an abandoned request", check_embeddings_abandoned,
                  EMBEDDING_FLAGS)
    finally:
        h.close()
    print(f"\n{'check':40} result     seconds")
    for name, result, took in RESULTS:
        print(f"{name:40} {result:10} {took:6.1f}")
    print(f"total {time.time() - start:.0f} s", flush=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
