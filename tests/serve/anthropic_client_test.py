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
Anthropic's shape: a bad field, an unsupported block, malformed tools, a
prompt past the context (BadRequestError, before any stream), malformed JSON
(raw), and the API key as x-api-key or Bearer (a wrong one:
AuthenticationError).

Tool use and thinking, on the real Gemma 3 270M (env MINFER_GEMMA3_GGUF; its
file has no template: the tools go in a Hermes system prompt) and on a
synthetic Qwen3 served with our Qwen3-style template
(tests/template/golden/templates/qwen3_tools.jinja): a forced tool
(tool_choice {type: tool} and {type: any}) gives stop_reason "tool_use" and a
tool_use block whose input validates against the input_schema (PyPI
jsonschema), streamed through messages.stream() (which accumulates the
input_json_delta events) and not; count_tokens grows with the tools; a tool
round trip (tool_use and tool_result in the history) is answered; thinking
enabled opens the think block in the prompt and its reasoning comes back as a
thinking block (streamed as thinking_delta), disabled closes it.
"""
import json
import os
import subprocess
import sys
import tempfile

import anthropic
import jsonschema

from serve_testutil import Server, check, finish, gemma_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN3_TEMPLATE = os.path.join(ROOT, "tests", "template", "golden", "templates",
                              "qwen3_tools.jinja")

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
    tools = [{"name": "weather", "description": "d", "input_schema": {"type": "array"}}]
    expect_error(lambda: create(client, messages=TURNS, tools=tools), bad, 400,
                 "invalid_request_error", "'tools[0].input_schema.type'")
    expect_error(lambda: create(client, messages=TURNS, tool_choice={"type": "any"}), bad, 400,
                 "invalid_request_error", "'tool_choice'")
    expect_error(lambda: create(client, messages=TURNS, tools=TOOLS,
                                tool_choice={"type": "tool", "name": "nope"}),
                 bad, 400, "invalid_request_error", "'tool_choice.name'")
    minimum = [{"name": "f", "input_schema": {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 1}}}}]  # outside the grammar's subset
    expect_error(lambda: create(client, messages=TURNS, tools=minimum,
                                tool_choice={"type": "any"}),
                 bad, 400, "invalid_request_error", "minimum")
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


# Bounded strings and enums: even a random model's call ends (and validates).
WEATHER = {"name": "get_weather", "description": "The current weather in a city.",
           "input_schema": {"type": "object", "properties": {
               "city": {"type": "string", "maxLength": 12},
               "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
               "required": ["city", "unit"]}}
CLOCK = {"name": "get_time", "description": "The time in a time zone.",
         "input_schema": {"type": "object", "properties": {
             "zone": {"type": "string", "maxLength": 8}}, "required": ["zone"]}}
TOOLS = [WEATHER, CLOCK]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
ROUND_TRIP = ASK + [
    {"role": "assistant", "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
         "input": {"city": "Paris", "unit": "celsius"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": "18 degrees, sunny"}]},
]


def valid_tool_use(msg, names, what):
    uses = [b for b in msg.content if b.type == "tool_use"]
    check(msg.stop_reason == "tool_use", f"{what}: stop_reason {msg.stop_reason}: {msg}")
    check(len(uses) == 1, f"{what}: tool_use blocks {msg.content}")
    for u in uses:
        check(u.id.startswith("toolu_") and u.name in names, f"{what}: {u}")
        schema = next(t["input_schema"] for t in TOOLS if t["name"] == u.name)
        try:
            jsonschema.validate(u.input, schema)
        except jsonschema.ValidationError as e:
            check(False, f"{what}: input {u.input!r}: {e}")


def forced_tools(client, tag):
    for choice, names in (({"type": "tool", "name": "get_weather"}, {"get_weather"}),
                          ({"type": "any"}, {"get_weather", "get_time"})):
        what = f"{tag} tool_choice {choice['type']}"
        r = create(client, messages=ASK, tools=TOOLS, tool_choice=choice, max_tokens=160)
        valid_tool_use(r, names, what)
        with client.messages.stream(model=MODEL, messages=ASK, tools=TOOLS, tool_choice=choice,
                                    max_tokens=160, extra_body={"temperature": 0.7}) as s:
            kinds = [e.type for e in s]
            final = s.get_final_message()
        check("input_json" in kinds and kinds[-1] == "message_stop", f"{what} streamed: {kinds}")
        valid_tool_use(final, names, what + " streamed")
    with_tools = client.messages.count_tokens(model=MODEL, messages=ASK, tools=TOOLS)
    without = client.messages.count_tokens(model=MODEL, messages=ASK)
    check(with_tools.input_tokens > without.input_tokens + 20,
          f"{tag} count_tokens with tools {with_tools} vs {without}")
    r = create(client, messages=ASK, tools=TOOLS, tool_choice={"type": "tool", "name": "get_time"},
               max_tokens=160)
    check(r.usage.input_tokens >= with_tools.input_tokens, f"{tag} usage {r.usage}")


def round_trip(client, tag):
    r = create(client, messages=ROUND_TRIP, tools=TOOLS, max_tokens=8)
    check(r.stop_reason in ("end_turn", "max_tokens", "tool_use") and r.content,
          f"{tag} round trip: {r}")
    n = client.messages.count_tokens(model=MODEL, messages=ROUND_TRIP, tools=TOOLS)
    check(n.input_tokens == r.usage.input_tokens, f"{tag} round trip count {n} vs {r.usage}")


def prompt_of(srv, body):
    """The prompt /apply-template renders for the same conversation (OpenAI's
    shape), to see where the think block stands."""
    status, text = srv.raw("POST", "/apply-template", json.dumps(body).encode())
    return json.loads(text).get("prompt", "") if status == 200 else ""


def thinking(client, tag):
    # The synthetic model is random: it thinks or not by chance. What is
    # checked is that the switch reaches the template (the prompt counts
    # differ by the closed think block) and the reply's blocks are well formed.
    on = client.messages.count_tokens(model=MODEL, messages=ASK,
                                      thinking={"type": "enabled", "budget_tokens": 1024})
    off = client.messages.count_tokens(model=MODEL, messages=ASK, thinking={"type": "disabled"})
    check(off.input_tokens > on.input_tokens, f"{tag} thinking off {off} vs on {on}")
    for mode in ({"type": "enabled", "budget_tokens": 1024}, {"type": "disabled"}):
        r = create(client, messages=ASK, thinking=mode, max_tokens=2048, temperature=1)
        kinds = [b.type for b in r.content]
        check(kinds in (["text"], ["thinking"], ["thinking", "text"]), f"{tag} {mode}: {kinds}")
        for b in r.content:
            if b.type == "thinking":
                check(b.signature == "" and b.thinking, f"{tag} thinking block {b}")
        with client.messages.stream(model=MODEL, messages=ASK, thinking=mode, max_tokens=2048,
                                    extra_body={"temperature": 1}) as s:
            events = [e for e in s]
            final = s.get_final_message()
        thought = "".join(e.delta.thinking for e in events if e.type == "content_block_delta"
                          and e.delta.type == "thinking_delta")
        got = "".join(b.thinking for b in final.content if b.type == "thinking")
        check(thought == got, f"{tag} streamed thinking {thought!r} != {got!r}")


def qwen3_checks(tmp):
    model = os.path.join(tmp, "qwen3.gguf")
    subprocess.run([sys.argv[1], "synth", "--model", "qwen3-0.6b", "--layers", "2", "-q", "Q8_0",
                    "-o", model, "-s"], check=True)
    srv = Server(model, "--chat-template-file", QWEN3_TEMPLATE, slots=2)
    try:
        client = anthropic.Anthropic(base_url=srv.url, api_key="none", max_retries=0)
        forced_tools(client, "qwen3")
        round_trip(client, "qwen3")
        thinking(client, "qwen3")
    finally:
        srv.stop()


def gemma_tools():
    path = os.environ.get("MINFER_GEMMA3_GGUF") or gemma_path()
    srv = Server(path, slots=2)
    try:
        client = anthropic.Anthropic(base_url=srv.url, api_key="none", max_retries=0)
        forced_tools(client, "gemma")
        round_trip(client, "gemma")
    finally:
        srv.stop()


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
    gemma_tools()
    with tempfile.TemporaryDirectory() as tmp:
        qwen3_checks(tmp)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
