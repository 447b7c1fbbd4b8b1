#!/usr/bin/env python3
"""`minfer serve` as a drop-in for llama-server's native API and flags, on the
real Gemma 3 270M Q4_K_M (serve/llama_api.h, docs/SERVER.md).

  python3 tests/serve/llama_api_test.py MINFER_BINARY

Checks: POST /completion whole and streamed (the streamed contents
concatenate to the whole greedy text; the last event has stop: true,
stop_type and timings; no [DONE]), token-id and mixed prompts, stop words
(stop_type "word", stopping_word), n_probs (completion_probabilities with
ids, bytes and top_logprobs), timings present and consistent, ignore_eos
(generation runs to n_predict), /tokenize with_pieces round-tripping through
/detokenize, /apply-template equal to what a chat completion tokenizes,
GET /props, GET /slots (501), a prompt past the context
(exceed_context_size_error with n_prompt_tokens and n_ctx) on /completion,
/v1/completions and /v1/chat/completions, a GBNF grammar on the three doors
(greedy and sampled text that an independent regular expression accepts; a
bad grammar a 400 naming line and column; with json_schema a 400), a top-level
json_schema producing JSON that validates (jsonschema), timings and
system_fingerprint in a chat reply, and llama-server's flags: accepted
(--cors-origins, -ngl, -cb, --no-mmap ...) and refused (--lora, --mmproj,
-md, --rerank, --grammar ...) with a message naming them.
"""
import json
import re
import subprocess
import sys

import jsonschema

from serve_testutil import BIN, Server, check, finish, gemma_path

PROMPT = "The capital of France is"


def post(srv, path, body):
    status, raw = srv.raw("POST", path, json.dumps(body).encode())
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw


def sse_events(raw):
    """The data: payloads of an SSE body, in order."""
    return [line[len("data: "):] for line in raw.decode().split("\n") if line.startswith("data: ")]


def check_timings(t, what):
    keys = ["prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second",
            "predicted_n", "predicted_ms", "predicted_per_token_ms", "predicted_per_second"]
    check(all(k in t for k in keys), f"{what}: timings {t}")
    if not all(k in t for k in keys):
        return
    check(t["prompt_ms"] > 0 and t["predicted_ms"] >= 0, f"{what}: times {t}")
    if t["predicted_n"] > 0 and t["predicted_ms"] > 0:
        check(abs(t["predicted_per_token_ms"] * t["predicted_n"] - t["predicted_ms"]) < 1e-6
              * max(1, t["predicted_ms"]) + 1e-9, f"{what}: per token {t}")
        check(abs(t["predicted_per_second"] - 1e3 * t["predicted_n"] / t["predicted_ms"]) < 1e-6
              * t["predicted_per_second"] + 1e-9, f"{what}: per second {t}")


def completion_checks(srv):
    status, whole = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 16,
                                              "temperature": 0, "cache_prompt": True})
    check(status == 200, f"/completion {status} {whole}")
    if status != 200:
        return
    check(isinstance(whole["content"], str) and whole["content"], f"content {whole}")
    check(whole["stop"] is True and whole["model"] == "gemma-test", f"stop/model {whole}")
    check(whole["stop_type"] in ("eos", "limit") and whole["stopping_word"] == "",
          f"stop_type {whole['stop_type']!r}")
    check(whole["tokens_predicted"] == 16 or whole["stop_type"] == "eos",
          f"tokens_predicted {whole['tokens_predicted']}")
    check(whole["tokens_evaluated"] > 3, f"tokens_evaluated {whole['tokens_evaluated']}")
    check(whole["prompt"] == PROMPT and whole["truncated"] is False, f"prompt {whole['prompt']!r}")
    check("generation_settings" in whole and whole["generation_settings"]["n_ctx"] > 0,
          f"generation_settings {whole.get('generation_settings')}")
    check_timings(whole["timings"], "/completion")
    t = whole["timings"]
    check(t["predicted_n"] == whole["tokens_predicted"] and
          t["prompt_n"] == whole["tokens_evaluated"], f"timings counts {t}")

    status, raw = srv.raw("POST", "/completion", json.dumps(
        {"prompt": PROMPT, "n_predict": 16, "temperature": 0, "stream": True}).encode())
    check(status == 200 and srv.headers.get("content-type", "").startswith("text/event-stream"),
          f"stream {status} {srv.headers}")
    events = sse_events(raw)
    check(events and "[DONE]" not in events, f"no [DONE] on /completion: {events[-2:]}")
    objs = [json.loads(e) for e in events if e != "[DONE]"]
    streamed = "".join(o["content"] for o in objs)
    check(streamed == whole["content"], f"streamed {streamed!r} != {whole['content']!r}")
    check(all(o["stop"] is False for o in objs[:-1]) and objs[-1]["stop"] is True,
          f"stop flags {[o['stop'] for o in objs]}")
    last = objs[-1]
    check(last["stop_type"] == whole["stop_type"] and
          last["tokens_predicted"] == whole["tokens_predicted"] and "timings" in last,
          f"last event {last}")

    # Token ids, and ids mixed with text, give the same greedy answer.
    _, tok = post(srv, "/tokenize", {"content": PROMPT, "add_special": True})
    status, by_ids = post(srv, "/completion", {"prompt": tok["tokens"], "n_predict": 16,
                                               "temperature": 0})
    check(status == 200 and by_ids["content"] == whole["content"], f"token prompt {by_ids}")
    ids = tok["tokens"]
    status, mixed = post(srv, "/completion", {"prompt": [ids[0], "The capital of France is"],
                                              "n_predict": 16, "temperature": 0})
    check(status == 200 and mixed["content"] == whole["content"] and
          mixed["tokens_evaluated"] == len(ids), f"mixed prompt {mixed}")


def stop_probs_eos_checks(srv):
    status, base = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 16, "temperature": 0})
    word = base["content"].strip().split()[0] if base["content"].strip() else None
    if word:
        status, stopped = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 16,
                                                    "temperature": 0, "stop": [word]})
        check(status == 200 and stopped["stop_type"] == "word" and
              stopped["stopping_word"] == word and word not in stopped["content"],
              f"stop word {word!r}: {stopped}")

    status, probs = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 4, "temperature": 0,
                                              "n_probs": 3})
    cp = probs.get("completion_probabilities") if status == 200 else None
    check(isinstance(cp, list) and len(cp) == probs["tokens_predicted"], f"n_probs {probs}")
    for entry in cp or []:
        ok = (isinstance(entry["id"], int) and isinstance(entry["token"], str) and
              entry["logprob"] <= 0 and isinstance(entry["bytes"], list) and
              len(entry["top_logprobs"]) == 3 and
              all({"id", "token", "logprob", "bytes"} <= set(t) for t in entry["top_logprobs"]))
        check(ok, f"probability entry {entry}")
        # Greedy: the drawn token is the most likely candidate.
        check(entry["top_logprobs"][0]["id"] == entry["id"], f"greedy top {entry}")
    status, raw = srv.raw("POST", "/completion", json.dumps(
        {"prompt": PROMPT, "n_predict": 4, "temperature": 0, "n_probs": 2,
         "stream": True}).encode())
    objs = [json.loads(e) for e in sse_events(raw)]
    n = sum(len(o.get("completion_probabilities", [])) for o in objs)
    check(n == objs[-1]["tokens_predicted"], f"streamed probabilities {n} for {objs[-1]}")

    # A logit_bias that bans every end-of-generation token is not needed:
    # ignore_eos runs to n_predict whatever the model says.
    status, eos = post(srv, "/completion", {"prompt": "Hi", "n_predict": 40, "temperature": 0,
                                            "ignore_eos": True})
    check(status == 200 and eos["tokens_predicted"] == 40 and eos["stop_type"] == "limit",
          f"ignore_eos {status} {eos if status != 200 else eos['tokens_predicted']}")


def tokenize_template_checks(srv):
    text = "Héllo wörld, 日本語 tokens!"
    status, pieces = post(srv, "/tokenize", {"content": text, "with_pieces": True})
    check(status == 200 and all(set(t) == {"id", "piece"} for t in pieces["tokens"]),
          f"with_pieces {pieces}")
    ids = [t["id"] for t in pieces["tokens"]]
    joined = b"".join(t["piece"].encode() if isinstance(t["piece"], str) else bytes(t["piece"])
                      for t in pieces["tokens"])
    _, plain = post(srv, "/tokenize", {"content": text})
    _, back = post(srv, "/detokenize", {"tokens": ids})
    check(ids == plain["tokens"], f"with_pieces ids {ids} != {plain['tokens']}")
    check(joined.decode() == text == back["content"], f"pieces {joined!r} / {back}")

    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Name a colour."}]
    status, applied = post(srv, "/apply-template", {"messages": messages})
    check(status == 200 and isinstance(applied.get("prompt"), str), f"apply-template {applied}")
    _, toks = post(srv, "/tokenize", {"content": applied["prompt"]})
    status, chat = post(srv, "/v1/chat/completions", {"messages": messages, "max_tokens": 2,
                                                      "temperature": 0})
    # /tokenize adds no BOS unless asked; the template writes its own.
    n_template = len(toks["tokens"])
    check(chat["usage"]["prompt_tokens"] in (n_template, n_template + 1),
          f"chat prompt tokens {chat['usage']} vs template {n_template}")
    _, toks_bos = post(srv, "/tokenize", {"content": applied["prompt"], "add_special": True})
    check(chat["usage"]["prompt_tokens"] in (len(toks_bos["tokens"]), n_template),
          f"chat prompt tokens {chat['usage']} vs {len(toks_bos['tokens'])}")
    check(isinstance(chat.get("system_fingerprint"), str), f"system_fingerprint {chat}")
    check_timings(chat.get("timings", {}), "chat")


def info_error_checks(srv, ctx_per_slot):
    status, props = srv.raw("GET", "/props")
    props = json.loads(props)
    check(status == 200 and props["total_slots"] == 4 and
          props["default_generation_settings"]["n_ctx"] == ctx_per_slot and
          props["model_path"].endswith(".gguf") and isinstance(props["chat_template"], str) and
          "build_info" in props and "modalities" in props,
          f"props {props}")
    status, slots = srv.raw("GET", "/slots")
    check(status == 501 and json.loads(slots)["error"]["type"] == "not_supported_error",
          f"slots {status} {slots[:200]!r}")

    long = "word " * 1500
    for path, body in [("/completion", {"prompt": long}),
                       ("/v1/completions", {"prompt": long}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": long}]}),
                       ("/completion", {"prompt": list(range(10, 10 + ctx_per_slot + 5))})]:
        status, err = post(srv, path, body)
        e = err.get("error", {}) if isinstance(err, dict) else {}
        check(status == 400 and e.get("type") == "exceed_context_size_error" and
              e.get("n_ctx") == ctx_per_slot and e.get("n_prompt_tokens", 0) >= ctx_per_slot and
              "exceeds the available context size" in e.get("message", ""),
              f"{path} past the context: {status} {err}")

    grammar_checks(srv)

    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer"}},
              "required": ["name", "age"]}
    for extra in [{"json_schema": schema},
                  {"response_format": {"type": "json_schema", "schema": schema}},
                  {"response_format": {"type": "json_object", "schema": schema}}]:
        status, r = post(srv, "/completion", {"prompt": "A person as JSON:", "n_predict": 64,
                                              "temperature": 0, **extra})
        try:
            jsonschema.validate(json.loads(r["content"]), schema)
            ok = status == 200
        except (ValueError, KeyError, TypeError, jsonschema.ValidationError) as e:
            ok = False
            print("schema:", e)
        check(ok, f"json_schema {list(extra)}: {status} {r}")
    status, err = post(srv, "/completion", {"prompt": "x", "n_predict": 0})
    check(status == 400 and "n_predict" in err["error"]["message"], f"n_predict 0 {err}")
    status, err = post(srv, "/completion", {"prompt": ["a", "b"]})
    check(status == 400 and "several prompts" in err["error"]["message"], f"two prompts {err}")


# A GBNF grammar and a regular expression written independently for the same
# language: the generated text must match the expression.
GRAMMAR = r'''root ::= answer ", " word{1,3} "."
answer ::= "yes" | "no"
word ::= [a-z]{2,8} " "?
'''
GRAMMAR_RE = re.compile(r"(yes|no), ([a-z]{2,8} ?){1,3}\.")


def grammar_checks(srv):
    for path, body, read in [
            ("/completion", {"prompt": "Is Paris in France? Answer:", "n_predict": 40},
             lambda r: r["content"]),
            ("/v1/completions", {"prompt": "Is Paris in France? Answer:", "max_tokens": 40},
             lambda r: r["choices"][0]["text"]),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Is Paris in "
                                                    "France?"}], "max_tokens": 40},
             lambda r: r["choices"][0]["message"]["content"])]:
        for temperature in [0, 1.0]:
            status, r = post(srv, path, {**body, "grammar": GRAMMAR, "temperature": temperature,
                                         "seed": 7})
            text = read(r) if status == 200 else None
            check(status == 200 and text is not None and GRAMMAR_RE.fullmatch(text) is not None,
                  f"{path} grammar at temperature {temperature}: {status} {r}")
    status, err = post(srv, "/completion", {"prompt": "x", "grammar": "root ::= \"a\" [b-"})
    msg = err.get("error", {}).get("message", "") if isinstance(err, dict) else ""
    check(status == 400 and "line 1, column" in msg and "grammar" in msg, f"bad grammar {err}")
    status, err = post(srv, "/completion", {"prompt": "x", "grammar": "root ::= \"a\"",
                                            "json_schema": {"type": "object"}})
    msg = err.get("error", {}).get("message", "") if isinstance(err, dict) else ""
    check(status == 400 and "'grammar'" in msg and "json_schema" in msg, f"grammar + schema {err}")


def flag_checks(model):
    def serve(*flags):
        return subprocess.run([BIN, "serve", "-m", model, "--port", "0", *flags],
                              capture_output=True, text=True, timeout=60)
    for flags, name in [(["--lora", "x.gguf"], "--lora"), (["--mmproj", "p.gguf"], "--mmproj"),
                        (["--rerank"], "--rerank"), (["--grammar", "root ::= x"], "--grammar"),
                        (["--ssl-key-file", "k"], "--ssl-key-file"),
                        (["--chat-template", "chatml"], "--chat-template")]:
        r = serve(*flags)
        check(r.returncode != 0 and name in r.stderr and "not supported" in r.stderr,
              f"{flags}: exit {r.returncode}, stderr {r.stderr[-300:]!r}")
    help_text = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True).stdout
    for name in ["--cors-origins", "--n-gpu-layers", "--cont-batching", "--no-mmap", "--lora",
                 "--ctx-size", "--threads", "--batch-size", "--n-predict", "--alias"]:
        check(name in help_text, f"{name} not in serve --help")


def main():
    model = gemma_path()
    flag_checks(model)
    # llama-server's accepted flags on the server that runs the checks.
    srv = Server(model, "--cors-origins", "*", "-ngl", "99", "-cb", "--no-mmap", "--mlock",
                 "--cache-reuse", "256", "--no-cont-batching", "-fa", "on", "--predict", "64",
                 "--temperature", "0.5", slots=4, ctx=2048)
    try:
        status, _ = srv.raw("GET", "/health")
        check(status == 200, f"/health {status}")
        check(srv.headers.get("access-control-allow-origin") == "*",
              f"--cors-origins: {srv.headers}")
        completion_checks(srv)
        stop_probs_eos_checks(srv)
        tokenize_template_checks(srv)
        info_error_checks(srv, 2048 // 4)
    finally:
        srv.stop()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
