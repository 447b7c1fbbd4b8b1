#!/usr/bin/env python3
"""Tool calling and reasoning in `minfer serve`, through the official openai
SDK:

  python3 tests/serve/tools_test.py MINFER_BINARY

- A named tool_choice and "required" give a call on the real Gemma 3 270M
  (whose file has no chat template: the tools go in a Hermes system prompt)
  and on a synthetic Qwen3 (`minfer synth`, served with our Hermes/Qwen3
  template tests/template/golden/templates/qwen3_tools.jinja), streamed
  and not: finish_reason "tool_calls", one call to the function, its
  arguments a JSON string that validates against the parameters (PyPI
  `jsonschema`); the streamed deltas (index, id, type and name first, then
  argument chunks) add up to one such call.
- On the synthetic Qwen3 (Hermes calls), a call's arguments stream in
  pieces as they are generated: the SDK's own accumulation
  (ChatCompletionStreamState) gives exactly the arguments of the same greedy
  reply unstreamed, and a call cut by max_tokens comes back as the same
  content, finish_reason "length", streamed or not; /v1/messages streams a
  tool_use input as input_json_delta pieces that the anthropic SDK puts
  together into the unstreamed input.
- A tool round trip (an assistant's tool_calls and the tool's result in the
  history) is accepted and rendered: /apply-template shows the call and the
  result where the template puts them, and a completion answers.
- Thinking: chat_template_kwargs {"enable_thinking": false} and
  --reasoning-budget 0 close the think block in the prompt.
- Malformed definitions are 400s naming the field (the SDK's
  BadRequestError).
The model in these tests is random or pretrained, so what is checked is the
shape of the calls, never what a call says.
"""
import json
import os
import sys
import tempfile

import anthropic
import openai

from serve_testutil import Server, check, finish, gemma_path
from tool_testutil import (ASK, FORCED, NAMED, TOOLS, WEATHER, choice_name,
                           serve_with_template, stream_chat, synth_qwen3, valid_args, valid_call)


def forced_calls(client, tag):
    for choice, names in FORCED:
        what = f"{tag} tool_choice={choice_name(choice)}"
        r = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice=choice,
                                           max_tokens=160, temperature=0)
        c = r.choices[0]
        check(c.finish_reason == "tool_calls", f"{what}: finish_reason {c.finish_reason}: {c}")
        calls = c.message.tool_calls or []
        check(len(calls) == 1, f"{what}: calls {calls}")
        for call in calls:
            valid_call(call, names, what)
        streamed_call(client, choice, names, what + " streamed")


def streamed_call(client, choice, names, what):
    s = stream_chat(client, messages=ASK, tools=TOOLS, tool_choice=choice, max_tokens=160,
                    temperature=0.7, seed=5)
    check(s.finish_reason == "tool_calls", f"{what}: finish_reason {s.finish_reason}")
    check(len(s.calls) == 1 and s.content == "" and s.headers_ok,
          f"{what}: calls {s.calls}, content {s.content!r}")
    for call in s.calls:
        valid_call(call, names, what)


def incremental_arguments(client, tag):
    """A Hermes call's arguments stream in pieces as they are generated,
    which the SDK's accumulation puts together into exactly the arguments of
    the same (greedy) reply unstreamed; a call cut by max_tokens falls back
    to content as the unstreamed reply does."""
    for choice, names in FORCED:
        what = f"{tag} incremental tool_choice={choice_name(choice)}"
        body = dict(messages=ASK, tools=TOOLS, tool_choice=choice, max_tokens=160, temperature=0)
        whole = client.chat.completions.create(model="m", **body).choices[0]
        s = stream_chat(client, **body)
        check(s.finish_reason == whole.finish_reason == "tool_calls",
              f"{what}: {s.finish_reason} / {whole.finish_reason}")
        check(s.pieces.get(0, 0) > 1, f"{what}: arguments in {s.pieces} pieces")
        want = [(c.function.name, c.function.arguments) for c in whole.message.tool_calls or []]
        got = [(c.function.name, c.function.arguments) for c in s.calls]
        check(got == want and len(got) == 1, f"{what}: streamed {got}, whole {want}")
        for call in s.calls:
            valid_call(call, names, what)
    # Cut a few tokens before its end: the call's header and some of its
    # arguments have gone out when it turns out to be no call.
    body = dict(messages=ASK, tools=TOOLS, tool_choice=NAMED, temperature=0)
    n = client.chat.completions.create(model="m", max_tokens=160, **body).usage.completion_tokens
    whole = client.chat.completions.create(model="m", max_tokens=n - 5, **body).choices[0]
    s = stream_chat(client, max_tokens=n - 5, **body)
    check(whole.finish_reason == s.finish_reason == "length" and not whole.message.tool_calls,
          f"{tag} cut call: {whole} / {s.finish_reason}")
    check(s.pieces.get(0, 0) > 0, f"{tag} cut call: no piece of it was streamed ({n} tokens)")
    check(s.content == whole.message.content, f"{tag} cut call: streamed content {s.content!r}, "
          f"whole {whole.message.content!r}")


def as_doubles(value):
    return json.loads(json.dumps(value), parse_int=float)


def anthropic_input_streams(srv, tag):
    """/v1/messages: a tool_use block's input streams as input_json_delta
    pieces that the anthropic SDK accumulates into the unstreamed input."""
    client = anthropic.Anthropic(base_url=srv.url, api_key="none")
    body = dict(model="m", max_tokens=160, messages=ASK,
                tools=[{"name": "get_weather", "description": "Weather",
                        "input_schema": WEATHER["function"]["parameters"]}],
                tool_choice={"type": "tool", "name": "get_weather"},
                extra_body={"temperature": 0})
    whole = client.messages.create(**body)
    pieces = 0
    with client.messages.stream(**body) as stream:
        for event in stream:
            pieces += event.type == "input_json"
        final = stream.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    # Numbers as doubles: the whole reply's input has been through a JSON
    # value (an integer past 64 bits, which a random model may write, comes
    # back as the nearest double).
    want = [as_doubles(b.input) for b in whole.content if b.type == "tool_use"]
    check(pieces > 1, f"{tag} anthropic: input in {pieces} pieces")
    check([as_doubles(u.input) for u in uses] == want and len(want) == 1 and
          final.stop_reason == "tool_use",
          f"{tag} anthropic: streamed {final.content}, whole {whole.content}")
    for u in uses:
        valid_args(u.name, json.dumps(u.input), f"{tag} anthropic")


ROUND_TRIP = ASK + [
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather",
                      "arguments": json.dumps({"city": "Paris", "unit": "celsius"})}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees, sunny"},
]


def round_trip(client, srv, tag, wants):
    status, body = srv.raw("POST", "/apply-template",
                           json.dumps({"messages": ROUND_TRIP, "tools": TOOLS}).encode())
    check(status == 200, f"{tag} round trip /apply-template: {status} {body[:300]!r}")
    prompt = json.loads(body).get("prompt", "") if status == 200 else ""
    for want in wants:
        check(want in prompt, f"{tag} round trip: {want!r} not in the prompt {prompt[-600:]!r}")
    r = client.chat.completions.create(model="m", messages=ROUND_TRIP, tools=TOOLS, max_tokens=8,
                                       temperature=0)
    check(r.choices[0].finish_reason in ("stop", "length", "tool_calls"),
          f"{tag} round trip answer: {r}")


def refusals(client, tag):
    bad = [
        ({"tools": [{"type": "function", "function": {"description": "no name"}}]},
         "tools[0].function.name"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "array"}}}]}, "tools[0].function.parameters.type"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
         "tool_choice.function.name"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}}}],
          "tool_choice": "required"}, "minimum"),  # outside the grammar's subset
    ]
    for extra, needle in bad:
        try:
            client.chat.completions.create(model="m", messages=ASK, max_tokens=4, **extra)
            check(False, f"{tag}: {extra} was accepted")
        except openai.BadRequestError as e:
            check(needle in str(e), f"{tag}: {needle!r} not in {e}")


def thinking(srv, tag):
    body = {"messages": ASK, "chat_template_kwargs": {"enable_thinking": False}}
    status, text = srv.raw("POST", "/apply-template", json.dumps(body).encode())
    prompt = json.loads(text).get("prompt", "") if status == 200 else ""
    check(prompt.endswith("<think>\n\n</think>\n\n"), f"{tag} enable_thinking false: {prompt!r}")


def qwen3_checks(tmp):
    model = synth_qwen3(tmp)
    srv = serve_with_template(model, "qwen3_tools.jinja")
    try:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none")
        forced_calls(client, "qwen3")
        incremental_arguments(client, "qwen3")
        anthropic_input_streams(srv, "qwen3")
        round_trip(client, srv, "qwen3", ['"name": "get_weather"', "<tool_response>\n18 degrees",
                                          '{"name": "get_weather", "arguments": {"city": "Paris"'])
        refusals(client, "qwen3")
        thinking(srv, "qwen3")
    finally:
        srv.stop()
    srv = serve_with_template(model, "qwen3_tools.jinja", "--reasoning-budget", "0", slots=1)
    try:
        status, text = srv.raw("POST", "/apply-template", json.dumps({"messages": ASK}).encode())
        check(status == 200 and json.loads(text)["prompt"].endswith("</think>\n\n"),
              f"--reasoning-budget 0: {text[-200:]!r}")
    finally:
        srv.stop()


def gemma_checks():
    path = os.environ.get("MINFER_GEMMA3_GGUF") or gemma_path()
    srv = Server(path, slots=2)
    try:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none")
        forced_calls(client, "gemma")
        # No template with tools: the Hermes system prompt and Hermes turns.
        round_trip(client, srv, "gemma", ["<tools>", "<tool_call>", "<tool_response>\n18 degrees"])
        refusals(client, "gemma")
    finally:
        srv.stop()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        qwen3_checks(tmp)
    gemma_checks()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
