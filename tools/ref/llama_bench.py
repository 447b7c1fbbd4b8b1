#!/usr/bin/env python3
"""llama.cpp's pp/tg speed on a GGUF through llama-cpp-python, with llama-bench's
definitions (the method of docs/PERFORMANCE.md): pp = one eval of P tokens
after reset(), tg = N single-token evals after reset(); one warm-up of each,
then R repetitions. Prints one JSON line: {"pp": [t/s...], "tg": [t/s...]}.

    python3 tools/ref/llama_bench.py MODEL [-p 512] [-n 128] [-r 3] [-t 2]
"""
import argparse
import json
import time

import llama_cpp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-t", type=int, default=2)
    a = ap.parse_args()
    llm = llama_cpp.Llama(model_path=a.model, n_ctx=max(a.p, a.n) + 16, n_batch=max(a.p, 1),
                          n_threads=a.t, n_threads_batch=a.t, flash_attn=True, verbose=False)
    n_vocab = llm.n_vocab()
    tokens = [(7919 * i + 13) % n_vocab for i in range(max(a.p, a.n))]

    def pp():
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(tokens[:a.p])
        return a.p / (time.perf_counter() - t0)

    def tg():
        llm.reset()
        t0 = time.perf_counter()
        for tok in tokens[:a.n]:
            llm.eval([tok])
        return a.n / (time.perf_counter() - t0)

    out = {}
    for name, fn, count in (("pp", pp, a.p), ("tg", tg, a.n)):
        if count <= 0:
            continue
        fn()  # warm-up
        out[name] = [fn() for _ in range(a.r)]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
