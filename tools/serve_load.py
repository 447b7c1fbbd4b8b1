#!/usr/bin/env python3
"""A load generator for `minfer serve` (or any OpenAI-compatible server),
standard library only: C concurrent streaming clients, each sending chat (or
text) completions back to back for D seconds; prints aggregate generated
tokens/s and time-to-first-token percentiles, as text and one JSON line.

  python3 tools/serve_load.py --url http://127.0.0.1:8080 -c 64 -d 60 --max-tokens 64
  python3 tools/serve_load.py ... --hangup 0.5   # each client hangs up at a random point
                                                  # in half of its requests
  python3 tools/serve_load.py ... --probe 6       # and, beside the load, a short greedy
                                                  # request ("Hi", 4 tokens) every 0.5 s:
                                                  # its time to first token under load
                                                  # (-c 0: unloaded)

Tokens are counted from the server's usage chunk (stream_options.include_usage)
when it sends one, else as content chunks. A request that gets a non-200
status (a 503 when the queue is full) counts as refused; one that breaks
mid-stream without [DONE], or whose connection fails, as broken, with the
reason in why_broken (with --hangup, the client's own hang-ups are counted
apart).
"""
import argparse
import asyncio
import json
import random
import statistics
import time
import urllib.parse

PROMPTS = ["Tell me about the sea.", "Name three colours.", "Count from one to twenty.",
           "Write a short poem about trees.", "What is the capital of France?",
           "Explain rain to a child.", "List some fruits.", "Describe a cat."]


class Stats:
    def __init__(self):
        self.done = self.refused = self.broken = self.hungup = 0
        self.tokens = 0
        self.ttft = []
        self.statuses = {}
        self.why_broken = {}  # "ended without [DONE]" or the exception's name: count

    def broke(self, why):
        self.broken += 1
        self.why_broken[why] = self.why_broken.get(why, 0) + 1


async def one_request(host, port, path, body, hangup_after, stats, key):
    data = json.dumps(body).encode()
    reader, writer = await asyncio.open_connection(host, port)
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    writer.write((f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                  f"{auth}Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode() + data)
    await writer.drain()
    start = time.perf_counter()
    try:
        status_line = await reader.readline()
        status = int(status_line.split()[1]) if len(status_line.split()) > 1 else 0
        stats.statuses[status] = stats.statuses.get(status, 0) + 1
        retry_after = 0.0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "retry-after":
                retry_after = float(value.strip() or 0)
        if status != 200:
            stats.refused += 1
            await asyncio.sleep(retry_after or 0.5)  # as a polite client does
            return
        chunks, usage, first, finished = 0, None, None, False
        buf = b""
        while not finished:
            data = await reader.read(65536)
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                line = line.strip()
                if not line.startswith(b"data: "):
                    continue
                payload = line[6:]
                if payload == b"[DONE]":
                    finished = True
                    break
                msg = json.loads(payload)
                if msg.get("usage"):
                    usage = msg["usage"]["completion_tokens"]
                for c in msg.get("choices", []):
                    text = c.get("delta", {}).get("content") if "delta" in c else c.get("text")
                    if text:
                        chunks += 1
                        if first is None:
                            first = time.perf_counter() - start
                if hangup_after is not None and chunks >= hangup_after:
                    stats.hungup += 1
                    return
        if first is not None:
            stats.ttft.append(first)
        if finished:
            stats.done += 1
            stats.tokens += usage if usage is not None else chunks
        else:
            stats.broke("ended without [DONE]")
    finally:
        writer.close()


async def client(i, args, host, port, deadline, stats):
    rng = random.Random(i)
    path = "/v1/chat/completions" if not args.text else "/v1/completions"
    while time.perf_counter() < deadline:
        prompt = PROMPTS[rng.randrange(len(PROMPTS))] + f" (client {i})"
        body = {"max_tokens": args.max_tokens, "temperature": args.temperature, "stream": True,
                "stream_options": {"include_usage": True}, "seed": rng.randrange(1 << 30)}
        if args.text:
            body["prompt"] = prompt
        else:
            body["messages"] = [{"role": "user", "content": prompt}]
        hangup = None
        if args.hangup and rng.random() < args.hangup:
            hangup = rng.randrange(1, max(2, args.max_tokens))
        try:
            await one_request(host, port, path, body, hangup, stats, args.api_key)
        except (ConnectionError, OSError, ValueError) as e:
            stats.broke(type(e).__name__)
            await asyncio.sleep(0.05)
        if args.once:
            return


async def prober(args, host, port, stats):
    """Short greedy requests one after another, 0.5 s apart, starting once the
    load has had 2 s to fill the slots; their first-token times go to stats."""
    await asyncio.sleep(2.0 if args.clients else 0.0)
    body = {"max_tokens": 4, "temperature": 0, "stream": True,
            "messages": [{"role": "user", "content": "Hi"}]}
    for _ in range(args.probe):
        await one_request(host, port, "/v1/chat/completions", body, None, stats, args.api_key)
        await asyncio.sleep(0.5)


async def main_async(args):
    u = urllib.parse.urlparse(args.url)
    host, port = u.hostname, u.port or 80
    stats = Stats()
    probes = Stats()
    start = time.perf_counter()
    deadline = start + args.duration
    tasks = [client(i, args, host, port, deadline, stats) for i in range(args.clients)]
    if args.probe:
        tasks.append(prober(args, host, port, probes))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    ttft = sorted(stats.ttft)
    pct = (lambda q: ttft[min(len(ttft) - 1, int(q * len(ttft)))] if ttft else float("nan"))
    result = {"clients": args.clients, "seconds": round(elapsed, 2), "done": stats.done,
              "refused": stats.refused, "broken": stats.broken, "hung_up": stats.hungup,
              "tokens": stats.tokens, "tokens_per_s": round(stats.tokens / elapsed, 1),
              "ttft_p50_s": round(statistics.median(ttft), 3) if ttft else None,
              "ttft_p90_s": round(pct(0.9), 3) if ttft else None, "statuses": stats.statuses,
              "why_broken": stats.why_broken}
    print(f"{args.clients} clients, {elapsed:.1f} s: {stats.done} done, {stats.refused} refused, "
          f"{stats.broken} broken, {stats.hungup} hung up; {stats.tokens} tokens = "
          f"{result['tokens_per_s']} t/s; TTFT p50 {result['ttft_p50_s']} s, "
          f"p90 {result['ttft_p90_s']} s")
    if args.probe:
        result["probe_ttft_s"] = [round(t, 4) for t in probes.ttft]
        result["probe_ttft_p50_s"] = (round(statistics.median(probes.ttft), 4)
                                      if probes.ttft else None)
        print(f"probe: {len(probes.ttft)} of {args.probe} answered, first token "
              f"{result['probe_ttft_s']} s, median {result['probe_ttft_p50_s']} s")
    print(json.dumps(result))
    return result


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("-c", "--clients", type=int, default=8)
    p.add_argument("-d", "--duration", type=float, default=30)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--text", action="store_true", help="/v1/completions instead of chat")
    p.add_argument("--hangup", type=float, default=0.0,
                   help="fraction of requests whose client hangs up at a random token")
    p.add_argument("--once", action="store_true", help="one request per client")
    p.add_argument("--api-key", default="")
    p.add_argument("--probe", type=int, default=0,
                   help="send N short greedy requests beside the load and report their TTFT")
    return p.parse_args(argv)


def run(argv=None):
    return asyncio.run(main_async(parse_args(argv)))


if __name__ == "__main__":
    run()
