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
import sys
import tempfile

import openai

from serve_testutil import check, finish
from tool_testutil import (ASK, FORCED, TOOLS, WEATHER, choice_name, serve_with_template,
                           stream_chat, synth_qwen3, valid_args, valid_call)


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
    for choice, names in FORCED:
        what = f"tool_choice={choice_name(choice)}"
        r = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice=choice,
                                           max_tokens=160, temperature=0)
        c = r.choices[0]
        check(c.finish_reason == "tool_calls", f"{what}: finish_reason {c.finish_reason}: {c}")
        calls = c.message.tool_calls or []
        check(len(calls) == 1 and not c.message.content, f"{what}: {c.message}")
        for call in calls:
            valid_call(call, names, what)
        streamed(client, choice, names, what + " streamed")


def streamed(client, choice, names, what):
    s = stream_chat(client, messages=ASK, tools=TOOLS, tool_choice=choice, max_tokens=160,
                    temperature=0.7, seed=3)
    check(s.finish_reason == "tool_calls" and len(s.calls) == 1 and s.content == "",
          f"{what}: {s.finish_reason} {s.calls} {s.content!r}")
    for call in s.calls:
        valid_call(call, names, what)


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
        srv = serve_with_template(synth_qwen3(tmp), "harmony.jinja")
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
