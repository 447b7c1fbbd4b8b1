#!/usr/bin/env python3
"""`minfer serve` under load, on the real Gemma 3 270M (CPU):

  python3 tests/serve/load_test.py MINFER_BINARY [SECONDS]

1. 64 concurrent streaming clients (tools/serve_load.py) for SECONDS (60)
   on 8 slots with a queue of 32: every request completes or gets a clean
   503; none breaks mid-stream; /health answers 200 throughout (polled every
   0.5 s, each within 2 s); the server's RSS levels off: over the last
   SECONDS of load it grows by less than 16 MiB in the last quarter and 48
   MiB in the last half (no growth per request). The load goes on in rounds
   of SECONDS / 2 until it has run SECONDS and the RSS has levelled off, or
   until 4 x SECONDS: a slow machine warms up (graphs of new batch shapes)
   for longer, a leak never levels off.
2. Then 200 clients that connect at once and hang up at random points of
   their streams: every connection is answered (none fails: the listen
   backlog holds the burst), no crash, and within a few seconds the metrics are idle again (nothing
   running or waiting, no KV page held by a sequence: no leaked cells).
"""
import os
import re
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import serve_load  # noqa: E402

from serve_testutil import Server, check, finish, gemma_path  # noqa: E402


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        m = re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M)
    return int(m.group(1)) / 1024


def metrics(srv):
    _, text = srv.raw("GET", "/metrics")
    return {k: float(v) for k, v in re.findall(r"^(minfer_\w+) (\S+)$", text.decode(), re.M)}


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
    srv = Server(gemma_path(), "--max-queue", "32", slots=8, ctx=8 * 512)
    try:
        watch = HealthWatch(srv.url)
        watch.start()
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
        done = sum(r["done"] for r in runs)
        statuses = set().union(*(set(r["statuses"]) for r in runs))
        check(done > 64, f"too few requests done: {runs}")
        check(all(r["broken"] == 0 for r in runs), f"requests broke mid-stream: {runs}")
        check(statuses <= {200, 503}, f"statuses other than 200/503: {statuses}")
        check(watch.polls >= seconds and not watch.bad,
              f"/health: {watch.polls} polls, failures {watch.bad[:5]}")
        check(levelled(), f"RSS still climbing at the end: {[round(x) for x in rss]} MiB")
        print(f"RSS over the run ({time.time() - start:.0f} s, {len(runs)} rounds, {done} done): "
              f"{[round(x) for x in rss]} MiB")

        h = serve_load.run(["--url", srv.url, "-c", "200", "-d", "1", "--max-tokens", "64",
                            "--hangup", "1.0", "--once"])
        check(srv.proc.poll() is None, "the server died under hang-ups")
        check(h["broken"] == 0, f"connections broke in the hang-up run: {h}")
        idle = {}
        for _ in range(200):
            idle = metrics(srv)
            if (idle.get("minfer_sequences_running") == 0 and
                    idle.get("minfer_sequences_waiting") == 0 and
                    idle.get("minfer_kv_pages_used") == 0):
                break
            time.sleep(0.05)
        check(idle.get("minfer_sequences_running") == 0 and
              idle.get("minfer_sequences_waiting") == 0 and idle.get("minfer_kv_pages_used") == 0,
              f"not idle after the hang-ups: { {k: v for k, v in idle.items() if 'seq' in k or 'kv' in k} }")
        watch.stop.set()
        status, _ = srv.raw("GET", "/health")
        check(status == 200, "the server answers after the hang-ups")
    finally:
        srv.stop()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
