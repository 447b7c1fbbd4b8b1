#!/usr/bin/env python3
"""`minfer serve` fuzzed with Hypothesis (custom strategies), on the real
Gemma 3 270M:

  python3 tests/serve/fuzz_http_test.py MINFER_BINARY [EXAMPLES_PER_FUZZER]

1. Bodies for POST /v1/chat/completions, /v1/completions, /tokenize,
   /detokenize, llama-server's /completion and /apply-template, and the
   Anthropic /v1/messages and /v1/messages/count_tokens (whose errors are
   Anthropic's error object; text, tool_use, tool_result and thinking blocks,
   tools, tool_choice, thinking), and the embeddings paths /v1/embeddings,
   /embeddings and /embedding (the server runs with --embedding --pooling
   mean): random JSON trees, and objects whose known fields (messages,
   content parts, prompt, max_tokens, n, stop, logprobs, response_format with
   random schemas, logit_bias, tools, tool_choice, parallel_tool_calls, an
   assistant's tool_calls, chat_template_kwargs, reasoning_effort, ...)
   hold random or wrongly typed values; some
   cut short, some with invalid UTF-8, some not JSON at all. Generation stays
   cheap: -n 4 by default, and a generated max_tokens is 1-4 or invalid.
2. Raw HTTP framing over sockets: random methods, targets (some over 8 KiB),
   versions, header names and values (control bytes, 20 KB ones),
   Content-Length absent, negative, huge, unparsable, duplicated, too short
   or too long, chunked bodies with bad sizes, extensions or truncation,
   up to three requests pipelined, and clients that hang up early (close,
   reset, half-close, mid-request).

Properties, for every reply: no 5xx but 503 (busy); an error reply with a
body is {"error": {"message": str, "type": str, "code": int}} with the code
equal to the HTTP status; no reply is malformed or cut off by the server;
the server stays alive. Afterwards: /health answers within 1 s, a fixed
greedy request (temperature 0, max_tokens 16) answers exactly the text it
answered before the fuzzing, and the RSS is within 64 MiB of its level after
the warm-up. Hypothesis runs derandomized with a fixed number of examples
(1,500 bodies, 2,000 framings; EXAMPLES_PER_FUZZER overrides both) and no
shrinking, so a run is the same every time; each fuzzer stops after 55 s
(under 2 minutes in all on two cores), which fails the test only when the
server left requests unanswered. The first violations of each fuzzer are
printed with their example.
"""
import json
import socket
import struct
import sys
import time

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from serve_testutil import (ReplyReader, check, connect, end_server, error_shape, finish,
                            gemma_path, health_within, request, rss_mib, start_server)

# Examples per fuzzer, and the most seconds each may take: a server that
# leaves requests unanswered (each waited out) cannot stretch the run.
# (Both well inside the budget on two cores: about 15 s each.) Past the
# budget the fuzzer stops; that fails the test only when the server left
# requests unanswered (a slow machine alone does not).
ARG = int(sys.argv[2]) if len(sys.argv) > 2 else 0
EXAMPLES = {"bodies": ARG or 1500, "framing": ARG or 2000}
BUDGET_S = 55
# Past the warm-up, memory may still grow by what the allocator keeps of a
# few 8 MiB bodies read at once (freed, not returned), and by graphs of step
# shapes the warm-up did not run; a leak of a body or a connection per
# request (hundreds of requests, MiBs each) goes far past it.
RSS_MARGIN_MIB = 64
GREEDY = {"messages": [{"role": "user", "content": "Write one sentence about the sea."}],
          "max_tokens": 16, "temperature": 0}


class ServerDied(Exception):
    pass


class OutOfTime(Exception):
    pass


class Judge:
    """Collects property violations (not raising: every example runs)."""

    def __init__(self, name, srv, examples):
        self.name, self.srv, self.violations, self.replies = name, srv, [], 0
        self.planned = examples
        self.statuses, self.examples, self.unanswered = {}, 0, 0
        self.end = time.time() + BUDGET_S

    def count(self):
        """Counts an example; OutOfTime once the budget is spent (raised, as
        Hypothesis would otherwise still generate every remaining example)."""
        if time.time() >= self.end:
            raise OutOfTime()
        self.examples += 1

    def reply(self, r, example, head=False, eof=True, method=b"POST", path=b""):
        """Judges one reply to a request with `method`; `eof`: the connection
        ended (an incomplete reply was cut by the server, not by the client's
        deadline). 501 is the answer to a method the server does not know."""
        self.replies += 1
        self.statuses[r.status] = self.statuses.get(r.status, 0) + 1
        what = None
        if r.status == 0 and not head:
            what = f"a malformed reply: {r.reason!r}"
        elif r.status == 501 and method not in KNOWN_METHODS:
            pass
        elif 500 <= r.status < 600 and r.status != 503:
            what = f"a {r.status}"
        elif r.status >= 400 and r.body and error_shape(r, self.anthropic(r, path)):
            what = (f"a {r.status} whose body is no error object: "
                    f"{error_shape(r, self.anthropic(r, path))}")
        elif r.status and not r.complete and eof and not head and r.status not in (204, 304):
            what = f"a reply cut short: {r!r}"
        if what:
            self.violations.append(f"{what}\n    example: {example!r:.1500}")

    @staticmethod
    def anthropic(r, path):
        """The Anthropic endpoints answer their own errors in Anthropic's
        shape; the transport's (framing, 404/405/408/413) stay OpenAI's."""
        return path.startswith(b"/v1/messages") and b'"type":"error"' in r.body

    def alive(self, example):
        if self.srv.proc.poll() is not None:
            raise ServerDied(f"the server died (exit {self.srv.proc.returncode}) on "
                             f"{example!r:.3000}")

    def report(self):
        print(f"{self.name}: {self.examples} examples, {self.replies} replies "
              f"{dict(sorted(self.statuses.items()))}, {self.unanswered} left unanswered, "
              f"{len(self.violations)} violations")
        if self.examples < self.planned:
            print(f"{self.name}: only {self.examples} of {self.planned} examples ran within "
                  f"{BUDGET_S} s")
        check(self.examples == self.planned or not self.unanswered,
              f"{self.name}: the budget ran out, {self.unanswered} requests were left "
              f"unanswered until the client gave up")
        for v in self.violations[:8]:
            print("  ", v)
        check(not self.violations, f"{self.name}: {len(self.violations)} violations")


# ---------------------------------------------------------------- JSON strategies

def mostly(valid, weird, times=5):
    """`valid` about `times` in `times` + 1 draws, else `weird`: most requests
    are well-formed but for one or two parts, so they reach the handlers.
    (Not one_of(valid, valid, ..., weird): Hypothesis does not weight that.)"""
    return st.sampled_from([True] * times + [False]).flatmap(lambda ok: valid if ok else weird)



LEAF = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=16))
TREE = st.recursive(LEAF, lambda kids: st.lists(kids, max_size=4) |
                    st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=16)
# Wrong for a count: anything but an int (a valid big max_tokens would run long).
NOT_INT = st.one_of(st.none(), st.booleans(), st.floats(), st.text(max_size=8),
                    st.lists(LEAF, max_size=3), st.dictionaries(st.text(max_size=4), LEAF,
                                                               max_size=2))
COUNT = mostly(st.integers(1, 4), st.one_of(st.integers(-3, 0), st.integers(1 << 24, 2 ** 70),
                                           NOT_INT), times=2)
WORDS = st.text(max_size=60) | st.sampled_from(["Hi", "Name a colour.", "2+2=", "{", "</s>",
                                                "<start_of_turn>user\n", "\u00e9\u6f22\U0001f600"])

SCHEMA_LEAF = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(
        ["string", "integer", "number", "boolean", "null", "object", "array", "nope"]) | TREE}),
    st.fixed_dictionaries({"enum": st.lists(LEAF, max_size=5)}),
    st.fixed_dictionaries({"const": LEAF}),
    st.fixed_dictionaries({"type": st.just("string")},
                          optional={"pattern": st.text(max_size=12), "minLength": COUNT,
                                    "maxLength": COUNT, "format": st.text(max_size=8)}),
    st.fixed_dictionaries({"$ref": st.sampled_from(["#", "#/$defs/a", "#/definitions/b",
                                                    "http://x/y", "#/nope"]) | st.text()}),
    st.booleans(), TREE)
SCHEMA = st.recursive(SCHEMA_LEAF, lambda kids: st.one_of(
    st.fixed_dictionaries({"type": st.just("object")}, optional={
        "properties": st.dictionaries(st.text(max_size=6), kids, max_size=4) | TREE,
        "required": st.lists(st.text(max_size=6), max_size=3) | TREE,
        "additionalProperties": st.booleans() | kids}),
    st.fixed_dictionaries({"type": st.just("array")}, optional={
        "items": kids | st.lists(kids, max_size=2), "minItems": COUNT, "maxItems": COUNT,
        "prefixItems": st.lists(kids, max_size=2)}),
    st.sampled_from(["anyOf", "oneOf", "allOf"]).flatmap(
        lambda k: st.fixed_dictionaries({k: st.lists(kids, max_size=3)})),
    st.fixed_dictionaries({"$ref": st.just("#/$defs/a"),
                           "$defs": st.fixed_dictionaries({"a": kids})}),
    st.dictionaries(st.sampled_from(["type", "items", "properties", "anyOf", "enum", "$ref",
                                     "minimum", "maximum", "not", "if", "then"]), kids,
                    max_size=3)), max_leaves=10)
RESPONSE_FORMAT = st.one_of(
    TREE,
    st.fixed_dictionaries({"type": st.sampled_from(["text", "json_object", "json_schema", "x"])}),
    st.fixed_dictionaries({"type": st.just("json_schema"), "json_schema": st.one_of(
        TREE, st.fixed_dictionaries({"schema": SCHEMA}, optional={"name": st.text(max_size=8),
                                                                  "strict": st.booleans()}))}))
VOCAB_ID = st.integers(0, 262_143)  # Gemma 3's vocabulary
TOKEN_ID = mostly(VOCAB_ID, st.integers(-5, 300_000) | st.integers(-2 ** 64, 2 ** 64), times=3)
LOGIT_BIAS = st.one_of(
    TREE,
    st.dictionaries(TOKEN_ID.map(str) | st.text(max_size=6),
                    st.floats(-200, 200) | st.booleans() | TREE, max_size=4),
    st.lists(st.tuples(TOKEN_ID | TREE, st.floats(-200, 200) | st.booleans()).map(list),
             max_size=4))
PART = mostly(st.fixed_dictionaries({"type": mostly(st.just("text"), st.just("image_url") | TREE),
                                      "text": mostly(WORDS, TREE)}), TREE)
# Tool calling: definitions, choices, and an assistant's earlier calls.
TOOL_NAME = st.sampled_from(["f", "get_weather", "x y", ""])
TOOL = mostly(st.fixed_dictionaries(
    {"type": mostly(st.just("function"), TREE),
     "function": mostly(st.fixed_dictionaries(
         {"name": mostly(TOOL_NAME, TREE)},
         optional={"description": mostly(WORDS, TREE),
                   "parameters": mostly(st.fixed_dictionaries(
                       {"type": st.just("object"),
                        "properties": st.fixed_dictionaries({}, optional={"a": SCHEMA})}),
                       SCHEMA | TREE)}), TREE)}), TREE)
TOOL_CHOICE = mostly(st.sampled_from(["auto", "none", "required"]) | st.fixed_dictionaries(
    {"type": st.just("function"), "function": st.fixed_dictionaries({"name": TOOL_NAME})}), TREE)
TOOL_CALL = mostly(st.fixed_dictionaries(
    {"id": st.text(max_size=6), "type": st.just("function"),
     "function": mostly(st.fixed_dictionaries(
         {"name": mostly(TOOL_NAME, TREE),
          "arguments": mostly(st.just('{"a": 1}') | st.text(max_size=8), TREE)}), TREE)}), TREE)
MESSAGE = mostly(st.fixed_dictionaries(
    {"role": mostly(st.sampled_from(["user", "system", "assistant", "tool", "developer"]), TREE)},
    optional={"content": mostly(WORDS | st.lists(PART, max_size=3), TREE),
              "name": st.text(max_size=6),
              "tool_calls": mostly(st.lists(TOOL_CALL, max_size=2), TREE),
              "tool_call_id": mostly(st.text(max_size=6), TREE),
              "reasoning_content": mostly(WORDS, TREE)}), TREE, times=4)
def field(valid, weird):
    return mostly(valid, st.one_of(weird, TREE), times=2)


# Anthropic's blocks, tools, tool_choice and thinking (serve/anthropic.h).
A_TEXT = st.fixed_dictionaries({"type": st.just("text"), "text": mostly(WORDS, TREE)})
A_BLOCK = mostly(st.one_of(
    A_TEXT,
    st.fixed_dictionaries({"type": st.just("tool_use"), "id": mostly(st.text(max_size=6), TREE),
                           "name": mostly(TOOL_NAME, TREE),
                           "input": mostly(st.just({"a": 1}), TREE)}),
    st.fixed_dictionaries({"type": st.just("tool_result"),
                           "tool_use_id": mostly(st.text(max_size=6), TREE)},
                          optional={"content": mostly(WORDS | st.lists(A_TEXT, max_size=2), TREE),
                                    "is_error": mostly(st.booleans(), TREE)}),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": mostly(WORDS, TREE),
                           "signature": st.text(max_size=4)}),
    st.fixed_dictionaries({"type": st.sampled_from(["redacted_thinking", "image", "nope"])})),
    TREE)
A_MESSAGE = mostly(st.fixed_dictionaries(
    {"role": mostly(st.sampled_from(["user", "assistant"]), TREE),
     "content": mostly(WORDS | st.lists(A_BLOCK, max_size=3), TREE)}), TREE, times=4)
A_TOOL = mostly(st.fixed_dictionaries(
    {"name": mostly(TOOL_NAME, TREE),
     "input_schema": mostly(st.fixed_dictionaries(
         {"type": st.just("object"),
          "properties": st.dictionaries(st.sampled_from(["a", "b"]), SCHEMA_LEAF, max_size=2)}),
         TREE)},
    optional={"description": mostly(WORDS, TREE), "type": st.sampled_from(["custom", "bash"])}),
    TREE)
A_TOOLS = {
    "tools": field(st.lists(A_TOOL, max_size=3), TREE),
    "tool_choice": field(st.fixed_dictionaries(
        {"type": st.sampled_from(["auto", "any", "tool", "none", "x"])},
        optional={"name": TOOL_NAME, "disable_parallel_tool_use": mostly(st.booleans(), TREE)}),
        TREE),
    "thinking": field(st.sampled_from([{"type": "enabled", "budget_tokens": 1024},
                                       {"type": "enabled", "budget_tokens": 10},
                                       {"type": "disabled"}, {"type": "adaptive"}]), TREE)}


SAMPLING = {
    "max_tokens": COUNT, "max_completion_tokens": COUNT,
    "n": field(st.integers(1, 4), st.integers(-2, 20) | NOT_INT),
    "stop": field(WORDS | st.lists(WORDS, max_size=4), st.lists(WORDS, min_size=5, max_size=6)),
    "temperature": field(st.floats(0, 2), st.floats(-1, 3)),
    "top_p": field(st.floats(0, 1), st.floats(-1, 2)),
    "top_k": field(st.integers(0, 100), st.integers(-3, 0)),
    "min_p": field(st.floats(0, 1), st.floats(-1, 2)),
    "seed": field(st.integers(-2 ** 63, 2 ** 63 - 1), st.integers(-2 ** 70, 2 ** 70)),
    "stream": field(st.booleans(), st.none()),
    "stream_options": field(st.fixed_dictionaries(
        {}, optional={"include_usage": st.booleans()}), st.fixed_dictionaries(
        {"include_usage": TREE})),
    "logprobs": field(st.booleans() | st.integers(0, 20), st.integers(-2, 25)),
    "top_logprobs": field(st.integers(0, 20), st.integers(-2, 25)),
    "presence_penalty": field(st.floats(-2, 2), st.floats(-3, 3)),
    "frequency_penalty": field(st.floats(-2, 2), st.floats(-3, 3)),
    "repeat_penalty": field(st.floats(0.5, 2), st.floats(-1, 3)),
    "response_format": RESPONSE_FORMAT, "logit_bias": LOGIT_BIAS,
    "user": field(st.text(max_size=6), st.none()), "model": st.text(max_size=6),
    "tools": field(st.lists(TOOL, max_size=3), TREE), "tool_choice": TOOL_CHOICE,
    "parallel_tool_calls": field(st.booleans(), TREE),
    "chat_template_kwargs": field(st.dictionaries(
        st.sampled_from(["enable_thinking", "tools", "messages", "x"]), TREE, max_size=2), TREE),
    "reasoning_effort": field(st.sampled_from(["low", "medium", "high"]), TREE),
    "reasoning_format": field(st.sampled_from(["none", "deepseek", "auto"]), TREE),
}
EMBEDDING_INPUT = mostly(
    WORDS | st.lists(TOKEN_ID, min_size=1, max_size=12) |
    st.lists(WORDS | st.lists(TOKEN_ID, max_size=8), max_size=4),
    st.lists(WORDS | TOKEN_ID, max_size=3) | TREE)
EMBEDDING_OPTS = {
    "encoding_format": field(st.sampled_from(["float", "base64"]), WORDS),
    "embd_normalize": field(st.integers(-1, 4), st.integers(-3, 100) | st.floats()),
    "model": st.text(max_size=6)}
BODIES = {
    "/v1/chat/completions": st.fixed_dictionaries(
        {"messages": mostly(st.lists(MESSAGE, min_size=1, max_size=4), TREE)},
        optional=SAMPLING),
    "/v1/completions": st.fixed_dictionaries(
        {"prompt": mostly(WORDS | st.lists(TOKEN_ID, min_size=1, max_size=12),
                          st.lists(WORDS, max_size=2) | TREE)}, optional=SAMPLING),
    "/tokenize": st.fixed_dictionaries({"content": mostly(WORDS, TREE)},
                                       optional={"add_special": mostly(st.booleans(), TREE)}),
    "/detokenize": st.fixed_dictionaries({"tokens": mostly(st.lists(TOKEN_ID, max_size=12),
                                                           TREE)}),
    # llama-server's native completion and template endpoints.
    "/completion": st.fixed_dictionaries(
        {"prompt": mostly(WORDS | st.lists(TOKEN_ID, min_size=1, max_size=12),
                          st.lists(WORDS | TOKEN_ID, max_size=3) | TREE)},
        optional={**SAMPLING, "n_predict": COUNT, "n_probs": field(st.integers(0, 5), TREE),
                  "ignore_eos": field(st.booleans(), TREE), "cache_prompt": TREE,
                  "grammar": field(st.just("root ::= \"a\""), TREE),
                  "json_schema": field(st.just({"type": "integer"}), TREE)}),
    "/apply-template": st.fixed_dictionaries(
        {"messages": mostly(st.lists(MESSAGE, min_size=1, max_size=4), TREE)},
        optional={"tools": field(st.lists(TOOL, max_size=3), TREE), "tool_choice": TOOL_CHOICE,
                  "chat_template_kwargs": field(st.dictionaries(
                      st.sampled_from(["enable_thinking", "x"]), TREE, max_size=2), TREE)}),
    # The Anthropic Messages API (its own error object).
    "/v1/messages": st.fixed_dictionaries(
        {"model": st.text(max_size=6), "max_tokens": COUNT,
         "messages": mostly(st.lists(A_MESSAGE, min_size=1, max_size=4), TREE)},
        optional={"system": field(WORDS, TREE), "stop_sequences": field(
            st.lists(WORDS, max_size=3), TREE), "temperature": field(st.floats(0, 1), TREE),
                  "stream": field(st.booleans(), TREE), **A_TOOLS}),
    "/v1/messages/count_tokens": st.fixed_dictionaries(
        {"model": st.text(max_size=6),
         "messages": mostly(st.lists(A_MESSAGE, min_size=1, max_size=4), TREE)},
        optional=A_TOOLS),
    # Embeddings: OpenAI's, and llama-server's native paths (content or input).
    "/v1/embeddings": st.fixed_dictionaries({"input": EMBEDDING_INPUT}, optional=EMBEDDING_OPTS),
    "/embeddings": st.fixed_dictionaries({"content": EMBEDDING_INPUT}, optional=EMBEDDING_OPTS),
    "/embedding": st.fixed_dictionaries({"input": EMBEDDING_INPUT}, optional=EMBEDDING_OPTS),
}
BAD_UTF8 = [b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf", b"\x80"]


@st.composite
def body_case(draw):
    path = draw(st.sampled_from(sorted(BODIES)))
    tree = draw(mostly(BODIES[path], TREE, times=3))
    if isinstance(tree, dict):
        if draw(st.booleans()):
            tree.update(draw(st.dictionaries(st.text(max_size=8), TREE, max_size=2)))
        for k in ("max_tokens", "max_completion_tokens", "n_predict"):  # few tokens: cheap
            v = tree.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and 4 < v <= 1 << 24:
                tree[k] = 4
    data = json.dumps(tree, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    mangle = draw(st.sampled_from(["none"] * 10 + ["cut", "utf8", "binary", "empty"]))
    if mangle == "cut":
        data = data[:draw(st.integers(0, max(0, len(data) - 1)))]
    elif mangle == "utf8":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from(BAD_UTF8)) + data[at:]
    elif mangle == "binary":
        data = draw(st.binary(max_size=200))
    elif mangle == "empty":
        data = b""
    return path, data


# ---------------------------------------------------------------- HTTP strategies

PATHS = ["/", "/health", "/metrics", "/v1/models", "/models", "/v1/chat/completions",
         "/chat/completions", "/v1/completions", "/completions", "/tokenize", "/detokenize",
         "/openapi.json", "/index.html", "/favicon.ico", "/completion", "/apply-template",
         "/props", "/v1/messages", "/v1/messages/count_tokens", "/v1/embeddings", "/embeddings",
         "/embedding", "/nope", "//", "/../../etc/passwd",
         "/v1/chat/completions/", "/health?x=1", "/%00", "/%zz"]
CTL = st.sampled_from([b"\x00", b"\x01", b"\x7f", b"\x1b", b"\r", b"\n", b"\t", b"\xff", b" "])
TOKEN = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)


METHOD = mostly(st.sampled_from([b"GET", b"POST", b"POST", b"HEAD", b"OPTIONS"]), st.one_of(
    st.sampled_from([b"PUT", b"DELETE", b"PATCH", b"BREW", b"TRACE", b"CONNECT", b"get", b"PRI"]),
    TOKEN.map(str.encode), st.binary(max_size=8)), times=4)
TARGET = mostly(st.sampled_from(PATHS).map(str.encode), st.one_of(
    st.tuples(st.sampled_from(PATHS), st.text(max_size=30)).map(
        lambda t: (t[0] + "?" + t[1]).encode("utf-8", "surrogatepass")),
    st.integers(7000, 20000).map(lambda n: b"/health?" + b"a" * n),
    st.sampled_from([b"*", b"http://127.0.0.1/v1/models", b"", b"health", b"/ /"]),
    st.binary(max_size=20)), times=4)
VERSION = mostly(st.just(b"HTTP/1.1"), st.sampled_from(
    [b"HTTP/1.0", b"HTTP/2.0", b"HTTP/0.9", b"", b"http/1.1", b"HTTP/1.10", b"HTTP/1.1 x",
     b"HTTP/9"]), times=6)
HEADER_NAME = mostly(
    st.sampled_from([b"Host", b"Content-Type", b"Connection", b"Expect", b"Authorization",
                     b"Range", b"Origin", b"Accept-Encoding", b"Upgrade", b"Cookie",
                     b"Content-Length", b"Transfer-Encoding", b"X-Forwarded-For", b"If-Range",
                     b"Access-Control-Request-Method"]),
    st.one_of(TOKEN.map(str.encode), st.lists(TOKEN.map(str.encode) | CTL, min_size=1,
                                              max_size=4).map(b"".join), st.just(b"")), times=2)
HEADER_VALUE = st.one_of(
    st.sampled_from([b"close", b"keep-alive", b"100-continue", b"bytes=0-0,0-", b"bytes=-1",
                     b"application/json", b"chunked", b"websocket", b"gzip", b"Bearer x"]),
    st.text(max_size=40).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.lists(st.binary(max_size=6) | CTL, max_size=6).map(b"".join),
    st.integers(100, 20000).map(lambda n: b"v" * n))
FRAMING = st.sampled_from(["cl"] * 8 + ["chunked"] * 3 + [
    "none", "cl_neg", "cl_huge", "cl_2to64", "cl_junk", "cl_dup", "cl_short", "cl_long",
    "chunked_size", "chunked_ext", "chunked_trunc", "chunked_and_cl", "te_other"])
SMALL_BODY = st.one_of(
    st.builds(lambda t, m: json.dumps({"messages": [{"role": "user", "content": t}],
                                       "max_tokens": m, "temperature": 0}).encode(),
              WORDS, st.integers(1, 4)),
    st.builds(lambda t: json.dumps({"content": t}).encode(), WORDS),
    st.binary(max_size=100), st.just(b""))
KNOWN_METHODS = {b"GET", b"HEAD", b"POST", b"OPTIONS"}
INCOMPLETE = {"cl_long", "chunked_trunc"}  # the server waits for more: don't wait long


@st.composite
def http_request(draw):
    method, target, version = draw(METHOD), draw(TARGET), draw(VERSION)
    sep = draw(mostly(st.just(b" "), st.sampled_from([b"  ", b"\t", b""]), times=8))
    line = method + sep + target + (b" " + version if version else b"")
    headers = [(b"Host", b"127.0.0.1")] if draw(st.integers(0, 5)) else []
    headers += draw(st.lists(st.tuples(HEADER_NAME, HEADER_VALUE), max_size=4))
    body, framing = draw(SMALL_BODY), draw(FRAMING)
    payload = body
    cl = str(len(body)).encode()
    if framing == "cl":
        headers.append((b"Content-Length", cl))
    elif framing == "cl_neg":
        headers.append((b"Content-Length", b"-" + cl))
    elif framing == "cl_huge":
        headers.append((b"Content-Length", str(draw(st.integers(9 << 20, 2 ** 63))).encode()))
    elif framing == "cl_2to64":
        headers.append((b"Content-Length", b"18446744073709551616"))
    elif framing == "cl_junk":
        headers.append((b"Content-Length", draw(st.sampled_from(
            [b"12abc", b"0x10", b"+5", b" 5 ", b"1e3", b"", b"5, 5", b"\x005"]))))
    elif framing == "cl_dup":
        headers += [(b"Content-Length", cl), (b"Content-Length", str(len(body) + 1).encode())]
    elif framing == "cl_short":
        headers.append((b"Content-Length", str(max(0, len(body) - 3)).encode()))
    elif framing == "cl_long":
        headers.append((b"Content-Length", str(len(body) + 5).encode()))
    elif framing.startswith("chunked") or framing == "te_other":
        headers.append((b"Transfer-Encoding", b"chunked" if framing != "te_other" else
                        draw(st.sampled_from([b"gzip", b"chunked, gzip", b"gzip, chunked",
                                              b"identity", b"CHUNKED", b"chunked\x00"]))))
        if framing == "chunked_and_cl":
            headers.append((b"Content-Length", cl))
        size = b"%x" % len(body)
        if framing == "chunked_size":
            size = draw(st.sampled_from([b"zz", b"-1", b"ffffffffffffffffff", b"", b"0x5",
                                         b"1 2", b"%x" % (len(body) + 7)]))
        ext = b""
        if framing == "chunked_ext":
            ext = draw(st.sampled_from([b";a=b", b";" + b"e" * 5000, b"; \x00", b";a=\"q\"",
                                        b";;;"]))
        payload = (size + ext + b"\r\n" + body + b"\r\n" if body else b"") + b"0\r\n\r\n"
        if framing == "chunked_trunc":
            payload = payload[:draw(st.integers(0, max(0, len(payload) - 3)))]
    head = line + b"\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in headers) + b"\r\n"
    return {"method": method, "target": target, "framing": framing, "bytes": head + payload}


HTTP_CASE = st.fixed_dictionaries({
    "requests": st.lists(http_request(), min_size=1, max_size=3),
    "end": st.sampled_from(["read"] * 6 + ["close", "reset", "half-close", "mid"])})


# ---------------------------------------------------------------- runs

def fuzz_bodies(srv, examples):
    judge = Judge("body fuzzer", srv, examples)

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck),
              print_blob=False)
    @given(body_case())
    def run(case):
        judge.count()
        path, data = case
        try:
            with connect(srv.port, 5) as s:
                s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          b"application/json\r\nConnection: close\r\nContent-Length: " +
                          str(len(data)).encode() + b"\r\n\r\n" + data)
                reader = ReplyReader(s)
                r = reader.next(time.time() + 15)
                if r is not None and not r.complete and not reader.eof:
                    judge.violations.append(f"no whole reply in 15 s: {r!r}\n    example: "
                                            f"{case!r:.1500}")
        except OSError as e:
            r = None
            judge.violations.append(f"{e!r}\n    example: {case!r:.1500}")
        judge.alive(case)
        if r is None:
            judge.violations.append(f"no reply in 15 s\n    example: {case!r:.1500}")
        else:
            judge.reply(r, case, path=path.encode())
    return run, judge


def fuzz_framing(srv, examples):
    judge = Judge("HTTP framing fuzzer", srv, examples)

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck),
              print_blob=False)
    @given(HTTP_CASE)
    def run(case):
        judge.count()
        reqs, end = case["requests"], case["end"]
        data = b"".join(r["bytes"] for r in reqs)
        try:
            s = connect(srv.port, 5)
        except OSError as e:
            judge.violations.append(f"connect: {e!r}")
            judge.alive(case)
            return
        try:
            if end == "mid":
                s.sendall(data[:len(data) // 2])
                s.close()
            elif end in ("close", "reset"):
                s.sendall(data)
                if end == "reset":
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            else:
                s.sendall(data)
                if end == "half-close":
                    s.shutdown(socket.SHUT_WR)
                reader = ReplyReader(s, limit=8 << 20)
                deadline = time.time() + 10
                for i, req in enumerate(reqs):
                    # The server may wait for the rest of a request that is
                    # short by construction: no need to wait for it long.
                    idle = 0.3 if any(q["framing"] in INCOMPLETE for q in reqs[i:]) else 2.0
                    head = req["method"] == b"HEAD"
                    r = reader.next(min(deadline, time.time() + idle), head=head)
                    if r is None:
                        judge.unanswered += not reader.eof and idle > 1
                        break
                    judge.reply(r, case, head=head or any(q["method"] == b"HEAD" for q in reqs),
                                eof=reader.eof, method=req["method"], path=req["target"])
                    if r.status == 0 or reader.eof or r.header("connection") == "close":
                        break
                s.close()
        except OSError:
            s.close()  # the server closed or reset first: its replies were judged
        judge.alive(case)
    return run, judge


def warm_up(srv):
    """Every endpoint once, a greedy request twice, one large body: what the
    allocator and the engine keep from here on is the baseline."""
    for _ in range(2):
        r = request(srv.port, "POST", "/v1/chat/completions", GREEDY, timeout=60)
    request(srv.port, "POST", "/v1/completions",
            {"prompt": "Hello", "max_tokens": 4, "n": 16, "logprobs": 5}, timeout=60)
    request(srv.port, "POST", "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": True,
             "response_format": {"type": "json_object"}}, timeout=60)
    request(srv.port, "POST", "/tokenize", {"content": "hello"}, timeout=10)
    request(srv.port, "POST", "/detokenize", {"tokens": [1, 2, 3]}, timeout=10)
    request(srv.port, "POST", "/tokenize", b'{"content": "' + b"a" * (7 << 20) + b'"}',
            timeout=30)
    return r


def greedy_text(srv):
    r = request(srv.port, "POST", "/v1/chat/completions", GREEDY, timeout=60)
    try:
        return json.loads(r.body)["choices"][0]["message"]["content"]
    except (AttributeError, ValueError, KeyError, IndexError, TypeError):
        return f"<no answer: {r!r}>"


def main():
    srv = start_server(gemma_path(), "-n", "4", "--embedding", "--pooling", "mean", slots=2,
                       ctx=1024)
    if srv is None:
        return finish()
    t0 = time.time()
    try:
        warm_up(srv)
        before = greedy_text(srv)
        rss_warm = rss_mib(srv.proc.pid)
        print(f"after the warm-up: RSS {rss_warm:.0f} MiB, greedy text {before!r}", flush=True)
        for name, fuzzer in (("bodies", fuzz_bodies), ("framing", fuzz_framing)):
            run, judge = fuzzer(srv, EXAMPLES[name])
            t1 = time.time()
            try:
                run()
            except ServerDied as e:
                check(False, f"{name}: {e}")
            except OutOfTime:
                pass  # judged in report()
            except Exception as e:  # noqa: BLE001 - Hypothesis or harness error
                check(False, f"{name}: the fuzzer raised {e!r:.2000}")
            judge.report()
            print(f"{name}: {time.time() - t1:.0f} s, RSS {rss_mib(srv.proc.pid):.0f} MiB",
                  flush=True)
            if srv.proc.poll() is not None:
                break
        if srv.proc.poll() is None:
            ok, what = health_within(srv.port, 1.0)
            check(ok, f"after the fuzzing: {what}")
            after = greedy_text(srv)
            check(after == before, f"the greedy text changed: {before!r} -> {after!r}")
            time.sleep(0.5)  # connections the fuzzer dropped are being closed
            rss = rss_mib(srv.proc.pid)
            check(rss <= rss_warm + RSS_MARGIN_MIB,
                  f"RSS after the fuzzing {rss:.0f} MiB, after the warm-up {rss_warm:.0f} MiB "
                  f"(margin {RSS_MARGIN_MIB} MiB)")
            print(f"after the fuzzing: RSS {rss:.0f} MiB", flush=True)
    finally:
        code = end_server(srv, timeout=15)
        check(code == 0, f"the server exited with {code}")
        if srv.log and code != 0:
            print("server stderr:", "".join(srv.log[-10:])[-1500:])
    print(f"total {time.time() - t0:.0f} s")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
