#!/usr/bin/env python3
"""OpenAI's harmony format (gpt-oss) in `minfer serve`, end to end through the
official openai SDK and the Anthropic Messages endpoint:

  python3 tests/serve/harmony_test.py MINFER_BINARY

A synthetic Qwen3 (`minfer synth`) is served with our harmony template
tests/template/golden/templates/harmony.jinja. Its vocabulary has none of
harmony's special tokens, so the markers are plain text to it and a random
model never writes a harmony reply by itself; what is checked end to end:
- the prompt (/apply-template): reasoning_effort, the tools' TypeScript
  namespace, an earlier call's reasoning (reasoning_content) as analysis;
- a forced call (named, and "required" among several tools): the prompt
  ends with the commentary header, constrained decoding writes the body, and
  the reply reads back as one call (finish_reason "tool_calls", arguments
  that validate), whole and streamed; the same through /v1/messages
  (a tool_use block, stop_reason "tool_use");
- free text that is not harmony comes back as content (never a 500).
The channel parsing itself (analysis, final, preambles, several calls,
split at every byte) is covered by tests/serve/harmony_test.cpp.
"""
import json
import os
import subprocess
import sys
import tempfile

import jsonschema
import openai

from serve_testutil import Server, check, finish

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATE = os.path.join(ROOT, "tests", "template", "golden", "templates", "harmony.jinja")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 12},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"]}}}
CLOCK = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone.",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}},
                   "required": ["zone"]}}}
TOOLS = [WEATHER, CLOCK]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def schema_of(name):
    return next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == name)


def valid_args(name, args, what):
    try:
        jsonschema.validate(json.loads(args), schema_of(name))
    except (ValueError, jsonschema.ValidationError) as e:
        check(False, f"{what}: arguments {args!r}: {e}")


def prompt_checks(srv):
    history = ASK + [
        {"role": "assistant", "content": None, "reasoning_content": "Use the tool.",
         "tool_calls": [{"id": "call_1", "type": "function", "function": {
             "name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]
    body = {"messages": history, "tools": TOOLS, "reasoning_effort": "high"}
    status, text = srv.raw("POST", "/apply-template", json.dumps(body).encode())
    prompt = json.loads(text).get("prompt", "") if status == 200 else ""
    for want in ("Reasoning: high", "namespace functions {", "type get_weather = (_: {",
                 "<|start|>assistant<|channel|>analysis<|message|>Use the tool.<|end|>",
                 "<|start|>assistant to=functions.get_weather<|channel|>commentary json"
                 "<|message|>{\"city\": \"Paris\"}<|call|>",
                 "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"
                 "\"18 C\"<|end|><|start|>assistant"):
        check(want in prompt, f"/apply-template: {want!r} not in {prompt[-700:]!r}")


def forced_calls(client):
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice, names in ((named, {"get_weather"}), ("required", {"get_weather", "get_time"})):
        what = f"tool_choice={choice if isinstance(choice, str) else 'named'}"
        r = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice=choice,
                                           max_tokens=160, temperature=0)
        c = r.choices[0]
        check(c.finish_reason == "tool_calls", f"{what}: finish_reason {c.finish_reason}: {c}")
        calls = c.message.tool_calls or []
        check(len(calls) == 1 and not c.message.content, f"{what}: {c.message}")
        for call in calls:
            check(call.function.name in names and call.id, f"{what}: {call}")
            valid_args(call.function.name, call.function.arguments, what)
        streamed(client, choice, names, what + " streamed")


def streamed(client, choice, names, what):
    stream = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS,
                                            tool_choice=choice, max_tokens=160, temperature=0.7,
                                            seed=3, stream=True)
    calls, reason, content = {}, None, ""
    for chunk in stream:
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        content += d.content or ""
        for tc in d.tool_calls or []:
            entry = calls.setdefault(tc.index, {"name": "", "args": ""})
            if tc.function and tc.function.name:
                entry["name"] = tc.function.name
            entry["args"] += (tc.function.arguments or "") if tc.function else ""
        reason = chunk.choices[0].finish_reason or reason
    check(reason == "tool_calls" and len(calls) == 1 and content == "",
          f"{what}: {reason} {calls} {content!r}")
    for c in calls.values():
        check(c["name"] in names, f"{what}: {c}")
        valid_args(c["name"], c["args"], what)


def anthropic_call(srv):
    body = {"model": "m", "max_tokens": 160, "messages": ASK,
            "tools": [{"name": "get_weather", "description": "Weather",
                       "input_schema": WEATHER["function"]["parameters"]}],
            "tool_choice": {"type": "tool", "name": "get_weather"}}
    status, text = srv.raw("POST", "/v1/messages", json.dumps(body).encode(),
                           {"content-type": "application/json", "anthropic-version": "2023-06-01"})
    check(status == 200, f"/v1/messages: {status} {text[:300]!r}")
    if status != 200:
        return
    m = json.loads(text)
    uses = [b for b in m.get("content", []) if b.get("type") == "tool_use"]
    check(m.get("stop_reason") == "tool_use" and len(uses) == 1, f"/v1/messages: {m}")
    for u in uses:
        check(u.get("name") == "get_weather", f"/v1/messages: {u}")
        valid_args("get_weather", json.dumps(u.get("input")), "/v1/messages")


def free_text(client):
    # A random model writes no harmony: its text comes back as content.
    for stream in (False, True):
        r = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=12,
                                           temperature=0, stream=stream)
        if stream:
            reasons = [c.choices[0].finish_reason for c in r if c.choices]
            check(reasons and reasons[-1] in ("stop", "length", "tool_calls"), f"stream: {reasons}")
        else:
            check(r.choices[0].finish_reason in ("stop", "length", "tool_calls"), f"free: {r}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "qwen3.gguf")
        subprocess.run([sys.argv[1], "synth", "--model", "qwen3-0.6b", "--layers", "2", "-q",
                        "Q8_0", "-o", model, "-s"], check=True)
        srv = Server(model, "--chat-template-file", TEMPLATE, slots=2)
        try:
            client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none")
            prompt_checks(srv)
            forced_calls(client)
            anthropic_call(srv)
            free_text(client)
        finally:
            srv.stop()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
