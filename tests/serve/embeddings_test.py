#!/usr/bin/env python3
"""`minfer serve --embedding` on the real Gemma 3 270M Q4_K_M: OpenAI's
/v1/embeddings through the official openai SDK and llama-server's native
/embedding and /embeddings (serve/embeddings.h, docs/SERVER.md "Embeddings").

  python3 tests/serve/embeddings_test.py MINFER_BINARY

Checks: without --embedding every path is llama-server's 501; pooling none
(Gemma's default: its file has no pooling_type) refuses /v1/embeddings and
gives per-token vectors natively; with mean, cls and last the vectors agree
with llama.cpp's (tests/serve/golden/embeddings_gemma3.json, made by
tools/ref/make_embedding_goldens.py) to a cosine of at least MIN_COSINE and
their norms to NORM_RTOL; float and base64 give the same numbers; an input's
vector is the same bits alone and in a batch of several; input shapes
(string, strings, ids, lists of ids), usage counts, errors (empty input, too
many inputs, an input past the context, bad fields); completions still work.
"""
import base64
import json
import math
import os
import struct
import sys
import threading

import openai

from serve_testutil import Server, check, error_object, finish, gemma_path

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden",
                      "embeddings_gemma3.json")
# docs/SERVER.md "Embeddings" gives the measured agreement these bound:
# llama.cpp against itself (flash attention and an f16 cache, or neither and
# f32) differs as much; two different texts' vectors are at most 0.64 apart.
MIN_COSINE = 0.99
NORM_RTOL = 0.03        # a pooled vector's norm
TOKEN_NORM_RTOL = 0.10  # one token's (pooling none)
SLOTS, CTX = 4, 2048  # 512 tokens a sequence


def post(srv, path, body):
    status, raw = srv.raw("POST", path, json.dumps(body).encode())
    try:
        return status, json.loads(raw), raw
    except ValueError:
        return status, None, raw


def unit(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def cosine(a, b):
    return sum(x * y for x, y in zip(unit(a), unit(b)))


def golden_vector(entry):
    raw = base64.b64decode(entry["unit_f16"])
    return list(struct.unpack(f"<{len(raw) // 2}e", raw))


def client_of(srv):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)


def disabled_checks(model):
    srv = Server(model, slots=2, ctx=1024)
    try:
        for path in ["/v1/embeddings", "/embeddings", "/embedding"]:
            status, _, raw = post(srv, path, {"input": "hello"})
            error_object(status, raw, 501, "Start it with `--embeddings`")
            check(b"not_supported_error" in raw, f"{path} without --embedding: {raw!r}")
    finally:
        srv.stop()


def pooling_none_checks(model, golden):
    srv = Server(model, "--embeddings", slots=SLOTS, ctx=CTX)  # Gemma's file: pooling none
    try:
        status, _, raw = post(srv, "/v1/embeddings", {"input": "hello"})
        error_object(status, raw, 400, "Pooling type 'none' is not OAI compatible")
        status, body, raw = post(srv, "/embedding", {"content": golden["texts"][0]})
        check(status == 200 and isinstance(body, list) and len(body) == 1, f"native: {raw[:200]!r}")
        rows = body[0]["embedding"]
        want = golden["none"]
        check(len(rows) == len(want["norms"]), f"per-token rows {len(rows)} != {len(want['norms'])}")
        worst = 0.0
        for i, (row, norm) in enumerate(zip(rows, want["norms"])):
            got = math.sqrt(sum(x * x for x in row))  # unnormalized, as llama-server's
            check(abs(got - norm) <= TOKEN_NORM_RTOL * norm,
                  f"token {i}: norm {got} vs llama.cpp {norm}")
            worst = max(worst, abs(got - norm) / norm)
        print(f"none: max per-token norm difference {worst:.2e}", flush=True)
    finally:
        srv.stop()


def agreement(srv, golden, pooling):
    """Cosines and norm ratios of minfer's vectors against llama.cpp's."""
    client = client_of(srv)
    texts = golden["texts"]
    worst_cos, worst_norm = 1.0, 0.0
    for i, text in enumerate(texts):
        toks = json.loads(srv.raw("POST", "/tokenize", json.dumps(
            {"content": text, "add_special": True}).encode())[1])["tokens"]
        check(toks == golden["tokens"][i], f"text {i} tokens {toks} != llama.cpp's")
        got = client.embeddings.create(model="gemma-test", input=text,
                                       encoding_format="float").data[0].embedding
        ref = golden["pooled"][pooling][i]
        refs = [golden_vector(r) for r in golden["pooled"][pooling]]
        c = cosine(got, refs[i])
        check(c >= MIN_COSINE, f"{pooling} text {i}: cosine {c:.6f} < {MIN_COSINE}")
        if pooling != "cls":  # (cls is the BOS token's state: the same for every text)
            nearest = max(range(len(refs)), key=lambda j: cosine(got, refs[j]))
            check(nearest == i, f"{pooling} text {i}: nearest to llama.cpp's text {nearest}")
        _, raw_body, _ = post(srv, "/embedding", {"content": text, "embd_normalize": -1})
        raw_vec = raw_body[0]["embedding"][0]
        norm = math.sqrt(sum(x * x for x in raw_vec))
        rel = abs(norm - ref["norm"]) / ref["norm"]
        check(rel <= NORM_RTOL, f"{pooling} text {i}: norm {norm} vs llama.cpp {ref['norm']}")
        worst_cos, worst_norm = min(worst_cos, c), max(worst_norm, rel)
    print(f"{pooling}: min cosine {worst_cos:.6f}, max norm difference {worst_norm:.2e}",
          flush=True)


def sdk_checks(srv, golden):
    client = client_of(srv)
    texts = golden["texts"]
    floats = client.embeddings.create(model="gemma-test", input=texts, encoding_format="float")
    default = client.embeddings.create(model="gemma-test", input=texts)  # the SDK asks for base64
    b64 = client.embeddings.create(model="gemma-test", input=texts, encoding_format="base64")
    check(len(floats.data) == len(texts), f"{len(floats.data)} vectors for {len(texts)} inputs")
    check([d.index for d in floats.data] == list(range(len(texts))), "indices in order")
    check(floats.model == "gemma-test" and floats.object == "list", f"{floats.model} {floats.object}")
    n_tokens = sum(len(t) for t in golden["tokens"])
    check(floats.usage.prompt_tokens == n_tokens and floats.usage.total_tokens == n_tokens,
          f"usage {floats.usage} for {n_tokens} tokens")
    for f, d in zip(floats.data, default.data):
        check(len(f.embedding) == 640, f"dimension {len(f.embedding)}")
        check(abs(math.sqrt(sum(x * x for x in f.embedding)) - 1) < 1e-5, "unit length")
        check(f.embedding == d.embedding, "float and base64 differ")
    for f, d in zip(floats.data, b64.data):
        vec = list(struct.unpack(f"<{len(f.embedding)}f", base64.b64decode(d.embedding)))
        check(vec == f.embedding, "base64 bytes are not the float vector")
    # Token ids, one list and lists of them, give the texts' vectors.
    one = client.embeddings.create(model="m", input=golden["tokens"][1], encoding_format="float")
    check(one.data[0].embedding == floats.data[1].embedding, "token ids differ from the text")
    lists = client.embeddings.create(model="m", input=golden["tokens"][:2], encoding_format="float")
    check([d.embedding for d in lists.data] == [d.embedding for d in floats.data[:2]],
          "lists of token ids differ from the texts")


def batch_invariance_checks(srv, golden):
    """An input's vector is the same bits alone, in a list, and beside other requests."""
    text = golden["texts"][2]
    _, alone, _ = post(srv, "/v1/embeddings", {"input": text})
    others = [f"Sentence number {i} is about {w}." for i, w in
              enumerate(["rain", "chess", "bread", "rivers", "Mars", "jazz", "tea"])]
    _, batched, _ = post(srv, "/v1/embeddings", {"input": others[:3] + [text] + others[3:]})
    check(batched["data"][3]["embedding"] == alone["data"][0]["embedding"],
          "the vector differs in a batch of 8")
    results = {}

    def worker(i):
        results[i] = post(srv, "/v1/embeddings", {"input": [others[i], text]})[1]
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    client = client_of(srv)
    for t in threads:
        t.start()
    reply = client.completions.create(model="m", prompt="The capital of France is", max_tokens=8,
                                      temperature=0)
    for t in threads:
        t.join()
    check(bool(reply.choices[0].text), "a completion beside embeddings")
    for i, body in results.items():
        check(body["data"][1]["embedding"] == alone["data"][0]["embedding"],
              f"the vector differs beside concurrent request {i}")


def error_checks(srv):
    n_ctx = CTX // SLOTS
    status, body, raw = post(srv, "/v1/embeddings", {"input": [1] * (n_ctx + 1)})
    error_object(status, raw, 400, "larger than the max context size")
    if body:
        err = body["error"]
        check(err.get("type") == "exceed_context_size_error" and err.get("n_ctx") == n_ctx and
              err.get("n_prompt_tokens") == n_ctx + 1, f"context error {err}")
    status, _, raw = post(srv, "/v1/embeddings", {"input": ["fine", "word " * 4 * n_ctx]})
    error_object(status, raw, 400, "input 1")
    status, _, _ = post(srv, "/v1/embeddings", {"input": [2] * n_ctx})
    check(status == 200, f"an input of the whole context: {status}")
    for body, needle in [({"input": ""}, "empty"), ({"input": []}, "must not be empty"),
                         ({"input": [[]]}, "no tokens"), ({"input": ["a", 3]}, "'input'[1]"),
                         ({"input": ["x"] * 2049}, "at most 2048"), ({}, "\"input\""),
                         ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
                         ({"input": [10 ** 9]}, "token ids"), ({"input": 5}, "'input'"),
                         ({"input": "x", "embd_normalize": "2"}, "embd_normalize")]:
        status, _, raw = post(srv, "/v1/embeddings", body)
        error_object(status, raw, 400, needle)
    status, body, raw = post(srv, "/embeddings", {"content": ["a", "b"]})
    check(status == 200 and [e["index"] for e in body] == [0, 1] and
          len(body[0]["embedding"]) == 1, f"native list: {raw[:200]!r}")
    status, body, _ = post(srv, "/v1/embeddings", {"content": "a"})  # content: the native shape
    check(status == 200 and isinstance(body, list), f"content on /v1/embeddings: {body!r:.200}")


def main():
    with open(GOLDEN, encoding="utf-8") as f:
        golden = json.load(f)
    model = gemma_path()
    disabled_checks(model)
    pooling_none_checks(model, golden)
    srv = Server(model, "--embedding", "--pooling", "mean", slots=SLOTS, ctx=CTX)
    try:
        agreement(srv, golden, "mean")
        sdk_checks(srv, golden)
        batch_invariance_checks(srv, golden)
        error_checks(srv)
    finally:
        srv.stop()
    for pooling in ["cls", "last"]:
        srv = Server(model, "--embedding", "--pooling", pooling, slots=SLOTS, ctx=CTX)
        try:
            agreement(srv, golden, pooling)
        finally:
            srv.stop()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
