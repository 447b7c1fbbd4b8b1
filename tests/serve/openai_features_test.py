#!/usr/bin/env python3
"""`minfer serve`'s per-request features through the official openai SDK, on
the real Gemma 3 270M Q4_K_M:

  python3 tests/serve/openai_features_test.py MINFER_BINARY

- n choices: the prompt is computed once (the other choices reuse its
  pages: the prefix-cache counter); greedy ones are equal; sampled choice i equals a one-choice
  request with seed + i; usage counts every choice's tokens.
- logprobs (chat and completions, streamed and not): one entry per token,
  the pieces spell the text, a greedy token is its own top alternative, the
  alternatives are sorted, streamed entries equal the whole reply's.
- presence / frequency penalties: a prompt that invites repetition repeats
  less with them than without.
- response_format: json_object replies parse as JSON objects; json_schema
  replies (streamed and not, several choices) validate against the schema
  with the `jsonschema` package, properties in the schema's order; a schema
  keyword outside the supported subset is a 400 naming it.
"""
import json
import re
import sys

import jsonschema
import openai

from serve_testutil import Server, chat, check, finish, gemma_path


def prefix_hits(srv):
    _, text = srv.raw("GET", "/metrics")
    m = re.search(rb"^minfer_prefix_cache_hits_total (\d+)", text, re.M)
    return int(m.group(1)) if m else -1


def choices_checks(client, srv):
    # The prompt is computed once: choices 1..n-1 take its pages from the
    # prefix cache (a 16-token page; the prompt has some 300 tokens).
    long_prompt = "Here is a list of words: " + " ".join(f"w{i}" for i in range(120))
    before = prefix_hits(srv)
    r = client.completions.create(model="gemma-test", prompt=long_prompt, max_tokens=4,
                                  temperature=0, n=3)
    reused = prefix_hits(srv) - before
    pages = r.usage.prompt_tokens // 16
    check(reused >= 2 * (pages - 1), f"n=3 reused {reused} pages of a {pages}-page prompt")
    check(len({c.text for c in r.choices}) == 1, f"greedy choices differ: {r.choices}")

    r = chat(client, "Name a colour.", max_tokens=8, n=3)
    texts = [c.message.content for c in r.choices]
    check([c.index for c in r.choices] == [0, 1, 2], f"indices {[c.index for c in r.choices]}")
    check(len(set(texts)) == 1 and texts[0], f"greedy choices differ: {texts}")
    solo = chat(client, "Name a colour.", max_tokens=8)
    check(texts[0] == solo.choices[0].message.content, "a greedy choice equals the solo answer")
    check(r.usage.completion_tokens == 3 * solo.usage.completion_tokens,
          f"usage {r.usage} vs 3 x {solo.usage}")

    def sampled(seed, n):
        return client.chat.completions.create(
            model="gemma-test", messages=[{"role": "user", "content": "Write a word."}],
            temperature=1.0, top_p=1.0, seed=seed, max_tokens=12, n=n)
    both = sampled(7, 2)
    one = [sampled(7, 1).choices[0].message.content, sampled(8, 1).choices[0].message.content]
    got = [c.message.content for c in both.choices]
    check(got == one, f"sampled choices {got} != seeds 7 and 8 alone {one}")

    streamed = {}
    for ch in client.chat.completions.create(
            model="gemma-test", messages=[{"role": "user", "content": "Write a word."}],
            temperature=1.0, top_p=1.0, seed=7, max_tokens=12, n=2, stream=True):
        for c in ch.choices:
            streamed[c.index] = streamed.get(c.index, "") + (c.delta.content or "")
    check([streamed.get(0), streamed.get(1)] == got, f"streamed choices {streamed} != {got}")


def logprob_checks(client):
    r = chat(client, "Name a fruit.", max_tokens=10, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    text = r.choices[0].message.content
    check(len(content) == r.usage.completion_tokens, f"{len(content)} entries for "
          f"{r.usage.completion_tokens} tokens")
    check("".join(e.token for e in content) == text, f"pieces {[e.token for e in content]} "
          f"!= {text!r}")
    for e in content:
        top = e.top_logprobs
        check(len(top) == 3, f"top_logprobs {top}")
        check(e.logprob <= 0 and abs(top[0].logprob - e.logprob) < 1e-6 and top[0].token == e.token,
              f"greedy token {e.token!r} {e.logprob} is not its top alternative {top[0]}")
        check(all(top[i].logprob >= top[i + 1].logprob for i in range(len(top) - 1)),
              f"unsorted {top}")
        check(bytes(e.bytes).decode("utf-8", "replace") == e.token or not e.bytes, f"bytes {e}")
    streamed = []
    for ch in chat(client, "Name a fruit.", max_tokens=10, logprobs=True, top_logprobs=3,
                   stream=True):
        if ch.choices and ch.choices[0].logprobs and ch.choices[0].logprobs.content:
            streamed += ch.choices[0].logprobs.content
    check([(e.token, round(e.logprob, 5)) for e in streamed] ==
          [(e.token, round(e.logprob, 5)) for e in content], "streamed logprobs differ")
    plain = chat(client, "Name a fruit.", max_tokens=10)
    check(plain.choices[0].logprobs is None, "logprobs without asking")
    check(plain.choices[0].message.content == text, "logprobs change the greedy answer")

    c = client.completions.create(model="gemma-test", prompt="The capital of France is",
                                  max_tokens=6, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    check(len(lp.tokens) == c.usage.completion_tokens == len(lp.token_logprobs) ==
          len(lp.top_logprobs) == len(lp.text_offset), f"completion logprobs {lp}")
    check("".join(lp.tokens) == c.choices[0].text, f"{lp.tokens} != {c.choices[0].text!r}")
    check(all(len(t) <= 2 for t in lp.top_logprobs), f"top {lp.top_logprobs}")
    check(lp.text_offset[0] == 0 and all(
        lp.text_offset[i + 1] == lp.text_offset[i] + len(lp.tokens[i].encode())
        for i in range(len(lp.tokens) - 1)), f"offsets {lp.text_offset}")


def penalty_checks(client):
    prompt = "Write the word yes forty times: yes yes yes yes yes yes yes yes"
    base = client.completions.create(model="gemma-test", prompt=prompt, max_tokens=40,
                                     temperature=0).choices[0].text
    pen = client.completions.create(model="gemma-test", prompt=prompt, max_tokens=40,
                                    temperature=0, frequency_penalty=2.0,
                                    presence_penalty=2.0).choices[0].text
    check(base.count("yes") >= 10, f"the prompt does not make it repeat: {base!r}")
    check(pen.count("yes") < base.count("yes") / 2, f"penalized {pen!r} vs {base!r}")
    again = client.completions.create(model="gemma-test", prompt=prompt, max_tokens=40,
                                      temperature=0, frequency_penalty=2.0,
                                      presence_penalty=2.0).choices[0].text
    check(again == pen, "a penalized greedy reply is reproducible")
    try:
        client.completions.create(model="gemma-test", prompt="x", max_tokens=2,
                                  presence_penalty=5)
        check(False, "presence_penalty 5 was accepted")
    except openai.BadRequestError as e:
        check("presence_penalty" in str(e), f"penalty error {e}")


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer"},
        "colours": {"type": "array", "items": {"enum": ["red", "green", "blue"]},
                    "minItems": 1, "maxItems": 3},
        "pet": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 12}]},
    },
    "required": ["name", "age", "colours", "pet"],
    "additionalProperties": False,
}


def format_checks(client):
    ask = [{"role": "user", "content": "Describe a person as JSON."}]
    short = [{"role": "user", "content": 'Repeat exactly: {"colour": "red"}'}]
    # A small model may loop inside an object until max_tokens: every reply
    # that ends by itself must parse, and one of these four does (seeded).
    r = client.chat.completions.create(model="gemma-test", messages=short, max_tokens=60,
                                       temperature=0.8, seed=1, n=4,
                                       response_format={"type": "json_object"})
    ended = [c.message.content for c in r.choices if c.finish_reason == "stop"]
    check(len(ended) >= 1, f"json_object: {len(ended)} of 4 replies ended: {r.choices}")
    for text in ended:
        try:
            check(isinstance(json.loads(text), dict), f"json_object reply {text!r} is not an object")
        except ValueError as e:
            check(False, f"json_object reply {text!r} does not parse: {e}")

    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
    replies = []
    r = client.chat.completions.create(model="gemma-test", messages=ask, max_tokens=120,
                                       temperature=0.9, seed=3, n=3, response_format=fmt)
    replies += [(c.message.content, c.finish_reason) for c in r.choices]
    streamed = "".join(ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
        model="gemma-test", messages=ask, max_tokens=120, temperature=0, response_format=fmt,
        stream=True) if ch.choices)
    replies.append((streamed, "stop"))
    for text, finish_reason in replies:
        if finish_reason != "stop":
            check(False, f"a schema reply was cut ({finish_reason}): {text!r}")
            continue
        try:
            value = json.loads(text)
            jsonschema.validate(value, SCHEMA)
            check(list(value) == list(SCHEMA["properties"]), f"property order {list(value)}")
        except (ValueError, jsonschema.ValidationError) as e:
            check(False, f"schema reply {text!r} is invalid: {e}")

    c = client.completions.create(model="gemma-test", prompt="A list of three numbers:",
                                  max_tokens=40, temperature=0, extra_body={"response_format": {
                                      "type": "json_schema", "json_schema": {"schema": {
                                          "type": "array", "items": {"type": "number"},
                                          "minItems": 3, "maxItems": 3}}}})
    try:
        value = json.loads(c.choices[0].text)
        check(isinstance(value, list) and len(value) == 3, f"completion array {value}")
    except ValueError as e:
        check(False, f"completion {c.choices[0].text!r}: {e}")
    try:
        client.chat.completions.create(model="gemma-test", messages=ask, max_tokens=5,
                                       response_format={"type": "json_schema", "json_schema": {
                                           "name": "x", "schema": {"type": "string",
                                                                   "pattern": "^a+$"}}})
        check(False, "an unsupported schema keyword was accepted")
    except openai.BadRequestError as e:
        check("pattern" in str(e), f"unsupported keyword error: {e}")


def main():
    srv = Server(gemma_path())
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none")
    try:
        choices_checks(client, srv)
        logprob_checks(client)
        penalty_checks(client)
        format_checks(client)
    finally:
        srv.stop()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
