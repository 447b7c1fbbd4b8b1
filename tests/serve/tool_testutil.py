"""What the tool-calling server tests share (tests/serve/tools_test.py,
harmony_test.py), over serve_testutil's server and checks: the tools they
offer, a synthetic Qwen3 served with one of our chat templates, checks of a
call against its tool's schema (PyPI `jsonschema`), and a streamed chat
completion put together by the official openai SDK's own accumulation
(ChatCompletionStreamState), counting the pieces each call came in."""
import json
import os
import subprocess
import sys

import jsonschema
from openai.lib.streaming.chat import ChatCompletionStreamState

from serve_testutil import Server, check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATES = os.path.join(ROOT, "tests", "template", "golden", "templates")

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
NAMED = {"type": "function", "function": {"name": "get_weather"}}
# Each forced tool_choice and the functions its call may name.
FORCED = ((NAMED, {"get_weather"}), ("required", {"get_weather", "get_time"}))


def choice_name(choice):
    return choice if isinstance(choice, str) else "named"


def schema_of(name):
    return next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == name)


def valid_args(name, args, what):
    try:
        jsonschema.validate(json.loads(args), schema_of(name))
    except (ValueError, jsonschema.ValidationError) as e:
        check(False, f"{what}: arguments {args!r}: {e}")


def valid_call(call, names, what):
    """An SDK tool call: a function call with an id, one of `names`, and
    arguments that validate against its parameters."""
    check(call.type == "function", f"{what}: type {call.type}")
    check(isinstance(call.id, str) and call.id, f"{what}: id {call.id!r}")
    check(call.function.name in names, f"{what}: name {call.function.name!r}")
    if call.function.name in names:
        valid_args(call.function.name, call.function.arguments, what)


def synth_qwen3(tmp):
    """A 2-layer synthetic Qwen3 0.6B (random weights, the real vocabulary)."""
    model = os.path.join(tmp, "qwen3.gguf")
    subprocess.run([sys.argv[1], "synth", "--model", "qwen3-0.6b", "--layers", "2", "-q", "Q8_0",
                    "-o", model, "-s"], check=True)
    return model


def serve_with_template(model, template, *extra, slots=2):
    """`minfer serve` of `model` with tests/template/golden/templates/<template>."""
    return Server(model, "--chat-template-file", os.path.join(TEMPLATES, template), *extra,
                  slots=slots)


class Streamed:
    """A streamed chat completion as the SDK accumulates it: `message` and
    `finish_reason` of choice 0, and per call index how many argument pieces
    came and whether its first delta carried the id, type and name."""

    def __init__(self, stream):
        state = ChatCompletionStreamState()
        self.pieces, self.headers_ok = {}, True
        for chunk in stream:
            state.handle_chunk(chunk)
            for c in chunk.choices:
                for tc in c.delta.tool_calls or []:
                    if tc.index not in self.pieces:
                        self.headers_ok &= bool(tc.id and tc.type == "function" and tc.function
                                                and tc.function.name)
                        self.pieces[tc.index] = 0
                    self.pieces[tc.index] += bool(tc.function and tc.function.arguments)
        # The snapshot, not get_final_completion(): that one raises on "length".
        choice = state.current_completion_snapshot.choices[0]
        self.message, self.finish_reason = choice.message, choice.finish_reason
        self.calls = self.message.tool_calls or []
        self.content = self.message.content or ""


def stream_chat(client, **kw):
    return Streamed(client.chat.completions.create(model="m", stream=True, **kw))
