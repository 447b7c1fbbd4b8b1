#!/usr/bin/env python3
"""`minfer serve` against hostile input, on the real Gemma 3 270M: what a
request's size and shape meets (docs/SERVER.md, "Limits"). One check (or a
few) per abuse, each asserting the bounded answer; after every check /health
answers 200 within 1 s; a check that kills the server is reported as a
crash and the rest run on a fresh one (serve_testutil.run_suite).

  python3 tests/serve/hostile_limits_test.py MINFER_BINARY [CHECK_NAME_PREFIX...]

- nesting: bodies nesting arrays or objects deeper than 64 levels (a
  json_schema whose `items` nest 2,000 deep, a content list 100,000 and
  3,000,000 deep, a schema value 100,000 deep, a prompt and a /tokenize
  body 100,000 deep, a body 70 deep, and 100,000 deep at /completion,
  /apply-template and the Anthropic endpoints, whose error object is
  Anthropic's, a tool's parameters, an earlier call's arguments and
  chat_template_kwargs 100,000 deep, and Anthropic's input_schema, tool_use
  input and tool_result content 100,000 deep) are 400 naming "64"; a schema
  20 deep still answers 200 and a call's arguments *text* 100,000 deep is
  read (200, or the prompt's 400 for the context it exceeds); 2,000 tools
  with a call required are 400 naming the grammar's branching limit.
- chunked bodies: 9 MiB is 413 (an error object); a 256 MiB never-ending
  one is answered 413 and closed soon past 8 MiB while the server's RSS
  grows by less than 64 MiB.
- framing, each with an error object whose code is the status: target over
  8 KiB 414, headers over 16 KiB 431, bad chunk size 400, unknown method
  501 (405 on a known path), GET on a POST path 405 + Allow, Content-Length
  -1 or 2^64 400 within 1 s, a POST without a length 411 within 1 s.
- 100,000 messages: 400 within 1 s.

Every socket wait has a deadline; no check waits longer than ~30 s.
"""
import json
import select
import sys
import time

from serve_testutil import (DEEP, ReplyReader, chat_body, check, connect, exchange,
                            expect_error, post_raw, request, rss_mib, run_suite, timed)


# ---------------------------------------------------------------- nesting

def nested_schema(depth):
    # The review's repro: `items` nested `depth` deep.
    return ('{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"response_format":'
            '{"type":"json_schema","json_schema":{"schema":' + '{"type":"array","items":' * depth +
            '{"type":"integer"}' + "}" * depth + "}}}").encode()


NESTING = {  # check name: {what: (path, body)}
    "nesting: schema items 2,000 deep": {
        "schema items 2,000 deep": ("/v1/chat/completions", nested_schema(2000))},
    "nesting: content 100,000 and 3,000,000 deep": {
        "content list 100,000 deep": (
            "/v1/chat/completions",
            b'{"messages":[{"role":"user","content":' + b"[" * DEEP + b"]" * DEEP + b"}]}"),
        # 6 MB, under the body limit: deep enough to overflow the stack of any
        # recursive copy or destructor (a release build survives 100,000).
        "content list 3,000,000 deep": (
            "/v1/chat/completions",
            b'{"messages":[{"role":"user","content":' + b"[" * (30 * DEEP) + b"]" * (30 * DEEP) +
            b"}]}")},
    "nesting: schema value 100,000 deep": {
        "schema value 100,000 deep": (
            "/v1/chat/completions",
            b'{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"response_format":'
            b'{"type":"json_schema","json_schema":{"schema":{"type":"object","default":' +
            b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}}}}")},
    "nesting: prompt, /tokenize, 70 deep": {
        "prompt 100,000 deep": ("/v1/completions",
                                b'{"max_tokens":4,"prompt":' + b"[" * DEEP + b"]" * DEEP + b"}"),
        "/tokenize 100,000 deep": ("/tokenize",
                                   b'{"content":"x","extra":' + b"[" * DEEP + b"]" * DEEP + b"}"),
        "a body 70 deep": ("/v1/chat/completions",
                           b'{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"x":' +
                           b"[" * 70 + b"]" * 70 + b"}")},
    # The tool-calling fields: a tool's parameters schema, an earlier call's
    # arguments, chat_template_kwargs.
    "nesting: tools, tool_calls, chat_template_kwargs, 100,000 deep": {
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
    "nesting: input_schema, tool_use input, tool_result content, 100,000 deep": {
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
    "nesting: the other front doors, 100,000 deep": {
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


# ---------------------------------------------------------------- chunked bodies

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


# ---------------------------------------------------------------- framing

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


# ---------------------------------------------------------------- many messages

def check_many_messages(srv):
    msgs = [{"role": "user", "content": "hi"}] * 100_000
    r, took = timed(post_raw, srv.port, "/v1/chat/completions",
                    json.dumps(chat_body(msgs)).encode(), 10.0)
    expect_error(r, 400, "100,000 messages", within=1.0, took=took)


def main():
    checks = [(name, nesting_check(bodies)) for name, bodies in NESTING.items()]
    checks += [
        ("nesting: a schema 20 deep answers", check_nesting_ok),
        ("chunked 9 MiB", check_chunked_9mib),
        ("chunked 256 MiB endless", check_chunked_endless),
        ("target > 8 KiB: 414", check_long_target),
        ("headers > 16 KiB: 431", check_long_headers),
        ("bad chunk size: 400", check_bad_chunk_size),
        ("BREW 501/405, GET on POST 405", check_methods),
        ("Content-Length -1, 2^64, none", check_lengths),
        ("100,000 messages", check_many_messages),
    ]
    return run_suite(checks)


if __name__ == "__main__":
    sys.exit(main())
