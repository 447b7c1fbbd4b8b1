#!/usr/bin/env python3
"""schemathesis (PyPI) against the OpenAPI description the server publishes
at /openapi.json, on the real Gemma 3 270M: for a bounded time it sends
generated bodies, valid and broken, to every endpoint; no reply may be a 5xx
(not_a_server_error).

  python3 tests/serve/schemathesis_test.py MINFER_BINARY [SECONDS]
"""
import json
import shutil
import subprocess
import sys
import tempfile

from serve_testutil import Server, check, finish, gemma_path


def main():
    seconds = sys.argv[2] if len(sys.argv) > 2 else "45"
    # Short replies (-n 8 by default, at most 128 tokens a sequence) keep each
    # case quick: a generated body may still ask for n = 16 choices of the
    # whole context with log-probabilities (34 s at 256 tokens a sequence on
    # two quiet cores, past a 60 s timeout beside the other CI tests).
    srv = Server(gemma_path(), "-n", "8", slots=2, ctx=256)
    try:
        status, body = srv.raw("GET", "/openapi.json")
        check(status == 200 and json.loads(body)["openapi"].startswith("3."),
              f"/openapi.json {status} {body[:100]!r}")
        exe = shutil.which("schemathesis") or shutil.which("st")
        cmd = [exe] if exe else [sys.executable, "-m", "schemathesis.cli"]
        run = subprocess.run(cmd + ["run", srv.url + "/openapi.json", "--checks",
                                    "not_a_server_error", "--max-time", seconds, "-w", "1",
                                    "--request-timeout", "180"],
                             capture_output=True, text=True, timeout=int(seconds) + 600,
                             cwd=tempfile.gettempdir())  # its cache dir stays out of the tree
        out = run.stdout + run.stderr
        summary = [l for l in out.splitlines() if "generated" in l or "issues" in l.lower()]
        print("\n".join(summary))
        check(run.returncode == 0, f"schemathesis exited {run.returncode}:\n{out[-3000:]}")
        status, _ = srv.raw("GET", "/health")
        check(status == 200, f"/health after the fuzzing: {status}")
    finally:
        srv.stop()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
