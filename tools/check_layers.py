#!/usr/bin/env python3
"""Checks that #include "..." lines under src/ go one way, down the layers.

The layers are those of docs/ARCHITECTURE.md ("Layering of includes"); the
table below mirrors that list, and the two change together. A file may include
its own unit and any unit on a lower level; a unit on the same level or above
is an error. Units are src/ folders, except that graph/ holds two: the IR
(below the backends, which execute it) and the passes that drive backends
(fusion, plan, executor: above them).

Besides the levels, each backend's folder (backend/<kind>/) is private: from
outside src/backend/ only the interface (backend/backend.h) and the registry
(backend/registry.h) may be included, so no stage above names one backend;
inside it, only the registry and the folders built on another (vulkan/ and
metal/ on shader/) reach into a folder not their own.

Usage: tools/check_layers.py [SOURCE_DIR]   (default: the repository root)
Prints each offending line as file:line and exits 1; a file under src/ that
no unit claims is an error too, so a new folder gets its place in the table.
"""
import os
import re
import sys

# (level, unit, path prefixes under src/). Lower levels first; a file belongs
# to the unit with the longest matching prefix.
LAYERS = [
    (0, "base", ["base/"]),
    (1, "quant", ["quant/"]),
    (1, "template", ["template/"]),
    (1, "parallel", ["parallel/"]),
    (2, "gguf", ["gguf/"]),
    (2, "graph IR", ["graph/ir.", "graph/node_status.", "graph/yarn."]),
    (3, "tokenizer", ["tokenizer/"]),
    (4, "grammar", ["grammar/"]),
    (4, "model", ["model/"]),
    (4, "synth", ["synth/"]),
    (5, "backend", ["backend/"]),
    (6, "graph passes", ["graph/fusion.", "graph/plan.", "graph/executor."]),
    (7, "runtime", ["runtime/"]),
    (8, "serve", ["serve/"]),
    (9, "cli", ["cli/"]),
]

# Includes allowed although the levels forbid them: (including file's prefix,
# included file's prefix, why). Each entry is a debt, named with its reason;
# none is needed now.
EXCEPTIONS = []

# Each backend's folder (backend/<kind>/) is private: included only from
# itself, the registry (which creates every kind) and the folders listed here.
BACKEND_FOLDER_USERS = {
    # The shared command-buffer layer under the Vulkan and Metal hosts.
    "backend/shader/": ["backend/vulkan/", "backend/metal/"],
}

SOURCE_SUFFIXES = (".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh", ".m", ".mm")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def unit_of(path):
    """(level, unit) of a path relative to src/, or None."""
    best = None
    for level, name, prefixes in LAYERS:
        for prefix in prefixes:
            if path.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), level, name)
    return None if best is None else (best[1], best[2])


def starts_with_any(path, prefixes):
    return any(path.startswith(p) for p in prefixes)


def check_include(src, target):
    """An error message for `src` including `target` (both under src/), or None."""
    here, there = unit_of(src), unit_of(target)
    if there is None:
        return f'"{target}" is in no layer (add it to LAYERS in tools/check_layers.py)'
    parts = target.split("/")
    if parts[0] == "backend" and len(parts) > 2:
        folder = f"backend/{parts[1]}/"
        users = [folder, "backend/registry.cpp"] + BACKEND_FOLDER_USERS.get(folder, [])
        if not starts_with_any(src, users):
            hint = "outside src/backend/: backend/backend.h, backend/registry.h"
            if src.startswith("backend/"):
                hint = "see BACKEND_FOLDER_USERS in tools/check_layers.py"
            return f'"{target}" is private to {folder} ({hint})'
    if here == there or there[0] < here[0]:
        return None
    for from_prefix, to_prefix, _why in EXCEPTIONS:
        if src.startswith(from_prefix) and target.startswith(to_prefix):
            return None
    relation = "the same level as" if there[0] == here[0] else "above"
    return f'"{target}" ({there[1]}, level {there[0]}) is {relation} {here[1]} (level {here[0]})'


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    src_root = os.path.join(root, "src")
    errors = []
    n_files = 0
    for dirpath, dirs, files in os.walk(src_root):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, src_root).replace(os.sep, "/")
            n_files += 1
            if unit_of(rel) is None:
                errors.append(f"src/{rel}: in no layer "
                              "(add it to LAYERS in tools/check_layers.py)")
                continue
            with open(full, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    # A name without a folder is the including file's neighbour.
                    if not m or "/" not in m.group(1):
                        continue
                    message = check_include(rel, m.group(1))
                    if message:
                        errors.append(f"src/{rel}:{lineno}: {message}")
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} include(s) against the layers "
              "(docs/ARCHITECTURE.md, \"Layering of includes\")")
        return 1
    print(f"check_layers: {n_files} files, every include goes down the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
