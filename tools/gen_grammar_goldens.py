#!/usr/bin/env python3
"""Writes tests/grammar/golden/schema_cases.json: (schema, text, valid) cases
whose validity comes from the Python `jsonschema` package (Draft 2020-12),
not from minfer. tests/grammar/schema_test.cpp checks that src/grammar's
recognizer accepts exactly the valid texts.

Two things are fixed before asking jsonschema, both documented in
src/grammar/json_grammar.h:
  * absent additionalProperties next to "properties" means false (only
    declared properties are generated): the script adds it explicitly;
  * the recognizer accepts a canonical subset of the valid texts (declared
    properties in schema order, whitespace of at most "\\n" + 16 spaces), so
    every *valid* text below is written that way; invalid texts are anything.

Usage: python3 tools/gen_grammar_goldens.py   (needs: pip install jsonschema)
"""
import json
import pathlib

import jsonschema

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests/grammar/golden/schema_cases.json"

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "age": {"type": "integer"},
        "email": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["name", "age"],
}

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "value": {"type": "number"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["value"],
        }
    },
    "$ref": "#/$defs/node",
}

SUITES = [
    ("person", PERSON, [
        '{"name":"Ada","age":36}',
        '{"name":"Ada","age":36,"email":"a@b.c"}',
        '{"name":"Ada","age":36,"tags":["x","y"]}',
        '{"name":"Ada","age":36,"email":"","tags":[]}',
        '{\n  "name": "Ada",\n  "age": -3\n}',
        '{"name":"","age":1}',
        '{"name":"123456789","age":1}',
        '{"name":"12345678","age":1}',
        '{"name":"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9","age":1}',
        '{"name":"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9","age":1}',
        '{"name":"\\ud83d\\ude00","age":1}',
        '{"name":"Ada"}',
        '{"age":36}',
        '{"name":"Ada","age":36.5}',
        '{"name":"Ada","age":"36"}',
        '{"name":"Ada","age":36,"extra":1}',
        '{"name":"Ada","age":36,"tags":["a","b","c","d"]}',
        '{"name":"Ada","age":36,"tags":[1]}',
        '[]',
        'null',
    ]),
    ("tree", TREE, [
        '{"value":1}',
        '{"value":1,"children":[]}',
        '{"value":1,"children":[{"value":2},{"value":3,"children":[{"value":4e2}]}]}',
        '{"value":1,"children":[{"children":[]}]}',
        '{"value":1,"children":[{"value":"x"}]}',
        '{"children":[]}',
    ]),
    ("enum_const", {
        "type": "object",
        "properties": {
            "color": {"enum": ["red", "green", "blue"]},
            "version": {"const": 2},
            "mode": {"type": "string", "enum": ["a", 1, "b", None]},
        },
        "required": ["color", "version"],
        "additionalProperties": False,
    }, [
        '{"color":"red","version":2}',
        '{"color":"blue","version":2,"mode":"b"}',
        '{"color":"green","version":2,"mode":"a"}',
        '{"color":"yellow","version":2}',
        '{"color":"red","version":3}',
        '{"color":"red","version":2,"mode":1}',
        '{"color":"red","version":2,"mode":null}',
        '{"color":"red","version":2,"mode":"c"}',
    ]),
    ("any_of", {
        "anyOf": [
            {"type": "string", "maxLength": 2},
            {"type": "integer"},
            {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "null"}],
             "items": False},
        ]
    }, [
        '"ab"', '"abc"', '7', '-0', '7.5', '[true,null]', '[true]', '[]', '[true,null,1]',
        '[null,true]', 'false', '{}',
    ]),
    ("additional", {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "additionalProperties": {"type": "boolean"},
    }, [
        '{}', '{"id":1}', '{"x":true}', '{"id":1,"x":true,"y":false}', '{"x":true,"id":1}',
        '{"x":1}', '{"id":true}', '{"id":"1"}',
    ]),
    ("array_bounds", {
        "type": "array", "items": {"type": ["number", "null"]}, "minItems": 2, "maxItems": 3,
    }, [
        '[1,2]', '[1,null,3.5]', '[1]', '[]', '[1,2,3,4]', '[1,"2"]', '[ 1, 2 ]', '[1e5,-2E-3]',
    ]),
    ("bare_object", {"type": "object"}, [
        '{}', '{"a":[1,{"b":null}]}', '[]', '"x"',
    ]),
    ("untyped", {"properties": {"a": {"type": "string"}}, "minLength": 2}, [
        '{}', '{"a":"x"}', '{"a":1}', '"xy"', '"x"', '3', 'true', '[1,"a"]', '{"b":1}',
    ]),
    ("one_of", {"oneOf": [{"type": "boolean"}, {"type": "string", "minLength": 3}]}, [
        'true', '"abc"', '"ab"', '1',
    ]),
    ("all_of_one", {"allOf": [{"type": "integer"}]}, ['5', '5.5', '"5"']),
    ("empty_schema", {}, ['{"a":[1,2,{"b":"c"}]}', '"s"', '-1.5e-3', 'null']),
]


def explicit_additional(schema):
    """absent additionalProperties next to properties -> false (see above)."""
    if isinstance(schema, dict):
        out = {k: explicit_additional(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [explicit_additional(v) for v in schema]
    return schema


def reject_constant(name):
    raise ValueError("not JSON: " + name)


def main():
    suites = []
    for name, schema, texts in SUITES:
        validator = jsonschema.Draft202012Validator(explicit_additional(schema))
        cases = []
        for text in texts:
            try:
                value = json.loads(text, parse_constant=reject_constant)
                valid = validator.is_valid(value)
            except ValueError:
                valid = False
            cases.append({"text": text, "valid": valid})
        suites.append({"name": name, "schema": schema, "cases": cases})
    OUT.write_text(json.dumps({"generator": "tools/gen_grammar_goldens.py (jsonschema "
                               + __import__("importlib.metadata").metadata.version("jsonschema")
                               + ")", "suites": suites}, indent=1, ensure_ascii=False) + "\n")
    print("wrote", OUT, sum(len(s["cases"]) for s in suites), "cases")


if __name__ == "__main__":
    main()
