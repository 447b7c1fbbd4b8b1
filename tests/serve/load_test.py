#!/usr/bin/env python3
"""`minfer serve` under load, on the real Gemma 3 270M (CPU), started with
`--embedding --pooling mean` (completions are served as without it):

  python3 tests/serve/load_test.py MINFER_BINARY [SECONDS]

0. Alone, one after another, each greedy request of the mix (MIX below):
   forced tool calls (a named tool_choice) on /v1/chat/completions, streamed
   and not; Anthropic /v1/messages with a forced tool_use (tool_choice
   {type: tool}), streamed and not, and a streamed text reply; a streamed
   plain chat; a list of three embeddings (base64). Their solo replies: the
   calls are the forced tool's, the streamed forms equal the whole ones.
1. 64 concurrent streaming clients (tools/serve_load.py) for SECONDS (60)
   on 8 slots with a queue of 32: every request completes or gets a clean
   503; none breaks mid-stream; /health answers 200 throughout (polled every
   0.5 s, each within 2 s); the server's RSS levels off: over the last
   SECONDS of load it grows by less than 16 MiB in the last quarter and 48
   MiB in the last half (no growth per request). The load goes on in rounds
   of SECONDS / 2 until it has run SECONDS and the RSS has levelled off, or
   until 4 x SECONDS: a slow machine warms up (graphs of new batch shapes)
   for longer, a leak never levels off.
2. For SECONDS / 4, 16 sampled streaming clients (serve_load.py) and beside
   them 6 clients cycling through the mix, some of whose streams (both
   forced-call ones, both text ones) hang up in the middle: every request
   that is not hung up equals its solo reply (text, the calls' names and
   arguments, the Anthropic blocks, the stop reason and token count, the
   vectors' bits): the engine's batch invariance through every endpoint.
   Then the metrics go idle.
3. Then 200 clients that connect at once and hang up at random points of
   their streams: every connection is answered (none fails: the listen
   backlog holds the burst), no crash, and within a few seconds the metrics are idle again (nothing
   running or waiting, no KV page held by a sequence: no leaked cells).
4. Afterwards /health answers, each request of the mix once more equals its
   solo reply, and the RSS is within 48 MiB of its level at the end of 1.
"""
import http.client
import json
import os
import random
import re
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import serve_load  # noqa: E402

from serve_testutil import Server, check, finish, gemma_path  # noqa: E402

# The mix. Bounded strings and enums, so that a forced call ends.
CITY = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 12},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}
ZONE = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}},
        "required": ["zone"]}
OPENAI_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": CITY,
                                      "description": "The current weather in a city."}},
    {"type": "function", "function": {"name": "get_time", "parameters": ZONE,
                                      "description": "The time in a time zone."}}]
ANTHROPIC_TOOLS = [
    {"name": "get_weather", "description": "The current weather in a city.", "input_schema": CITY},
    {"name": "get_time", "description": "The time in a time zone.", "input_schema": ZONE}]


def openai_chat(text, stream, **kw):
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "temperature": 0,
            "max_tokens": 64, "stream": stream, **kw}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return "/v1/chat/completions", body


def anthropic_message(text, stream, **kw):
    return "/v1/messages", {"model": "m", "messages": [{"role": "user", "content": text}],
                            "temperature": 0, "max_tokens": 64, "stream": stream, **kw}


def named(name):
    return {"tools": OPENAI_TOOLS, "tool_choice": {"type": "function", "function": {"name": name}}}


ANTHROPIC_FORCED = {"tools": ANTHROPIC_TOOLS,
                    "tool_choice": {"type": "tool", "name": "get_weather"}}
WEATHER_ASK = "What is the weather in Paris?"
MIX = {
    "openai call": openai_chat(WEATHER_ASK, False, **named("get_weather")),
    "openai call stream": openai_chat(WEATHER_ASK, True, **named("get_weather")),
    "openai call stream 2": openai_chat("What time is it in Tokyo?", True, **named("get_time")),
    "openai text stream": openai_chat("Describe the sea in one sentence.", True, max_tokens=24),
    "anthropic tool_use": anthropic_message("Is it raining in Oslo?", False, **ANTHROPIC_FORCED),
    "anthropic tool_use stream": anthropic_message("Is it raining in Oslo?", True,
                                                   **ANTHROPIC_FORCED),
    "anthropic text stream": anthropic_message("Name three rivers.", True, max_tokens=24,
                                               system="You answer briefly."),
    "embeddings": ("/v1/embeddings", {"model": "m", "encoding_format": "base64", "input": [
        "The sea is calm today.", "Rivers run to the sea.", "A cat sleeps."]}),
}
# Streams the mix also hangs up, after a random 1..N of their events: a
# forced call's stream holds the call until the reply ends, so after its
# first events the sequence is still generating.
HANGUPS = {"openai call stream": 1, "anthropic tool_use stream": 2, "openai text stream": 8,
           "anthropic text stream": 10}
# The solo replies the streamed forms must equal (the same request unstreamed).
SAME_AS = {"openai call stream": "openai call", "anthropic tool_use stream": "anthropic tool_use"}


# Every reply of the mix, normalized to what a request's solo run must repeat
# exactly (tool-call ids are random: left out).

def openai_reply(doc):
    m, choice = doc["choices"][0]["message"], doc["choices"][0]
    return {"content": m.get("content") or "", "reasoning": m.get("reasoning_content") or "",
            "calls": [[c["function"]["name"], c["function"]["arguments"]]
                      for c in m.get("tool_calls") or []],
            "finish": choice["finish_reason"], "tokens": doc["usage"]["completion_tokens"]}


def openai_stream(events):
    r = {"content": "", "reasoning": "", "calls": [], "finish": None, "tokens": None}
    for e in events:
        if e.get("usage"):
            r["tokens"] = e["usage"]["completion_tokens"]
        for c in e.get("choices", []):
            d = c.get("delta", {})
            r["content"] += d.get("content") or ""
            r["reasoning"] += d.get("reasoning_content") or ""
            for tc in d.get("tool_calls") or []:
                while len(r["calls"]) <= tc["index"]:
                    r["calls"].append(["", ""])
                f = tc.get("function") or {}
                r["calls"][tc["index"]][0] += f.get("name") or ""
                r["calls"][tc["index"]][1] += f.get("arguments") or ""
            r["finish"] = c.get("finish_reason") or r["finish"]
    return r


def anthropic_block(b):
    if b["type"] == "tool_use":
        return ["tool_use", b["name"], b["input"]]
    return [b["type"], b.get("text", b.get("thinking"))]


def anthropic_reply(doc):
    return {"blocks": [anthropic_block(b) for b in doc["content"]], "stop": doc["stop_reason"],
            "tokens": doc["usage"]["output_tokens"]}


def anthropic_stream(events):
    blocks, inputs, r = [], {}, {"stop": None, "tokens": None}
    for e in events:
        if e["type"] == "content_block_start":
            blocks.append(dict(e["content_block"]))
        elif e["type"] == "content_block_delta":
            d, b = e["delta"], blocks[e["index"]]
            if d["type"] == "text_delta":
                b["text"] += d["text"]
            elif d["type"] == "thinking_delta":
                b["thinking"] += d["thinking"]
            elif d["type"] == "input_json_delta":
                inputs[e["index"]] = inputs.get(e["index"], "") + d["partial_json"]
        elif e["type"] == "message_delta":
            r["stop"], r["tokens"] = e["delta"]["stop_reason"], e["usage"]["output_tokens"]
    for i, text in inputs.items():
        blocks[i]["input"] = json.loads(text)
    return {"blocks": [anthropic_block(b) for b in blocks], **r}


def embeddings_reply(doc):
    return {"vectors": [d["embedding"] for d in doc["data"]],
            "tokens": doc["usage"]["prompt_tokens"]}


def read_stream(resp, hangup_after):
    """The data events of an SSE reply, until OpenAI's [DONE] or Anthropic's
    message_stop; (events, what went wrong or None)."""
    events = []
    for line in resp:
        if not line.startswith(b"data: "):
            continue
        if line.strip() == b"data: [DONE]":
            return events, None
        events.append(json.loads(line[6:]))
        if events[-1].get("type") == "message_stop":
            return events, None
        if "error" in events[-1]:
            return events, f"error event {events[-1]}"
        if hangup_after is not None and len(events) >= hangup_after:
            return events, "hung up"
    return events, "ended without its last event"


def send(port, kind, hangup_after=None):
    """One request of the mix: (outcome, normalized reply), outcome "ok",
    "refused" (503), "hung up" (the client's own), or what broke."""
    path, body = MIX[kind]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            text = resp.read()
            return ("refused" if resp.status == 503 else f"{resp.status} {text[:200]!r}"), None
        anthropic = path == "/v1/messages"
        if not body.get("stream"):
            read = {"/v1/embeddings": embeddings_reply, "/v1/messages": anthropic_reply}
            return "ok", read.get(path, openai_reply)(json.loads(resp.read()))
        events, wrong = read_stream(resp, hangup_after)
        if wrong:
            return wrong, None
        return "ok", (anthropic_stream if anthropic else openai_stream)(events)
    except (OSError, ValueError, KeyError, http.client.HTTPException) as e:
        return f"{type(e).__name__}: {e}", None
    finally:
        conn.close()  # mid-stream: the hang-up


def solo_replies(srv):
    """Each request of the mix alone on the idle server: the replies the
    loaded runs must repeat."""
    solo = {}
    for kind in MIX:
        outcome, solo[kind] = send(srv.port, kind)
        check(outcome == "ok", f"{kind} alone: {outcome}")
    calls = {k: r["calls"] for k, r in solo.items() if r and k.startswith("openai call")}
    for kind, c in calls.items():
        name = MIX[kind][1]["tool_choice"]["function"]["name"]
        check(len(c) == 1 and c[0][0] == name and isinstance(json.loads(c[0][1]), dict) and
              solo[kind]["finish"] == "tool_calls", f"{kind} alone: {solo[kind]}")
    for kind in ("anthropic tool_use", "anthropic tool_use stream"):
        r = solo[kind] or {"blocks": []}
        check([b[:2] for b in r["blocks"]] == [["tool_use", "get_weather"]] and
              r.get("stop") == "tool_use", f"{kind} alone: {r}")
    for kind in ("openai text stream", "anthropic text stream"):
        r = solo[kind] or {}
        check(r.get("tokens", 0) > 0 and (r.get("content") or r.get("blocks")),
              f"{kind} alone: {r}")
    check(solo["embeddings"] and len(solo["embeddings"]["vectors"]) == 3, "three vectors")
    for kind, same in SAME_AS.items():
        check(solo[kind] == solo[same], f"{kind} {solo[kind]} != unstreamed {solo[same]}")
    return solo


def difference(got, want):
    """What a reply has other than its solo one, for a failure's message."""
    if "vectors" in want:
        wrong = [i for i, (g, w) in enumerate(zip(got["vectors"], want["vectors"])) if g != w]
        return f"vectors {wrong} differ; tokens {got['tokens']} vs {want['tokens']}"
    return f"{str(got)[:400]} != solo {str(want)[:400]}"


class MixStats:
    def __init__(self):
        self.lock = threading.Lock()
        self.equal, self.hung_up, self.refused, self.bad = {}, 0, 0, []

    def add(self, kind, outcome, reply, solo):
        with self.lock:
            if outcome == "refused":
                self.refused += 1
            elif outcome == "hung up":
                self.hung_up += 1
            elif outcome != "ok":
                self.bad.append(f"{kind}: {outcome}")
            elif reply != solo[kind]:
                self.bad.append(f"{kind} under load: {difference(reply, solo[kind])}")
            else:
                self.equal[kind] = self.equal.get(kind, 0) + 1


def mix_client(i, port, solo, deadline, stats):
    """Cycles through the mix (and its hang-ups) until the deadline, at
    least once; a 503 is retried."""
    rng = random.Random(i)
    todo = [(k, None) for k in MIX] + [(k, n) for k, n in HANGUPS.items()]
    todo = todo[2 * i % len(todo):] + todo[:2 * i % len(todo)]
    first = True
    while first or time.time() < deadline:
        for kind, most in todo:
            outcome = "refused"
            while outcome == "refused" and time.time() < deadline + 120:
                outcome, reply = send(port, kind, most and rng.randint(1, most))
                stats.add(kind, outcome, reply, solo)
                time.sleep(0.2 if outcome == "refused" else 0)
        first = False


def mix_under_load(srv, solo, seconds):
    """6 clients of the mix beside 16 sampled streaming ones, for `seconds`."""
    background = {}
    load = threading.Thread(target=lambda: background.update(serve_load.run(
        ["--url", srv.url, "-c", "16", "-d", str(seconds), "--max-tokens", "16"])))
    stats, deadline, start = MixStats(), time.time() + seconds, time.time()
    clients = [threading.Thread(target=mix_client, args=(i, srv.port, solo, deadline, stats))
               for i in range(6)]
    for t in [load] + clients:
        t.start()
    for t in clients + [load]:
        t.join()
    check(not stats.bad, f"the mix under load: {len(stats.bad)} wrong: {stats.bad[:6]}")
    check(set(stats.equal) == set(MIX), f"kinds never compared: {set(MIX) - set(stats.equal)}")
    check(stats.hung_up >= 6, f"only {stats.hung_up} mix streams hung up")
    check(background.get("broken") == 0 and background.get("done", 0) >= 16,
          f"the background load: {background}")
    print(f"mix under load ({time.time() - start:.0f} s): {sum(stats.equal.values())} replies "
          f"equal to solo {stats.equal}, {stats.hung_up} hung up mid-stream, "
          f"{stats.refused} refused (retried), {len(stats.bad)} wrong", flush=True)


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        m = re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M)
    return int(m.group(1)) / 1024


def metrics(srv):
    _, text = srv.raw("GET", "/metrics")
    return {k: float(v) for k, v in re.findall(r"^(minfer_\w+) (\S+)$", text.decode(), re.M)}


def wait_idle(srv, after):
    """Nothing running or waiting and no KV page held, within 10 s."""
    idle = {}
    for _ in range(200):
        idle = metrics(srv)
        if (idle.get("minfer_sequences_running") == 0 and
                idle.get("minfer_sequences_waiting") == 0 and
                idle.get("minfer_kv_pages_used") == 0):
            return
        time.sleep(0.05)
    check(False, f"not idle after {after}: "
                 f"{ {k: v for k, v in idle.items() if 'seq' in k or 'kv' in k} }")


class HealthWatch(threading.Thread):
    def __init__(self, url):
        super().__init__(daemon=True)
        self.url, self.bad, self.polls, self.stop = url, [], 0, threading.Event()
        self.rss = []

    def run(self):
        while not self.stop.is_set():
            t = time.time()
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status != 200:
                        self.bad.append(r.status)
            except Exception as e:  # noqa: BLE001 - any failure is a finding
                self.bad.append(repr(e))
            self.polls += 1
            self.stop.wait(max(0.0, 0.5 - (time.time() - t)))


def main():
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    srv = Server(gemma_path(), "--max-queue", "32", "--embedding", "--pooling", "mean", slots=8,
                 ctx=8 * 512)
    try:
        watch = HealthWatch(srv.url)
        watch.start()
        begun = time.time()
        solo = solo_replies(srv)
        print(f"the mix alone: {len(MIX)} requests in {time.time() - begun:.1f} s", flush=True)
        rss = []
        sampler_stop = threading.Event()

        def sample():
            while not sampler_stop.wait(seconds / 8):
                rss.append(rss_mib(srv.proc.pid))
        threading.Thread(target=sample, daemon=True).start()

        # RSS rises while the allocator warms up (graphs of new batch shapes,
        # worker threads' first requests), then levels off: a leak per
        # request would keep it climbing. Judged over the last SECONDS (the
        # last 8 samples).
        def levelled():
            last = rss[-8:]
            return len(last) == 8 and last[-1] - last[4] < 48 and last[-1] - last[6] < 16

        start, runs = time.time(), []
        while True:
            runs.append(serve_load.run(["--url", srv.url, "-c", "64", "-d", str(seconds / 2),
                                        "--max-tokens", "16"]))
            ran = time.time() - start
            if (ran >= seconds and levelled()) or ran >= 4 * seconds:
                break
        sampler_stop.set()
        level = rss_mib(srv.proc.pid)
        done = sum(r["done"] for r in runs)
        statuses = set().union(*(set(r["statuses"]) for r in runs))
        check(done > 64, f"too few requests done: {runs}")
        check(all(r["broken"] == 0 for r in runs), f"requests broke mid-stream: {runs}")
        check(statuses <= {200, 503}, f"statuses other than 200/503: {statuses}")
        check(watch.polls >= seconds and not watch.bad,
              f"/health: {watch.polls} polls, failures {watch.bad[:5]}")
        check(levelled(), f"RSS still climbing at the end: {[round(x) for x in rss]} MiB")
        print(f"RSS over the run ({time.time() - start:.0f} s, {len(runs)} rounds, {done} done): "
              f"{[round(x) for x in rss]} MiB", flush=True)

        mix_under_load(srv, solo, seconds / 4)
        wait_idle(srv, "the mix")

        h = serve_load.run(["--url", srv.url, "-c", "200", "-d", "1", "--max-tokens", "64",
                            "--hangup", "1.0", "--once"])
        check(srv.proc.poll() is None, "the server died under hang-ups")
        check(h["broken"] == 0, f"connections broke in the hang-up run: {h}")
        wait_idle(srv, "the hang-ups")
        watch.stop.set()
        check(not watch.bad, f"/health after the load: failures {watch.bad[:5]}")
        status, _ = srv.raw("GET", "/health")
        check(status == 200, "the server answers after the hang-ups")
        for kind in MIX:
            outcome, reply = send(srv.port, kind)
            check(outcome == "ok" and reply == solo[kind], f"{kind} afterwards: {outcome} "
                  f"{reply and difference(reply, solo[kind])}")
        after = rss_mib(srv.proc.pid)
        check(after - level < 48, f"RSS {after:.0f} MiB after the mix and the hang-ups, "
                                  f"{level:.0f} at the end of the load")
        print(f"RSS {level:.0f} MiB at the end of the load, {after:.0f} MiB at the end; "
              f"{time.time() - begun:.0f} s in all", flush=True)
    finally:
        srv.stop()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
