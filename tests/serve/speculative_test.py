#!/usr/bin/env python3
"""`minfer serve --spec ngram`: speculative decoding behind llama-server's API,
on the real Gemma 3 270M Q4_K_M (docs/ENGINE.md "Speculative decoding").

  python3 tests/serve/speculative_test.py MINFER_BINARY

Checks: a greedy /completion of a prompt that repeats a list gives the same
content with drafts as with speculative.n_max 0 (no drafts, the same
kernels), alone and as four concurrent requests (sequences drafting beside
others); timings carry draft_n and draft_n_accepted (accepted <= drafted,
some accepted); a seeded sampled completion is the same too; /metrics
counts the drafts; bad speculative.* values are refused with 400 naming them.
"""
import json
import re
import threading

from serve_testutil import BIN, Server, check, finish, gemma_path

PROMPT = ("Repeat this list three times: apple, banana, cherry, date, elderberry, fig, grape.\n"
          "apple, banana, cherry, date, elderberry, fig, grape.\n")


def post(srv, body):
    status, raw = srv.raw("POST", "/completion", json.dumps(body).encode())
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw


def complete(srv, **extra):
    body = {"prompt": PROMPT, "n_predict": 48, "temperature": 0, **extra}
    status, out = post(srv, body)
    check(status == 200, f"/completion {extra}: {status} {out}")
    return out if status == 200 else {"content": None, "timings": {}}


def main():
    srv = Server(gemma_path(), "--spec", "ngram", "--draft-max", "8", slots=4, ctx=4096)
    try:
        ref = complete(srv, **{"speculative.n_max": 0})
        got = complete(srv)
        check(got["content"] == ref["content"] and ref["content"],
              f"drafts changed the text: {got['content']!r} vs {ref['content']!r}")
        t = got["timings"]
        check(0 < t.get("draft_n_accepted", -1) <= t.get("draft_n", -1), f"timings {t}")
        check(ref["timings"].get("draft_n") == 0, f"no drafts asked: {ref['timings']}")

        # Four at once: sequences drafting in one engine beside each other.
        results = [None] * 4
        def one(i):
            results[i] = complete(srv, **({"speculative.n_max": 0} if i == 3 else {}))
        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        for i, r in enumerate(results):
            check(r["content"] == ref["content"], f"concurrent request {i}: {r['content']!r}")

        sampled = dict(temperature=0.8, seed=5)
        a = complete(srv, **sampled, **{"speculative.n_max": 0})
        b = complete(srv, **sampled, **{"speculative.n_max": 6, "speculative.n_min": 1})
        check(a["content"] == b["content"], f"seeded sampling differs: {a['content']!r} vs {b['content']!r}")

        status, raw = srv.raw("GET", "/metrics")
        text = raw.decode()
        drafted = re.search(r"^minfer_draft_tokens_total (\d+)", text, re.M)
        accepted = re.search(r"^minfer_draft_tokens_accepted_total (\d+)", text, re.M)
        check(status == 200 and drafted and accepted, f"/metrics: {text[-500:]}")
        if drafted and accepted:
            check(0 < int(accepted.group(1)) <= int(drafted.group(1)), "metrics counts")

        for field, value in [("speculative.n_max", -1), ("speculative.n_min", "x"),
                             ("speculative.p_min", 2)]:
            status, err = post(srv, {"prompt": "hi", "n_predict": 2, field: value})
            check(status == 400 and field in json.dumps(err), f"{field}={value}: {status} {err}")
    finally:
        srv.stop()
    return finish()


if __name__ == "__main__":
    raise SystemExit(main())
