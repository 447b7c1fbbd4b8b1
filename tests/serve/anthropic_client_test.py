#!/usr/bin/env python3
"""`minfer serve`'s Anthropic Messages API driven by the official anthropic SDK
(and raw HTTP for what the SDK never sends), on the real Gemma 3 270M Q4_K_M.

  python3 tests/serve/anthropic_client_test.py MINFER_BINARY

Checks: messages.create with a system prompt and several turns (the message
object, the model echoed, the usage); messages.stream() whose text equals the
non-streamed greedy answer, with the same stop_reason and usage; a stop
sequence from the middle of a greedy answer (stop_reason "stop_sequence", the
text cut before it, streamed and not); max_tokens (stop_reason "max_tokens");
a prefill continued; count_tokens equal to usage.input_tokens; and errors in
Anthropic's shape: a bad field, an unsupported block, tools, a prompt past the
context (BadRequestError, before any stream), malformed JSON (raw), and the
API key as x-api-key or Bearer (a wrong one: AuthenticationError).
"""
import json
import sys

import anthropic

from serve_testutil import Server, check, finish, gemma_path

MODEL = "claude-test"  # any name: echoed
SYSTEM = "You answer in one short sentence."
TURNS = [{"role": "user", "content": "Name a colour."},
         {"role": "assistant", "content": "Blue."},
         {"role": "user", "content": [{"type": "text", "text": "Name another colour."}]}]


# Greedy: the SDK's current releases have no sampling arguments, so
# temperature goes in as a body field (the server reads it as Anthropic's API
# does).
def create(client, temperature=0, **kw):
    kw.setdefault("max_tokens", 16)
    return client.messages.create(model=MODEL, extra_body={"temperature": temperature}, **kw)


def streamed(client, **kw):
    kw.setdefault("max_tokens", 16)
    with client.messages.stream(model=MODEL, extra_body={"temperature": 0}, **kw) as s:
        text = "".join(s.text_stream)
        return text, s.get_final_message()


def anthropic_error(e, status, error_type, needle):
    check(e.status_code == status, f"status {e.status_code}, wanted {status}")
    body = e.body if isinstance(e.body, dict) else {}
    err = body.get("error", {})
    check(body.get("type") == "error" and err.get("type") == error_type,
          f"not an Anthropic {error_type}: {e.body}")
    check(needle in err.get("message", ""), f"{needle!r} not in {err.get('message')!r}")


def expect_error(call, exc, status, error_type, needle):
    try:
        call()
        check(False, f"no {exc.__name__} for {needle}")
    except exc as e:
        anthropic_error(e, status, error_type, needle)


def conversation(client):
    r = create(client, system=SYSTEM, messages=TURNS)
    text = r.content[0].text if r.content else None
    check(r.type == "message" and r.role == "assistant" and r.model == MODEL, f"{r}")
    check(r.id.startswith("msg_"), f"id {r.id}")
    check(len(r.content) == 1 and r.content[0].type == "text" and isinstance(text, str),
          f"content {r.content}")
    check(r.stop_reason in ("end_turn", "max_tokens") and r.stop_sequence is None,
          f"stop {r.stop_reason} {r.stop_sequence}")
    check(r.usage.input_tokens > 10 and 0 < r.usage.output_tokens <= 16, f"usage {r.usage}")
    n = client.messages.count_tokens(model=MODEL, system=SYSTEM, messages=TURNS)
    check(n.input_tokens == r.usage.input_tokens,
          f"count_tokens {n.input_tokens} != usage {r.usage.input_tokens}")
    # The system prompt is in the prompt: more tokens with it than without.
    bare = client.messages.count_tokens(model=MODEL, messages=TURNS)
    check(bare.input_tokens < n.input_tokens, f"system ignored: {bare} vs {n}")

    s_text, final = streamed(client, system=SYSTEM, messages=TURNS)
    check(s_text == text, f"streamed {s_text!r} != {text!r}")
    check(final.content[0].text == text and final.stop_reason == r.stop_reason,
          f"final message {final}")
    check(final.usage.output_tokens == r.usage.output_tokens and
          final.usage.input_tokens == r.usage.input_tokens, f"stream usage {final.usage}")


def stops(client):
    ask = [{"role": "user", "content": "Write a sentence about the sea."}]
    whole = create(client, messages=ask, max_tokens=24).content[0].text
    words = [w for w in whole.split() if len(w) >= 3]
    check(len(words) >= 2, f"a greedy answer with words: {whole!r}")
    if len(words) >= 2:
        stop = words[1][:3]
        cut = whole[:whole.index(stop)]
        r = create(client, messages=ask, max_tokens=24, stop_sequences=[stop, "\x00never"])
        check(r.stop_reason == "stop_sequence" and r.stop_sequence == stop,
              f"stop {r.stop_reason} {r.stop_sequence!r}, wanted {stop!r}")
        check(r.content[0].text == cut, f"stop {stop!r}: {r.content[0].text!r} != {cut!r}")
        s_text, final = streamed(client, messages=ask, max_tokens=24, stop_sequences=[stop])
        check(s_text == cut and final.stop_reason == "stop_sequence" and
              final.stop_sequence == stop, f"streamed stop: {s_text!r} {final}")

    r = create(client, messages=ask, max_tokens=2)
    check(r.stop_reason == "max_tokens" and r.usage.output_tokens == 2, f"max_tokens: {r}")
    _, final = streamed(client, messages=ask, max_tokens=2)
    check(final.stop_reason == "max_tokens", f"streamed max_tokens: {final.stop_reason}")

    # A prefill: the reply continues the last assistant turn (not a new turn).
    pre = [{"role": "user", "content": "Count to ten."}, {"role": "assistant", "content": "1, 2,"}]
    r = create(client, messages=pre, max_tokens=8)
    check(r.content[0].text and r.usage.output_tokens > 0, f"prefill: {r}")
    n = client.messages.count_tokens(model=MODEL, messages=pre)
    check(n.input_tokens == r.usage.input_tokens, f"prefill count {n} vs {r.usage}")


def errors(client, srv):
    bad = anthropic.BadRequestError
    expect_error(lambda: create(client, messages=TURNS, temperature=1.5), bad, 400,
                 "invalid_request_error", "'temperature'")
    image = [{"role": "user", "content": [{"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]
    expect_error(lambda: create(client, messages=image), bad, 400, "invalid_request_error",
                 '"image" content blocks are not supported yet')
    tools = [{"name": "weather", "description": "d", "input_schema": {"type": "object"}}]
    expect_error(lambda: create(client, messages=TURNS, tools=tools), bad, 400,
                 "invalid_request_error", "'tools'")
    huge = [{"role": "user", "content": "word " * 200000}]
    expect_error(lambda: streamed(client, messages=huge), bad, 400, "invalid_request_error",
                 "context")
    for body, needle in ((b'{"model": "m", "messages": [', "not valid JSON"),
                         (json.dumps({"model": "m", "messages": TURNS}).encode(),
                          "'max_tokens' is required")):
        status, reply = srv.raw("POST", "/v1/messages", body)
        try:
            err = json.loads(reply)
            check(status == 400 and err["type"] == "error" and
                  err["error"]["type"] == "invalid_request_error" and
                  needle in err["error"]["message"], f"raw {status} {reply[:200]!r}")
        except (ValueError, KeyError, TypeError):
            check(False, f"not an Anthropic error: {status} {reply[:200]!r}")


def keys(model):
    srv = Server(model, "--api-key", "sekrit", slots=1)
    try:
        ok = anthropic.Anthropic(base_url=srv.url, api_key="sekrit", max_retries=0)
        check(create(ok, messages=TURNS, max_tokens=2).usage.output_tokens == 2, "x-api-key")
        bearer = anthropic.Anthropic(base_url=srv.url, auth_token="sekrit", max_retries=0)
        check(create(bearer, messages=TURNS, max_tokens=2).stop_reason == "max_tokens", "Bearer")
        wrong = anthropic.Anthropic(base_url=srv.url, api_key="sekrit2", max_retries=0)
        expect_error(lambda: create(wrong, messages=TURNS), anthropic.AuthenticationError, 401,
                     "authentication_error", "API key")
        expect_error(lambda: wrong.messages.count_tokens(model=MODEL, messages=TURNS),
                     anthropic.AuthenticationError, 401, "authentication_error", "API key")
        # x-api-key opens every endpoint, not only Anthropic's.
        status, _ = srv.raw("GET", "/v1/models", headers={"x-api-key": "sekrit"})
        check(status == 200, f"/v1/models with x-api-key: {status}")
        status, _ = srv.raw("GET", "/v1/models", headers={"x-api-key": "SEKRIT"})
        check(status == 401, f"/v1/models with a wrong x-api-key: {status}")
    finally:
        srv.stop()


def main():
    model = gemma_path()
    srv = Server(model, slots=2)
    client = anthropic.Anthropic(base_url=srv.url, api_key="none", max_retries=0)
    try:
        conversation(client)
        stops(client)
        errors(client, srv)
    finally:
        srv.stop()
    keys(model)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
