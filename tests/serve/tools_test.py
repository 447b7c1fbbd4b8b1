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
import subprocess
import sys
import tempfile

import jsonschema
import openai

from serve_testutil import Server, check, finish, gemma_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN3_TEMPLATE = os.path.join(ROOT, "tests", "template", "golden", "templates",
                              "qwen3_tools.jinja")

# Bounded strings and enums: even a random model's call ends (and validates).
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 12},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"}},
        "required": ["city", "unit"]}}}
CLOCK = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone.",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}},
                   "required": ["zone"]}}}
TOOLS = [WEATHER, CLOCK]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def schema_of(name):
    return next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == name)


def valid_call(call, names, what):
    check(call.type == "function", f"{what}: type {call.type}")
    check(isinstance(call.id, str) and call.id, f"{what}: id {call.id!r}")
    check(call.function.name in names, f"{what}: name {call.function.name!r}")
    try:
        args = json.loads(call.function.arguments)
        jsonschema.validate(args, schema_of(call.function.name))
    except (ValueError, jsonschema.ValidationError) as e:
        check(False, f"{what}: arguments {call.function.arguments!r}: {e}")


def forced_calls(client, tag):
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice, names in ((named, {"get_weather"}), ("required", {"get_weather", "get_time"})):
        what = f"{tag} tool_choice={choice if isinstance(choice, str) else 'named'}"
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
    stream = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS,
                                            tool_choice=choice, max_tokens=160, temperature=0.7,
                                            seed=5, stream=True)
    calls, finish_reason, content = {}, None, ""
    for chunk in stream:
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        content += d.content or ""
        for tc in d.tool_calls or []:
            if tc.index not in calls:  # the first delta of a call: id, type and name
                check(tc.id and tc.type == "function" and tc.function.name,
                      f"{what}: first delta {tc}")
                calls[tc.index] = {"id": tc.id, "name": tc.function.name, "args": ""}
            calls[tc.index]["args"] += (tc.function.arguments or "") if tc.function else ""
        finish_reason = chunk.choices[0].finish_reason or finish_reason
    check(finish_reason == "tool_calls", f"{what}: finish_reason {finish_reason}")
    check(len(calls) == 1 and content == "", f"{what}: calls {calls}, content {content!r}")
    for c in calls.values():
        check(c["name"] in names, f"{what}: {c}")
        try:
            jsonschema.validate(json.loads(c["args"]), schema_of(c["name"]))
        except (ValueError, jsonschema.ValidationError) as e:
            check(False, f"{what}: arguments {c['args']!r}: {e}")


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
    model = os.path.join(tmp, "qwen3.gguf")
    subprocess.run([sys.argv[1], "synth", "--model", "qwen3-0.6b", "--layers", "2", "-q", "Q8_0",
                    "-o", model, "-s"], check=True)
    srv = Server(model, "--chat-template-file", QWEN3_TEMPLATE, slots=2)
    try:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none")
        forced_calls(client, "qwen3")
        round_trip(client, srv, "qwen3", ['"name": "get_weather"', "<tool_response>\n18 degrees",
                                          '{"name": "get_weather", "arguments": {"city": "Paris"'])
        refusals(client, "qwen3")
        thinking(srv, "qwen3")
    finally:
        srv.stop()
    srv = Server(model, "--chat-template-file", QWEN3_TEMPLATE, "--reasoning-budget", "0",
                 slots=1)
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
