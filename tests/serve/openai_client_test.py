#!/usr/bin/env python3
"""`minfer serve` driven by the official openai SDK (and by raw HTTP for what
a well-behaved SDK never sends), on the real Gemma 3 270M Q4_K_M.

  python3 tests/serve/openai_client_test.py MINFER_BINARY

Checks: sixteen concurrent greedy requests on four slots each equal to its
solo answer, a client hanging up
mid-stream (its sequence cancelled, the server unaffected), /health,
/metrics (valid Prometheus text; the llama-server series: counters grow,
gauges idle), /v1/models, chat and text completions with and without
streaming (the streamed text equals the whole one; usage in the last chunk),
stop strings (cut before the match, finish_reason "stop"), four concurrent
greedy requests each equal to its solo answer (batch invariance through the
server; sixteen also on a server decoding three slots a step), /tokenize and /detokenize, the API key, and client errors: malformed
JSON, invalid UTF-8, a wrong field type, an empty message list, a prompt past
the context (400 with its token count), an unknown endpoint (404); every error
an OpenAI error object.
"""
import concurrent.futures
import json
import os
import re
import socket
import sys
import time

import openai

from serve_testutil import Server, chat, check, error_object, finish, gemma_path

METRIC_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABELS = r'\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\}'
SAMPLE = re.compile(rf"^({METRIC_NAME})({LABELS})? (\S+)$")
LLAMA_SERIES = {  # llama-server's names and types (docs/SERVER.md, "Metrics for a router")
    "llamacpp:prompt_tokens_total": "counter",
    "llamacpp:prompt_tokens_cached_total": "counter",
    "llamacpp:tokens_predicted_total": "counter",
    "llamacpp:n_decode_total": "counter",
    "llamacpp:requests_processing": "gauge",
    "llamacpp:requests_deferred": "gauge",
    "llamacpp:kv_cache_usage_ratio": "gauge",
}


def parse_prometheus(text):
    """A strict reader of Prometheus text format 0.0.4: every line a HELP, a
    TYPE or a sample; every family's HELP and TYPE once, before its samples;
    no sample twice; histograms cumulative with +Inf equal to _count.
    Returns ({family: type}, {(name, labels): value})."""
    helps, types, samples, sampled = {}, {}, {}, set()
    for n, line in enumerate(text.split("\n")[:-1], 1):
        where = f"/metrics line {n} {line!r}"
        if not line:
            continue  # the format ignores empty lines
        m = re.match(rf"^# (HELP|TYPE) ({METRIC_NAME}) (.+)$", line)
        if m:
            kind, name, rest = m.groups()
            seen = helps if kind == "HELP" else types
            check(name not in seen, f"{where}: a second {kind}")
            check(name not in sampled, f"{where}: after its samples")
            if kind == "TYPE":
                check(rest in ("counter", "gauge", "histogram", "summary", "untyped"), where)
            seen[name] = rest
            continue
        m = SAMPLE.match(line)
        check(m is not None, f"{where}: not a sample")
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        try:
            v = float(value)
        except ValueError:
            check(False, f"{where}: value")
            continue
        family = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and types.get(name[:-len(suffix)]) == "histogram":
                family = name[:-len(suffix)]
        check(family in helps and family in types, f"{where}: no HELP or TYPE for {family}")
        check((name, labels) not in samples, f"{where}: twice")
        check(types.get(family) != "counter" or v >= 0, f"{where}: a negative counter")
        samples[(name, labels)] = v
        sampled.add(family)
    check(text.endswith("\n"), "/metrics ends with a newline")
    for family, kind in types.items():
        if kind != "histogram":
            check((family, "") in samples, f"{family}: TYPE without a sample")
            continue
        buckets = [v for (name, _), v in samples.items() if name == family + "_bucket"]
        check(buckets == sorted(buckets) and buckets and
              buckets[-1] == samples.get((family + "_count", "")), f"{family} buckets {buckets}")
    return types, {name: v for (name, labels), v in samples.items() if not labels}


def llama_series_checks(before, after):
    """The llama-server series on /metrics, before any completion and after
    many, the server idle both times."""
    for text in (before, after):
        types, values = parse_prometheus(text)
        for name, kind in LLAMA_SERIES.items():
            check(types.get(name) == kind, f"{name}: TYPE {types.get(name)}, want {kind}")
        check(values.get("llamacpp:requests_processing") == 0, "nothing processing when idle")
        check(values.get("llamacpp:requests_deferred") == 0, "nothing deferred when idle")
        ratio = values.get("llamacpp:kv_cache_usage_ratio", -1)
        check(0 <= ratio <= 1, f"kv_cache_usage_ratio {ratio} outside [0, 1]")
        check(ratio == 0, f"kv_cache_usage_ratio {ratio} when idle: no page held")
    _, v0 = parse_prometheus(before)
    _, v1 = parse_prometheus(after)
    for name in ("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total",
                 "llamacpp:n_decode_total"):
        check(v1.get(name, 0) > v0.get(name, 0), f"{name} grew: {v0.get(name)} -> {v1.get(name)}")
    check(v1.get("llamacpp:prompt_tokens_cached_total", -1) >= v0.get(
        "llamacpp:prompt_tokens_cached_total", 0), "cached prompt tokens do not go down")
    # The engine generated at least the tokens the finished completions report.
    check(v1["llamacpp:tokens_predicted_total"] >= v1["minfer_completion_tokens_total"],
          f"tokens_predicted {v1['llamacpp:tokens_predicted_total']} < completion tokens "
          f"{v1['minfer_completion_tokens_total']}")

def main():
    model = gemma_path()
    srv = Server(model)
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none")
    try:
        _, idle_metrics = srv.raw("GET", "/metrics")
        ids = [m.id for m in client.models.list().data]
        check(ids == ["gemma-test"], f"models: {ids}")

        r = chat(client, "Name a colour.", max_tokens=12)
        text = r.choices[0].message.content
        check(isinstance(text, str) and text.strip(), f"chat text {text!r}")
        check(r.choices[0].finish_reason in ("stop", "length"), r.choices[0].finish_reason)
        check(0 < r.usage.completion_tokens <= 12 and r.usage.prompt_tokens > 3, f"{r.usage}")
        check(r.object == "chat.completion" and r.model == "gemma-test", f"{r.object} {r.model}")

        chunks = list(chat(client, "Name a colour.", max_tokens=12, stream=True,
                           stream_options={"include_usage": True}))
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        check(streamed == text, f"streamed {streamed!r} != {text!r}")
        check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens ==
              r.usage.completion_tokens, f"usage chunk {chunks[-1]}")
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
        check(finishes[-1] == r.choices[0].finish_reason, f"finish {finishes}")

        c = client.completions.create(model="gemma-test", prompt="The capital of France is",
                                      max_tokens=10, temperature=0)
        ctext = c.choices[0].text
        check(ctext and c.object == "text_completion", f"completion {c}")
        s = "".join(x.choices[0].text for x in client.completions.create(
            model="gemma-test", prompt="The capital of France is", max_tokens=10,
            temperature=0, stream=True) if x.choices)
        check(s == ctext, f"streamed completion {s!r} != {ctext!r}")

        # A stop string from the middle of that text: the answer ends before it.
        words = [w for w in ctext.split() if len(w) >= 3]
        if words:
            stop = words[min(1, len(words) - 1)][:3]
            cut = ctext[:ctext.index(stop)]
            for stream in (False, True):
                if stream:
                    got = "".join(x.choices[0].text for x in client.completions.create(
                        model="gemma-test", prompt="The capital of France is", max_tokens=10,
                        temperature=0, stop=[stop], stream=True) if x.choices)
                else:
                    resp = client.completions.create(
                        model="gemma-test", prompt="The capital of France is", max_tokens=10,
                        temperature=0, stop=[stop])
                    got = resp.choices[0].text
                    check(resp.choices[0].finish_reason == "stop", "stop finish_reason")
                check(got == cut, f"stop {stop!r} (stream {stream}): {got!r} != {cut!r}")

        # Concurrent greedy requests: each equals its solo answer.
        prompts = ["Count to five.", "Name a fruit.", "Say hello in French.", "What is 2+2?"]
        solo = [chat(client, p, max_tokens=10).choices[0].message.content for p in prompts]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            together = list(pool.map(
                lambda p: chat(client, p, max_tokens=10).choices[0].message.content, prompts))
        check(together == solo, f"concurrent {together} != solo {solo}")

        # Batch invariance under load: sixteen different greedy prompts at
        # once on four slots (twelve wait their turn, each joins a batch of
        # others mid-way); every answer equals its solo answer.
        many = [f"Give me word number {i}." for i in range(16)]
        alone = [chat(client, p, max_tokens=6).choices[0].message.content for p in many]
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            crowd = list(pool.map(
                lambda p: chat(client, p, max_tokens=6).choices[0].message.content, many))
        check(all(isinstance(t, str) for t in crowd), "every crowded request answered")
        diff = [i for i in range(16) if crowd[i] != alone[i]]
        check(not diff, f"crowded answers differ from solo ones at {diff}: "
              f"{[(crowd[i], alone[i]) for i in diff]}")

        # The same crowd on a server that decodes three of its eight slots a
        # step (--decode-per-step: they take turns, new prompts first).
        turns = Server(model, "--decode-per-step", "3", slots=8)
        try:
            tclient = openai.OpenAI(base_url=turns.url + "/v1", api_key="none")
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                taking_turns = list(pool.map(
                    lambda p: chat(tclient, p, max_tokens=6).choices[0].message.content, many))
        finally:
            turns.stop()
        diff = [i for i in range(16) if taking_turns[i] != alone[i]]
        check(not diff, f"answers taking turns differ from solo ones at {diff}: "
              f"{[(taking_turns[i], alone[i]) for i in diff]}")

        # A client that hangs up mid-stream: its sequence is cancelled (nothing
        # left running) and the server goes on.
        sock = socket.create_connection(("127.0.0.1", srv.port))
        body = json.dumps({"messages": [{"role": "user", "content": "Tell a long story."}],
                           "max_tokens": 2000, "stream": True}).encode()
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: " +
                     str(len(body)).encode() + b"\r\n\r\n" + body)
        got = sock.recv(4096)
        check(b"200" in got.split(b"\r\n")[0], f"stream start {got[:80]!r}")
        sock.close()
        running = -1
        for _ in range(200):
            _, mbody = srv.raw("GET", "/metrics")
            m = re.search(rb"^minfer_sequences_running (\d+)$", mbody, re.M)
            running = int(m.group(1)) if m else -1
            if running == 0:
                break
            time.sleep(0.05)
        check(running == 0, f"a hung-up stream still running ({running})")
        check(chat(client, "Name a colour.", max_tokens=12).choices[0].message.content == text,
              "the server answers as before after the hang-up")

        # The metrics saw every completion above: 13 requests, their tokens.
        status, body = srv.raw("GET", "/metrics")
        text = body.decode()
        values = dict(re.findall(r"^(minfer_\w+) (\S+)$", text, re.M))
        check(status == 200, f"/metrics {status}")
        check(int(values.get("minfer_requests_total", 0)) >= 40, f"requests: {values}")
        check(int(values.get("minfer_completion_tokens_total", 0)) > 0, "completion tokens")
        check("minfer_time_to_first_token_seconds_bucket{le=\"+Inf\"}" in text, "ttft histogram")
        check(int(values.get("minfer_kv_pages", 0)) > 0, "KV pages")
        check(int(values.get("minfer_sequences_running", -1)) == 0, "nothing running now")
        llama_series_checks(idle_metrics.decode(), text)

        status, body = srv.raw("POST", "/tokenize", json.dumps({"content": "Hello world"}).encode())
        tokens = json.loads(body)["tokens"] if status == 200 else []
        check(status == 200 and tokens, f"tokenize {status} {body[:100]!r}")
        status, body = srv.raw("POST", "/detokenize", json.dumps({"tokens": tokens}).encode())
        check(status == 200 and json.loads(body)["content"] == "Hello world",
              f"detokenize {status} {body[:100]!r}")

        error_object(*srv.raw("POST", "/v1/chat/completions", b"{not json"), 400, "JSON")
        error_object(*srv.raw("POST", "/v1/chat/completions",
                              b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}'),
                     400, "UTF-8")
        error_object(*srv.raw("POST", "/v1/chat/completions", json.dumps(
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": "x"}).encode()),
            400, "max_tokens")
        error_object(*srv.raw("POST", "/v1/completions", json.dumps(
            {"prompt": "word " * 1500}).encode()), 400, "context")
        error_object(*srv.raw("GET", "/v1/nothing"), 404, "nothing")
        try:
            client.chat.completions.create(model="gemma-test", messages=[])
            check(False, "an empty message list was accepted")
        except openai.BadRequestError as e:
            check("messages" in str(e), f"empty messages error: {e}")
    finally:
        srv.stop()

    with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tmpl_{os.getpid()}.jinja"),
              "w", encoding="utf-8") as f:
        f.write("Q: {{ messages[-1].content }}\nA:")
        template = f.name
    keyed = Server(model, "--api-key", "sekret", "--chat-template-file", template)
    try:
        status, body = keyed.raw("GET", "/v1/models")
        check(status == 401, f"no key: {status}")
        ok = openai.OpenAI(base_url=keyed.url + "/v1", api_key="sekret").models.list()
        check(ok.data[0].id == "gemma-test", "with the key")
        status, _ = keyed.raw("GET", "/health")
        check(status == 200, "/health needs no key")
        # The prompt is what --chat-template-file made of the conversation.
        kc = openai.OpenAI(base_url=keyed.url + "/v1", api_key="sekret")
        r = chat(kc, "Hi there", max_tokens=2)
        status, body = keyed.raw("POST", "/tokenize", json.dumps(
            {"content": "Q: Hi there\nA:", "add_special": True}).encode(),
            {"Content-Type": "application/json", "Authorization": "Bearer sekret"})
        want = len(json.loads(body)["tokens"]) if status == 200 else -1
        check(r.usage.prompt_tokens == want, f"templated prompt {r.usage.prompt_tokens} != {want}")
    finally:
        keyed.stop()
        os.unlink(template)

    return finish()


if __name__ == "__main__":
    sys.exit(main())
