#!/usr/bin/env python3
"""Regenerates tests/tokenizer/golden/o200k_splits.json: the pieces OpenAI's
o200k pre-tokenizer pattern (GPT-4o, gpt-oss; GGUF `tokenizer.ggml.pre` =
"gpt-4o") cuts the tokenizer goldens' inputs into, computed with Python's
`regex` module from the pattern as the models' tokenizer.json files give it.

The one edit to that pattern: `\\s` is spelled out as the whitespace class the
C++ pre-tokenizers use (llama.cpp's notion of whitespace, which leaves out
U+001C-U+001F and U+180E), so the comparison is of the pattern and the regex
engines, not of two definitions of whitespace.

Usage: python3 tools/gen_pretokenizer_goldens.py
Needs: regex (PyPI).
"""
import json
import os
import sys

import regex

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_tokenizer_goldens import GOLDEN, INPUTS, LONG_TEXT, random_inputs  # noqa: E402

WS = "\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000"

O200K = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def with_explicit_whitespace(pattern):
    return pattern.replace(r"[^\s", "[^" + WS).replace(r"\S", "[^" + WS + "]").replace(
        r"\s", "[" + WS + "]")


def split(compiled, text):
    """Matches and the gaps between them, in order (what the C++ splitter keeps)."""
    pieces, at = [], 0
    for m in compiled.finditer(text):
        if m.start() > at:
            pieces.append(text[at:m.start()])
        if m.end() > m.start():
            pieces.append(m.group(0))
        at = m.end()
    if at < len(text):
        pieces.append(text[at:])
    return pieces


def main():
    compiled = regex.compile(with_explicit_whitespace(O200K))
    extra = ["HelloWorld", "ÉCOLE normale", "XMLHttpRequest", "don't DON'T Don'T", "a/b\n/c",
             "path/to/file\n/next", "1234567", "CamelCaseWord's", "ǅemal ǈubljana"]
    inputs = INPUTS + [LONG_TEXT] + extra + random_inputs(300, seed=4242)
    cases = [{"text": t, "pieces": split(compiled, t)} for t in inputs]
    path = os.path.join(GOLDEN, "o200k_splits.json")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump({"source": "Python regex " + regex.__version__ + " over the o200k pattern",
                   "cases": cases}, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"{path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
