#!/usr/bin/env python3
"""Real chat templates through minfer, against Python's jinja2:

  python3 tests/serve/chat_templates_test.py MINFER_BINARY MINFER_CHAT_PROBE

The templates are llama.cpp's copies of the model vendors' chat templates
(models/templates/*.jinja), read at test time from the llama-cpp-python
sdist (PyPI, 0.3.36; never committed here). The sdist is found at
$MINFER_LLAMA_CPP_SDIST, else in ~/.cache/minfer/ (tools/install_deps.sh
--tests puts it there), else downloaded there with `pip download`; when it
cannot be had the test is skipped (exit 77).

Per template, for conversations with tools, assistant tool calls, tool
results, earlier reasoning and the reasoning switches (enable_thinking,
reasoning_effort, --reasoning-budget 0, forced calls):
- the prompt minfer plans (minfer_chat_probe: parse_completion, plan_chat
  and the template interpreter, as `minfer serve` runs them) is byte-equal to
  jinja2's rendering with HF apply_chat_template's environment
  (tools/gen_template_goldens.py) and the context minfer documents
  (docs/SERVER.md, "Tool calling"), or both fail;
- the same through a running `minfer serve --chat-template-file` and its
  /apply-template, on a synthetic model;
- the tool-call family read from the template's text is the family's;
- a reply written as the template itself writes an assistant's calls parses
  back into the same calls, whole and streamed a byte at a time.
"""
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
try:
    import jinja2  # noqa: F401  (gen_template_goldens needs it)
    import gen_template_goldens
except ImportError as e:
    print(f"skipped: {e} (bash tools/install_deps.sh --tests installs jinja2)")
    sys.exit(77)

from serve_testutil import Server, check, finish  # noqa: E402

SDIST_VERSION = "0.3.36"
SDIST_NAME = f"llama_cpp_python-{SDIST_VERSION}.tar.gz"
TEMPLATE_DIR = f"llama_cpp_python-{SDIST_VERSION}/vendor/llama.cpp/models/templates/"
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "minfer")

# file -> (the family its calls are read in, its BOS and EOS texts)
TEMPLATES = {
    "Qwen-Qwen3-0.6B.jinja": ("hermes", "", "<|im_end|>"),
    "Qwen-Qwen2.5-7B-Instruct.jinja": ("hermes", "", "<|im_end|>"),
    "Qwen-QwQ-32B.jinja": ("hermes", "", "<|im_end|>"),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": ("hermes", "<|begin_of_text|>",
                                                          "<|im_end|>"),
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": ("hermes", "<|begin_of_text|>",
                                                            "<|im_end|>"),
    "meta-llama-Llama-3.1-8B-Instruct.jinja": ("llama3", "<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct.jinja": ("llama3", "<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.3-70B-Instruct.jinja": ("llama3", "<|begin_of_text|>", "<|eot_id|>"),
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": ("mistral", "<s>", "</s>"),
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": ("mistral", "<s>", "</s>"),
    "unsloth-mistral-Devstral-Small-2507.jinja": ("mistral", "<s>", "</s>"),
    "openai-gpt-oss-120b.jinja": ("harmony", "<|startoftext|>", "<|return|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": ("hermes", "<｜begin▁of▁sentence｜>",
                                                       "<｜end▁of▁sentence｜>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": ("hermes", "<｜begin▁of▁sentence｜>",
                                                       "<｜end▁of▁sentence｜>"),
}

# What a turn's end looks like in a rendered reply (end-of-generation tokens,
# never part of a model's text).
TURN_ENDS = ["<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<|call|>", "<|return|>",
             "<|end|>", "<｜end▁of▁sentence｜>", "<｜tool▁calls▁end｜>"]


def sdist_path():
    """The sdist's path, downloaded into the cache when missing; None when it
    cannot be had."""
    given = os.environ.get("MINFER_LLAMA_CPP_SDIST")
    if given:
        return given if os.path.exists(given) else None
    path = os.path.join(CACHE, SDIST_NAME)
    if os.path.exists(path):
        return path
    os.makedirs(CACHE, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
                        "--no-deps", f"llama-cpp-python=={SDIST_VERSION}", "-d", CACHE],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr[-800:])
    return path if os.path.exists(path) else None


def read_templates(sdist):
    out = {}
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar:
            name = member.name
            if name.startswith(TEMPLATE_DIR) and name[len(TEMPLATE_DIR):] in TEMPLATES:
                out[name[len(TEMPLATE_DIR):]] = tar.extractfile(member).read().decode("utf-8")
    return out


# ---------------------------------------------------------------------------
# The reference: the context minfer documents, rendered by jinja2.

ENV = gen_template_goldens.environment()


def reads_tools(source):
    return re.search(r"(?<![A-Za-z0-9_])tools(?![A-Za-z0-9_])", source) is not None


def is_harmony(source):
    return "<|start|>" in source and "<|channel|>" in source


def compact(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def arguments_value(args):
    """What a template sees as a call's arguments: the parsed JSON, else the text."""
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args


def text_of(content):
    if isinstance(content, list):
        return "".join(p["text"] for p in content)
    return content


def template_message(m, reasoning_key, null_content):
    """A message as minfer hands it to the template (runtime/chat_formatter):
    a null content as none, or as "" when `null_content` is false."""
    content = text_of(m.get("content"))
    d = {"role": m["role"], "content": content if content is not None or null_content else ""}
    calls = []
    for c in m.get("tool_calls") or []:
        call = {"id": c["id"]} if c.get("id") else {}
        call["type"] = "function"
        call["function"] = {"name": c["function"]["name"],
                            "arguments": arguments_value(c["function"].get("arguments", "{}"))}
        calls.append(call)
    if calls:
        d["tool_calls"] = calls
    for key in ("tool_call_id", "name"):
        if m.get(key):
            d[key] = m[key]
    if m.get("reasoning_content"):
        d[reasoning_key] = m["reasoning_content"]
    return d


def hermes_tools_prompt(tools):
    listed = "".join(compact(t) + "\n" for t in tools)
    return ("# Tools\n\nYou may call one or more functions to help with the request. The "
            "functions, as JSON schemas, are inside <tools></tools>:\n<tools>\n" + listed +
            "</tools>\n\nTo call one, answer with its name and arguments as a JSON object "
            "inside <tool_call></tool_call> tags, one pair of tags per call:\n<tool_call>\n"
            "{\"name\": \"<function name>\", \"arguments\": {<arguments as JSON>}}\n</tool_call>")


def hermes_messages(messages):
    """A template that does not read tools: calls and results as Hermes text."""
    out = []
    for m in messages:
        if m["role"] == "tool":
            text = "<tool_response>\n" + text_of(m.get("content") or "") + "\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1]["content"].startswith("<tool_resp"):
                out[-1]["content"] += "\n" + text
            else:
                out.append({"role": "user", "content": text})
            continue
        copy = {"role": m["role"], "content": text_of(m.get("content")) or ""}
        if m.get("reasoning_content"):
            copy["reasoning_content"] = m["reasoning_content"]
        for c in m.get("tool_calls") or []:
            if copy["content"]:
                copy["content"] += "\n"
            args = arguments_value(c["function"].get("arguments", "{}"))
            copy["content"] += ("<tool_call>\n" + compact({"name": c["function"]["name"],
                                                           "arguments": args}) + "\n</tool_call>")
        out.append(copy)
    return out


def mistral_call_id(cid, salt):
    """minfer's 9-character id for a client's call id (serve/chat_plan.h):
    its FNV-1a hash, salted, in base 62."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    h = 14695981039346656037 ^ salt
    for b in cid.encode():
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    out = ""
    for _ in range(9):
        out, h = out + digits[h % 62], h // 62
    return out


def mistral_ids(messages):
    """The history's call ids as a Mistral template gets them from minfer."""
    def ok(i):
        return len(i) == 9 and i.isascii() and i.isalnum()
    taken = {c["id"] for m in messages for c in m.get("tool_calls") or [] if ok(c.get("id", ""))}
    mapped = {}

    def map_id(i):
        if not i or ok(i):
            return i
        salt = 0
        while i not in mapped:
            candidate = mistral_call_id(i, salt)
            if candidate not in taken:
                taken.add(candidate)
                mapped[i] = candidate
            salt += 1
        return mapped[i]
    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [dict(c, id=map_id(c.get("id", ""))) for c in m["tool_calls"]]
        if m.get("tool_call_id"):
            m["tool_call_id"] = map_id(m["tool_call_id"])
        out.append(m)
    return out


def forced(request):
    choice = request.get("tool_choice")
    return bool(request.get("tools")) and (choice == "required" or isinstance(choice, dict))


def tools_active(request):
    return bool(request.get("tools")) and request.get("tool_choice") != "none"


def forced_prefix(family, request):
    if family == "hermes":
        return "<tool_call>\n"
    if family == "mistral":
        return "[TOOL_CALLS]"
    if family == "harmony":
        choice = request["tool_choice"]
        tools = request["tools"]
        name = (choice["function"]["name"] if isinstance(choice, dict)
                else tools[0]["function"]["name"] if len(tools) == 1 else "")
        if not name:
            return "<|channel|>commentary <|constrain|>json<|message|>"
        return f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
    return ""


def reference_prompt(source, family, bos, eos, request, budget=-1, generation=True):
    """The prompt minfer should plan, or None when jinja2 raises (generation
    False: the conversation rendered as a closed one, for its last turn)."""
    template_tools = reads_tools(source)
    harmony = is_harmony(source)
    messages = request["messages"]
    if family == "mistral":
        messages = mistral_ids(messages)
    has_tool_turns = any(m["role"] == "tool" or m.get("tool_calls") for m in messages)
    if not template_tools and has_tool_turns:
        messages = hermes_messages(messages)
    else:
        messages = [dict(m) for m in messages]
    if not template_tools and tools_active(request):
        text = hermes_tools_prompt(request["tools"])
        if messages and messages[0]["role"] == "system":
            first = text_of(messages[0]["content"]) or ""
            messages[0] = dict(messages[0], content=first + "\n\n" + text if first else text)
        else:
            messages.insert(0, {"role": "system", "content": text})
    is_forced = forced(request)
    kwargs = request.get("chat_template_kwargs") or {}
    thinking = budget != 0 and not is_forced and kwargs.get("enable_thinking") is not False
    context_vars = {}
    if template_tools and tools_active(request):
        context_vars["tools"] = request["tools"]
    context_vars["enable_thinking"] = thinking
    if request.get("reasoning_effort"):
        context_vars["reasoning_effort"] = request["reasoning_effort"]
    context_vars.update(kwargs)
    reasoning_key = ("thinking" if "thinking" in source and "reasoning_content" not in source
                     else "reasoning_content")
    prompt = None
    # A null content first; a template that fails on one gets "" (a turn of
    # calls only), as minfer retries it.
    for null_content in ((False,) if harmony else (True, False)):
        context = {"messages": [template_message(m, reasoning_key, null_content)
                                for m in messages],
                   "add_generation_prompt": generation, "bos_token": bos, "eos_token": eos,
                   **context_vars}
        try:
            prompt = ENV.from_string(source).render(**context)
            break
        except Exception:  # noqa: BLE001 - any failure: minfer must fail as well
            if not any(m.get("content") is None for m in messages):
                break
    if prompt is None or not generation:
        return prompt
    opens = prompt.rstrip(" \n\t\r").endswith("<think>")
    if (not thinking or is_forced) and opens:
        prompt += "</think>\n\n"
    if is_forced and tools_active(request):
        prompt += forced_prefix(family, request)
    return prompt


# ---------------------------------------------------------------------------
# The conversations: OpenAI chat bodies, as a client sends them.

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                 "description": "The unit"}},
        "required": ["city"]}}}
CLOCK = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone.",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string"}},
                   "required": ["zone"]}}}
TOOLS = [WEATHER, CLOCK]

SYSTEM = {"role": "system", "content": "You are terse."}
USER = {"role": "user", "content": "What is the weather in Paris?"}
USER2 = {"role": "user", "content": "And in Rome? Grüße — \"quotes\"\nnew line"}
ANSWER = {"role": "assistant", "content": "It is 18 C and sunny in Paris."}
PARIS = {"city": "Paris", "unit": "celsius"}
ROME = {"city": "Rome"}


def call(cid, args, name="get_weather"):
    return {"id": cid, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


CALL1 = {"role": "assistant", "content": None, "tool_calls": [call("Wx7a9Kq2b", PARIS)]}
CALL2 = {"role": "assistant", "content": None,
         "tool_calls": [call("Wx7a9Kq2b", PARIS), call("Rm3t8Lp0z", ROME)]}
RESULT1 = {"role": "tool", "tool_call_id": "Wx7a9Kq2b", "content": "18 C, sunny"}
RESULT2 = {"role": "tool", "tool_call_id": "Rm3t8Lp0z", "content": "{\"temp\": 24}"}

# OpenAI's and Anthropic's own ids, which Mistral's templates refuse: minfer
# maps them to 9 letters and digits.
OPENAI_ID, ANTHROPIC_ID = "call_AbCdEfGhIjKlMnOpQrStUvWx", "toolu_01A09q90qw90lq917835lq9"
FOREIGN_CALLS = {"role": "assistant", "content": None,
                 "tool_calls": [call(OPENAI_ID, PARIS), call(ANTHROPIC_ID, ROME)]}
FOREIGN_RESULTS = [{"role": "tool", "tool_call_id": OPENAI_ID, "content": "18 C"},
                   {"role": "tool", "tool_call_id": ANTHROPIC_ID, "content": "24 C"}]

CASES = {
    "plain": {"messages": [SYSTEM, USER]},
    "no_system": {"messages": [USER]},
    "turns": {"messages": [SYSTEM, USER, ANSWER, USER2]},
    "text_parts": {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "part one "}, {"type": "text", "text": "part two"}]}]},
    "tools": {"messages": [SYSTEM, USER], "tools": TOOLS},
    "tools_no_system": {"messages": [USER], "tools": TOOLS},
    "tool_choice_none": {"messages": [USER], "tools": TOOLS, "tool_choice": "none"},
    "round_trip": {"messages": [USER, CALL1, RESULT1], "tools": TOOLS},
    "round_trip_answered": {"messages": [SYSTEM, USER, CALL1, RESULT1, ANSWER, USER2],
                            "tools": TOOLS},
    "parallel": {"messages": [USER, CALL2, RESULT1, RESULT2], "tools": TOOLS},
    "content_and_call": {"messages": [USER, dict(CALL1, content="Let me check."), RESULT1],
                         "tools": TOOLS},
    "reasoning_history": {"messages": [USER, dict(ANSWER, reasoning_content="Look it up."),
                                       USER2]},
    "reasoning_call": {"messages": [USER, dict(CALL1, reasoning_content="Need the tool."),
                                    RESULT1], "tools": TOOLS},
    "history_no_tools": {"messages": [USER, CALL1, RESULT1, ANSWER, USER2]},
    "foreign_ids": {"messages": [USER, FOREIGN_CALLS, *FOREIGN_RESULTS, ANSWER, USER2],
                    "tools": TOOLS},
    "foreign_id_pending": {"messages": [USER, dict(CALL1, tool_calls=[call(OPENAI_ID, PARIS)]),
                                        FOREIGN_RESULTS[0]], "tools": TOOLS},
    "thinking_off": {"messages": [USER], "chat_template_kwargs": {"enable_thinking": False}},
    "thinking_on": {"messages": [USER], "chat_template_kwargs": {"enable_thinking": True}},
    "effort_high": {"messages": [USER], "tools": TOOLS, "reasoning_effort": "high"},
    "effort_low": {"messages": [SYSTEM, USER], "reasoning_effort": "low"},
    "forced_named": {"messages": [USER], "tools": TOOLS,
                     "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    "forced_required": {"messages": [USER], "tools": TOOLS, "tool_choice": "required"},
    "forced_one_tool": {"messages": [USER], "tools": [WEATHER], "tool_choice": "required"},
}
# Cases run with --reasoning-budget 0 as well.
BUDGET_ZERO = ["no_system", "tools", "round_trip"]


def run_probe(probe, source, bos, eos, request, budget=-1, outputs=()):
    body = {"template": source, "bos_token": bos, "eos_token": eos, "request": request,
            "reasoning_budget": budget, "outputs": list(outputs), "chunk": 1}
    r = subprocess.run([probe], input=json.dumps(body), capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"minfer_chat_probe exited {r.returncode}: {r.stderr[-500:]}")
    return json.loads(r.stdout)


def first_difference(a, b):
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"at byte {k}: jinja2 {a[max(0, k - 60):k + 60]!r} / minfer {b[max(0, k - 60):k + 60]!r}"


def compare(what, want, got, got_error):
    """want: jinja2's prompt or None (it raised); got: minfer's or None."""
    if want is None:
        check(got is None, f"{what}: jinja2 raised, minfer rendered {got!r:.300}")
        return "error"
    if got is None:
        check(False, f"{what}: minfer failed ({got_error}), jinja2 rendered {want!r:.300}")
        return "fail"
    check(got == want, f"{what}: prompts differ {first_difference(want, got)}")
    return "equal" if got == want else "fail"


def prompt_checks(probe, name, source, tally):
    family, bos, eos = TEMPLATES[name]
    for cname, request in CASES.items():
        for budget in ((-1, 0) if cname in BUDGET_ZERO else (-1,)):
            want = reference_prompt(source, family, bos, eos, request, budget)
            out = run_probe(probe, source, bos, eos, request, budget)
            what = f"{name} {cname}" + (" budget 0" if budget == 0 else "")
            tally[compare(what, want, out.get("prompt"), out.get("error"))] += 1
            if out.get("prompt") is not None and tools_active(request):
                check(out["family"] == family, f"{what}: read as {out['family']}, not {family}")
            if family == "mistral" and cname.startswith("foreign"):
                prompt = out.get("prompt") or ""
                check(prompt and OPENAI_ID not in prompt and ANTHROPIC_ID not in prompt,
                      f"{what}: the client's ids reach the template: {out}")


# ---------------------------------------------------------------------------
# Replies: an assistant's calls as the template writes them, read back.

REPLIES = {
    "one_call": ([USER, CALL1], [("get_weather", PARIS)]),
    "two_calls": ([USER, CALL2], [("get_weather", PARIS), ("get_weather", ROME)]),
    "text_then_call": ([USER, dict(CALL1, content="Let me check.")], [("get_weather", PARIS)]),
    "after_result": ([USER, CALL1, RESULT1, {"role": "assistant", "content": None,
                                             "tool_calls": [call("Qz5c1Vb8n", {"zone": "CET"},
                                                                 "get_time")]}],
                     [("get_time", {"zone": "CET"})]),
}
# Families whose templates write every call of a turn (gpt-oss's and Llama
# 3.x's write one).
PARALLEL_FAMILIES = {"hermes", "mistral"}


def strip_turn_end(text):
    changed = True
    while changed:
        changed = False
        text = text.rstrip("\n")
        for end in TURN_ENDS:
            if text.endswith(end):
                text, changed = text[:-len(end)], True
    return text


def reply_text(source, family, bos, eos, request):
    """The last assistant turn of `request` as generated text: what the
    closed conversation writes after the generation prompt of the turns
    before it (the header it adds to them), end-of-turn markers dropped."""
    head = dict(request, messages=request["messages"][:-1])
    prompt = reference_prompt(source, family, bos, eos, head)
    closed = reference_prompt(source, family, bos, eos, head, generation=False)
    whole = reference_prompt(source, family, bos, eos, request, generation=False)
    if prompt is None or closed is None or whole is None:
        return None, None
    opened = prompt.rstrip().endswith("<think>")
    if opened:  # the reply goes on inside the thinking the prompt opened
        prompt = prompt[:prompt.rstrip().rfind("<think>")]
    header = prompt[len(closed):] if prompt.startswith(closed) else ""
    if header and header in whole:
        text = whole[whole.rfind(header) + len(header):]
    else:  # no generation prompt (Mistral's): the turn follows the others
        text = whole[len(os.path.commonprefix([prompt, whole])):]
    text = strip_turn_end(text)
    if opened:
        text = "Checking the weather.\n</think>\n\n" + text
    return head, text


def reply_checks(probe, name, source, tally):
    family, bos, eos = TEMPLATES[name]
    for rname, (messages, want) in REPLIES.items():
        if len(want) > 1 and family not in PARALLEL_FAMILIES:
            continue
        what = f"{name} reply {rname}"
        head, text = reply_text(source, family, bos, eos, {"messages": messages, "tools": TOOLS})
        if text is None:
            check(False, f"{what}: jinja2 cannot render the turn")
            continue
        out = run_probe(probe, source, bos, eos, head, outputs=[text])
        if "error" in out:
            check(False, f"{what}: {out['error']}")
            continue
        whole, streamed = out["replies"][0]["whole"], out["replies"][0]["streamed"]
        got = [(c["name"], json.loads(c["arguments"])) for c in whole["calls"]]
        check(got == want, f"{what}: {text!r} read as {whole}")
        tally["replies"] += got == want
        check(whole["content"].strip() in ("", "Let me check."),
              f"{what}: content {whole['content']!r}")
        for key in ("reasoning", "content"):
            check(streamed[key] == whole[key],
                  f"{what}: streamed {key} {streamed[key]!r}, whole {whole[key]!r}")
        # Streamed a byte at a time: the same calls (ids aside: each read
        # makes its own), Hermes calls' arguments in many pieces.
        check([(c["name"], c["arguments"]) for c in streamed["calls"]] ==
              [(c["name"], c["arguments"]) for c in whole["calls"]] and
              streamed["confirmed"] == len(whole["calls"]),
              f"{what}: streamed calls {streamed['calls']}, whole {whole['calls']}")
        if family == "hermes":
            check(all(c["fragments"] > 1 for c in streamed["calls"]),
                  f"{what}: arguments not streamed in pieces: {streamed['calls']}")


# ---------------------------------------------------------------------------
# The same prompts through `minfer serve --chat-template-file` and its
# /apply-template, on a synthetic model (its own BOS and EOS texts).

def vocabulary_specials(model):
    import gguf
    reader = gguf.GGUFReader(model)

    def token(key):
        field = reader.fields.get(key)
        if field is None:
            return ""
        tid = int(field.parts[field.data[0]][0])
        tokens = reader.fields["tokenizer.ggml.tokens"]
        return bytes(tokens.parts[tokens.data[tid]]).decode("utf-8")
    return token("tokenizer.ggml.bos_token_id"), token("tokenizer.ggml.eos_token_id")


def server_checks(model, name, source, tmp, tally):
    family = TEMPLATES[name][0]
    bos, eos = vocabulary_specials(model)
    path = os.path.join(tmp, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    srv = Server(model, "--chat-template-file", path, slots=1, ctx=8192)
    try:
        for cname, request in CASES.items():
            want = reference_prompt(source, family, bos, eos, request)
            status, body = srv.raw("POST", "/apply-template", json.dumps(request).encode())
            got = json.loads(body).get("prompt") if status == 200 else None
            check(status in (200, 400), f"{name} {cname} /apply-template: {status} {body[:200]!r}")
            tally[compare(f"{name} {cname} (server)", want, got, body[:300])] += 1
        if family == "mistral":
            anthropic_ids(srv, name)
    finally:
        srv.stop()


def anthropic_ids(srv, name):
    """An Anthropic history (tool_use and tool_result blocks with toolu_ ids)
    reaches a Mistral template with ids it takes: count_tokens renders the
    prompt, which the template would refuse with the client's ids."""
    body = {"model": "m", "messages": [
        USER,
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": ANTHROPIC_ID, "name": "get_weather", "input": PARIS}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": ANTHROPIC_ID, "content": "18 C"}]}],
        "tools": [{"name": "get_weather", "description": "Weather",
                   "input_schema": WEATHER["function"]["parameters"]}]}
    status, text = srv.raw("POST", "/v1/messages/count_tokens", json.dumps(body).encode(),
                           {"content-type": "application/json", "anthropic-version": "2023-06-01"})
    check(status == 200, f"{name} Anthropic toolu_ ids: {status} {text[:300]!r}")


def main():
    if len(sys.argv) < 3:
        print("usage: chat_templates_test.py MINFER_BINARY MINFER_CHAT_PROBE")
        return 2
    probe = sys.argv[2]
    sdist = sdist_path()
    if sdist is None:
        print(f"skipped: the llama-cpp-python {SDIST_VERSION} sdist cannot be had "
              f"(set MINFER_LLAMA_CPP_SDIST or run tools/install_deps.sh --tests)")
        return 77
    templates = read_templates(sdist)
    check(set(templates) == set(TEMPLATES),
          f"templates missing from the sdist: {sorted(set(TEMPLATES) - set(templates))}")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "synth.gguf")
        subprocess.run([sys.argv[1], "synth", "--model", "tiny-qwen3", "-q", "Q8_0", "-o", model,
                        "-s"], check=True, capture_output=True)
        for name, source in templates.items():
            tally = {"equal": 0, "error": 0, "fail": 0, "replies": 0}
            family = TEMPLATES[name][0]
            # The family read from the text (a template without tools is
            # answered through the Hermes system prompt: Hermes too).
            probe_out = run_probe(probe, source, "", "", {"messages": [USER]})
            check(probe_out["detected"] == family,
                  f"{name}: detected {probe_out['detected']}, not {family}")
            prompt_checks(probe, name, source, tally)
            reply_checks(probe, name, source, tally)
            server_checks(model, name, source, tmp, tally)
            print(f"{name}: {tally['equal']} prompts equal, {tally['error']} refused by both, "
                  f"{tally['fail']} failed; {tally['replies']} replies read back", flush=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
