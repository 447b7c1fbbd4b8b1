#!/usr/bin/env python3
"""llama.cpp's embeddings of a few short texts, through llama-cpp-python: the
reference that `minfer serve --embedding` is compared with
(tests/serve/embeddings_test.py, docs/SERVER.md "Embeddings").

usage: tools/ref/make_embedding_goldens.py MODEL.gguf [OUT.json]   (needs llama-cpp-python)
MODEL defaults to $MINFER_GEMMA3_GGUF; OUT to tests/serve/golden/embeddings_gemma3.json.

For each text and each pooling (mean, cls, last) it keeps the pooled vector's
Euclidean norm, its first components, and the whole vector scaled to unit
length as little-endian float16 in base64 (a cosine needs every component; f16
moves a cosine by less than 1e-6). For pooling none it keeps the first text's
per-token norms and first components. Each text is embedded on its own, from an
empty cache, tokenized as llama-cpp-python's embed() tokenizes (BOS added,
special tokens not parsed); the token ids are kept so that a test can check
that minfer tokenized the same way.
"""
import base64
import json
import os
import sys

import numpy as np
import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "serve", "golden", "embeddings_gemma3.json")
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France.",
    "def add(a, b):\n    return a + b",
    "Embeddings map text to vectors.",
]
POOLING = {"mean": llama_cpp.LLAMA_POOLING_TYPE_MEAN, "cls": llama_cpp.LLAMA_POOLING_TYPE_CLS,
           "last": llama_cpp.LLAMA_POOLING_TYPE_LAST}
HEAD = 8


def unit_f16(v):
    v = np.asarray(v, dtype=np.float64)
    u = (v / np.linalg.norm(v)).astype("<f2")
    return base64.b64encode(u.tobytes()).decode()


def load(model, pooling):
    return llama_cpp.Llama(model_path=model, embedding=True, pooling_type=pooling, n_ctx=512,
                           n_batch=512, n_ubatch=512, n_threads=2, verbose=False)


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.environ["MINFER_GEMMA3_GGUF"]
    out_path = sys.argv[2] if len(sys.argv) > 2 else OUT
    golden = {"generator": f"llama-cpp-python {llama_cpp.__version__}, "
                           "tools/ref/make_embedding_goldens.py",
              "model": os.path.basename(model), "texts": TEXTS, "pooled": {}}
    for name, pooling in POOLING.items():
        llm = load(model, pooling)
        rows = []
        for text in TEXTS:
            v = np.asarray(llm.embed(text), dtype=np.float64)  # one input per call
            rows.append({"norm": float(np.linalg.norm(v)), "head": [float(x) for x in v[:HEAD]],
                         "unit_f16": unit_f16(v)})
        golden["pooled"][name] = rows
        if name == "mean":
            golden["tokens"] = [llm.tokenize(t.encode("utf-8"), add_bos=True, special=False)
                                for t in TEXTS]
        del llm
    llm = load(model, llama_cpp.LLAMA_POOLING_TYPE_NONE)
    per_token = np.asarray(llm.embed(TEXTS[0]), dtype=np.float64)
    golden["none"] = {"text": 0, "norms": [float(np.linalg.norm(r)) for r in per_token],
                      "heads": [[float(x) for x in r[:4]] for r in per_token]}
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", out_path)


if __name__ == "__main__":
    main()
