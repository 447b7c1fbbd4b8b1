#!/usr/bin/env python3
"""llama.cpp's perplexity of a text, through llama-cpp-python, scored exactly as
llama-perplexity scores it (chunks of n_ctx tokens evaluated independently from
an empty cache, BOS replacing each chunk's first token when the vocabulary adds
BOS, the second half of each chunk scored). This is the reference that
`minfer perplexity` is compared with.

usage: llama_perplexity.py MODEL.gguf TEXT [--ctx 512] [--chunks N] [--threads 2]
                           [--flash-attn 0|1] [--cache-type f16|f32|q8_0]
                           [--cache-type-k TYPE] [--cache-type-v TYPE] [--logits-out FILE]
--cache-type sets K and V; --cache-type-k/-v override it for one of them. A
quantized V cache needs flash attention in llama.cpp.
Prints "Final estimate: PPL = X +/- Y" and a JSON line with ln(PPL) and counts.
"""
import argparse
import json
import math
import sys

import numpy as np
import llama_cpp

GGML_TYPE = {"f32": 0, "f16": 1, "q8_0": 8}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("text")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=-1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--flash-attn", type=int, default=1)
    ap.add_argument("--cache-type", default="f16", choices=sorted(GGML_TYPE))
    ap.add_argument("--cache-type-k", choices=sorted(GGML_TYPE))
    ap.add_argument("--cache-type-v", choices=sorted(GGML_TYPE))
    ap.add_argument("--logits-out")
    a = ap.parse_args()
    type_k = GGML_TYPE[a.cache_type_k or a.cache_type]
    type_v = GGML_TYPE[a.cache_type_v or a.cache_type]

    llm = llama_cpp.Llama(model_path=a.model, n_ctx=a.ctx, n_batch=a.ctx, n_ubatch=a.ctx,
                          logits_all=True, n_threads=a.threads, flash_attn=bool(a.flash_attn),
                          type_k=type_k, type_v=type_v,
                          verbose=False)
    text = open(a.text, encoding="utf-8").read()
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
    add_bos = llm._model.add_bos_token() if hasattr(llm._model, "add_bos_token") else True
    bos = llm.token_bos()
    n_ctx = a.ctx
    n_chunks = len(tokens) // n_ctx
    if a.chunks > 0:
        n_chunks = min(n_chunks, a.chunks)
    first = n_ctx // 2
    nll = nll2 = 0.0
    count = 0
    dump = open(a.logits_out, "wb") if a.logits_out else None
    for c in range(n_chunks):
        chunk = list(tokens[c * n_ctx:(c + 1) * n_ctx])
        if add_bos:
            chunk[0] = bos
        llm.reset()
        llm.eval(chunk)
        logits = np.array(llm.scores[:n_ctx], dtype=np.float32)
        rows = logits[first:n_ctx - 1]
        if dump:
            dump.write(rows.astype(np.float32).tobytes())
        for j in range(first, n_ctx - 1):
            row = logits[j].astype(np.float64)
            m = row.max()
            lse = math.log(np.exp(row - m).sum())
            v = lse - (row[tokens[c * n_ctx + j + 1]] - m)
            nll += v
            nll2 += v * v
            count += 1
        print(f"[{c + 1}]{math.exp(nll / count):.4f},", end="", flush=True)
    print()
    mean = nll / count
    ppl = math.exp(mean)
    var = nll2 / count - mean * mean
    err = math.sqrt(var / (count - 1)) * ppl if var > 0 else 0.0
    print(f"Final estimate: PPL = {ppl:.4f} +/- {err:.5f}")
    print(json.dumps({"ln_ppl": mean, "ppl": ppl, "chunks": n_chunks, "scored": count,
                      "n_tokens": len(tokens)}))


if __name__ == "__main__":
    sys.exit(main())
