#!/usr/bin/env python3
"""Checks a synthetic GGUF written by `minfer synth` with an independent reader.

Uses the `gguf` Python package (not minfer's code) to read the file, then checks:
  - the architecture's hyper-parameter keys are present and consistent with the
    tensor shapes (embedding, heads, head dim, FFN, vocabulary, layer count;
    for a mixture of experts the expert count, used count and expert FFN width
    against the router and the 3-D expert tensors);
  - the tokenizer arrays have one entry per embedding row, and merges / scores
    are present for the tokenizer model;
  - every tensor dequantizes (gguf's numpy dequantizers) to finite values with
    the intended statistics: norms exactly 1, matrices with mean ~0 and standard
    deviation within 12% of the intended one (1/sqrt(fan_in), residual
    projections / sqrt(2 * n_layer), embedding 0.05, biases 0.02; gpt-oss's
    sinks 2, router bias 0.5, gate/up expert biases 0.05).
Exits non-zero with a message naming the first failing check.
"""
import math
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        if default is not None:
            return default
        sys.exit(f"missing key {key}")
    return f.contents()


def intended_std(name, arch, d, n_layer, q_dim, n_ff):
    """n_ff is the expert FFN width for the experts of a mixture of experts."""
    if name.endswith("norm.weight"):
        return None  # exactly ones
    if name == "rope_freqs.weight":
        return None
    if name == "token_embd.weight":
        return 0.05
    if name.endswith("attn_sinks.weight"):
        return 2.0  # gpt-oss: wide enough that some heads' sink outweighs every key
    if name.endswith("ffn_gate_inp.bias"):
        return 0.5
    if name.endswith("ffn_gate_exps.bias") or name.endswith("ffn_up_exps.bias"):
        return 0.05
    if name.endswith(".bias"):
        return 0.02
    residual = 1.0 / math.sqrt(2.0 * n_layer)
    if name.endswith("attn_output.weight"):
        return residual / math.sqrt(q_dim)
    if name.endswith("ffn_down.weight") or name.endswith("ffn_down_exps.weight"):
        return residual / math.sqrt(n_ff)
    return 1.0 / math.sqrt(d)


def shape(t):
    return tuple(int(x) for x in t.shape)


def main(path):
    r = GGUFReader(path)
    arch = field(r, "general.architecture")
    d = int(field(r, f"{arch}.embedding_length"))
    n_layer = int(field(r, f"{arch}.block_count"))
    n_head = int(field(r, f"{arch}.attention.head_count"))
    n_head_kv = int(field(r, f"{arch}.attention.head_count_kv"))
    n_ff = int(field(r, f"{arch}.feed_forward_length"))
    head_dim = int(field(r, f"{arch}.attention.key_length", d // n_head))
    tensors = {t.name: t for t in r.tensors}
    emb = tensors["token_embd.weight"]
    n_vocab = int(emb.shape[1])
    n_expert = int(field(r, f"{arch}.expert_count", 0))
    if n_expert:
        n_used = int(field(r, f"{arch}.expert_used_count"))
        n_ff = int(field(r, f"{arch}.expert_feed_forward_length"))
        ffn = "ffn_down_exps"
        moe_checks = [
            (0 < n_used <= n_expert, "expert_used_count not in [1, expert_count]"),
            (shape(tensors["blk.0.ffn_gate_inp.weight"]) == (d, n_expert), "ffn_gate_inp shape"),
            (tensors["blk.0.ffn_gate_inp.weight"].tensor_type.name == "F32", "router not F32"),
            (shape(tensors["blk.0.ffn_gate_exps.weight"]) == (d, n_ff, n_expert), "gate_exps"),
            (shape(tensors["blk.0.ffn_up_exps.weight"]) == (d, n_ff, n_expert), "up_exps"),
            (shape(tensors["blk.0.ffn_down_exps.weight"]) == (n_ff, d, n_expert), "down_exps"),
        ]
        if arch == "gpt-oss":
            moe_checks += [
                (shape(tensors["blk.0.attn_sinks.weight"]) == (n_head,), "attn_sinks shape"),
                (shape(tensors["blk.0.ffn_gate_inp.bias"]) == (n_expert,), "router bias shape"),
                (shape(tensors["blk.0.ffn_gate_exps.bias"]) == (n_ff, n_expert), "gate bias"),
                (shape(tensors["blk.0.ffn_down_exps.bias"]) == (d, n_expert), "down bias"),
                ("blk.0.post_attention_norm.weight" in tensors, "post_attention_norm missing"),
                (field(r, f"{arch}.rope.scaling.type") == "yarn", "rope scaling not yarn"),
                (int(field(r, f"{arch}.attention.sliding_window")) > 0, "no sliding window"),
            ]
    else:
        ffn = "ffn_down"
        moe_checks = [(shape(tensors["blk.0.ffn_down.weight"]) == (n_ff, d), "ffn_down")]
    checks = moe_checks + [
        (int(emb.shape[0]) == d, "token_embd row length != embedding_length"),
        (tuple(int(x) for x in tensors["blk.0.attn_q.weight"].shape) == (d, n_head * head_dim),
         "attn_q shape"),
        (tuple(int(x) for x in tensors["blk.0.attn_k.weight"].shape) == (d, n_head_kv * head_dim),
         "attn_k shape"),
        (f"blk.{n_layer - 1}.{ffn}.weight" in tensors, "last layer missing"),
        (f"blk.{n_layer}.{ffn}.weight" not in tensors, "extra layer"),
        (len(field(r, "tokenizer.ggml.tokens")) == n_vocab, "token count != embedding rows"),
        (len(field(r, "tokenizer.ggml.token_type")) == n_vocab, "token types count"),
    ]
    model = field(r, "tokenizer.ggml.model")
    if model == "gpt2":
        checks.append((len(field(r, "tokenizer.ggml.merges")) > 0, "BPE without merges"))
    else:
        checks.append((len(field(r, "tokenizer.ggml.scores")) == n_vocab, "SPM scores count"))
    for ok, what in checks:
        if not ok:
            sys.exit(f"{path}: {what}")

    q_dim = n_head * head_dim
    for t in r.tensors:
        values = dequantize(t.data, t.tensor_type).astype(np.float64).ravel()
        if not np.all(np.isfinite(values)):
            sys.exit(f"{path}: {t.name}: non-finite values")
        want = intended_std(t.name, arch, d, n_layer, q_dim, n_ff)
        if t.name.endswith("norm.weight"):
            if not np.all(values == 1.0):
                sys.exit(f"{path}: {t.name}: norm weights are not all 1")
            continue
        if want is None or values.size < 64:
            continue  # a handful of draws (sinks, a tiny router's bias) says nothing of the spread
        std, mean = values.std(), values.mean()
        if abs(std / want - 1.0) > 0.12 or abs(mean) > 0.1 * want + 4 * want / math.sqrt(values.size):
            sys.exit(f"{path}: {t.name} ({t.tensor_type.name}): mean {mean:.5g} std {std:.5g}, "
                     f"intended mean 0 std {want:.5g}")
    print(f"ok: {path}: {arch}, {len(r.tensors)} tensors, vocab {n_vocab} ({model})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: check_synth.py FILE.gguf")
    main(sys.argv[1])
