#!/usr/bin/env python3
"""Prints a canonical dump of a GGUF file as read by the `gguf` Python package.

The tests compare this dump with the same dump computed from minfer's own
reader, so the format must match tests/gguf/gguf_testutil.cpp's
canonical_dump(): one line per header field, metadata key and tensor; floats as
their bit patterns; strings quoted with every byte outside printable ASCII (and
the quote and backslash) written as \\xNN; tensor data as SHA-256.

Usage: gguf_check.py FILE
Exit status: 0 ok, 1 unreadable file, 3 the `gguf` package is missing.
"""
import hashlib
import struct
import sys

try:
    import gguf
    from gguf import GGUFReader, GGUFValueType
except ImportError:
    sys.stderr.write("gguf_check: the `gguf` Python package is missing; "
                     "run tools/install_deps.sh\n")
    sys.exit(3)

TYPE_NAMES = {
    0: "u8", 1: "i8", 2: "u16", 3: "i16", 4: "u32", 5: "i32", 6: "f32", 7: "bool",
    8: "string", 9: "array", 10: "u64", 11: "i64", 12: "f64",
}


def quote(raw: bytes) -> str:
    out = []
    for b in raw:
        if 0x20 <= b <= 0x7E and b not in (0x22, 0x5C):
            out.append(chr(b))
        else:
            out.append("\\x%02x" % b)
    return '"' + "".join(out) + '"'


def decode(parts, i, vtype):
    """Renders the value whose parts start at parts[i]; returns (text, next index)."""
    if vtype == GGUFValueType.STRING:
        return quote(parts[i + 1].tobytes()), i + 2
    if vtype == GGUFValueType.ARRAY:
        elem = int(parts[i][0])
        count = int(parts[i + 1][0])
        i += 2
        items = []
        for _ in range(count):
            text, i = decode(parts, i, GGUFValueType(elem))
            items.append(text)
        return "array<%s>[%s]" % (TYPE_NAMES[elem], ",".join(items)), i
    raw = parts[i].tobytes()
    if vtype == GGUFValueType.FLOAT32:
        return "0x%08x" % struct.unpack("<I", raw)[0], i + 1
    if vtype == GGUFValueType.FLOAT64:
        return "0x%016x" % struct.unpack("<Q", raw)[0], i + 1
    if vtype == GGUFValueType.BOOL:
        return ("true" if raw[0] else "false"), i + 1
    return str(int(parts[i][0])), i + 1


def dump(path: str) -> str:
    reader = GGUFReader(path)
    lines = []
    version = int(reader.fields["GGUF.version"].parts[0][0])
    lines.append("version %d" % version)
    lines.append("alignment %d" % int(reader.alignment))
    lines.append("data_offset %d" % int(reader.data_offset))
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue  # the package's own entries for header fields
        # parts: key length, key bytes, value type, then the value's parts.
        vtype = GGUFValueType(int(field.parts[2][0]))
        text, end = decode(field.parts, 3, vtype)
        if end != len(field.parts):
            raise ValueError("key %s: %d parts left over" % (name, len(field.parts) - end))
        lines.append("kv %s %s %s" % (quote(field.parts[1].tobytes()), TYPE_NAMES[int(vtype)], text))
    data = reader.data
    for t in reader.tensors:
        start = int(t.data_offset)
        nbytes = int(t.n_bytes)
        digest = hashlib.sha256(data[start:start + nbytes].tobytes()).hexdigest()
        shape = ",".join(str(int(d)) for d in t.shape)
        lines.append("tensor %s %s [%s] offset=%d file_offset=%d nbytes=%d sha256=%s" % (
            quote(t.name.encode("utf-8")), t.tensor_type.name, shape,
            start - int(reader.data_offset), start, nbytes, digest))
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) != 2:
        sys.stderr.write("usage: gguf_check.py FILE\n")
        return 2
    try:
        sys.stdout.write(dump(sys.argv[1]))
    except Exception as e:  # report any reader failure as a plain error
        sys.stderr.write("gguf_check: %s: %s\n" % (sys.argv[1], e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
