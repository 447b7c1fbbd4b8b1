#!/usr/bin/env python3
"""Writes tests/quant/golden/: reference data for minfer's quant tests.

The expected values come from the `gguf` Python package (gguf-py, numpy), an
implementation independent of minfer's C++ code:

  dequant_<TYPE>.bin  random raw blocks and gguf.quants.dequantize's output.
                      Random bytes everywhere, except that f16 scale fields are
                      overwritten with finite values in [-2, 2] plus edge values
                      (0, -0, subnormals, the smallest normal, +-2) so that the
                      outputs are finite. Q8_1 and Q8_K are not in gguf-py; their
                      expected values are numpy's float32 d * q (see below).
  quant_<TYPE>.bin    fixed inputs (Gaussian rows of several magnitudes plus
                      edge blocks: zeros, constants, exact rounding ties, equal
                      opposite extremes, f16 overflow/underflow) and
                      gguf.quants.quantize's bytes for Q4_0, Q4_1, Q5_0, Q5_1,
                      Q8_0, F16 and BF16. Q8_1 and Q8_K come from the short
                      numpy transcriptions of ggml's published activation
                      quantizers in this file.
  dequant_MXFP4.bin   random E2M1 nibbles under every E8M0 exponent byte 0..255
                      (and random blocks), dequantized by gguf-py (e = 254, 255
                      give +-inf for the largest codes, as ggml does).
  quant_MXFP4.bin     gguf-py's MXFP4 quantizer on Gaussian blocks of many
                      magnitudes, exact E2M1 grid points and midpoints (ties),
                      and blocks whose largest |x| sits just below a power of
                      two (where the f32 log2 of the shared exponent rounds up).
                      Blocks with largest |x| below 2^-125 are left out: ggml's
                      exponent is undefined there (gguf-py wraps it, minfer
                      clamps it to 0; tests/quant checks minfer's rule).
  quant_sizes.txt     gguf.constants.GGML_QUANT_SIZES: "NAME id block type_size".

The MXFP4 files draw from their own generator (seed MXFP4_SEED), so adding
them left every other file byte for byte as it was.

Binary files are little-endian: magic (4 bytes, b"MQGD" or b"MQGQ"), u32 version
(1), u32 ggml type id, u32 element count n, u32 byte count m, then
  MQGD: m raw bytes, n float32 expected outputs;
  MQGQ: n float32 inputs, m expected raw bytes.

Usage: python3 tools/gen_quant_goldens.py [output_dir]
"""

import struct
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T

SEED = 20240521
MXFP4_SEED = 20250806
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests/quant/golden"

TABLE_TYPES = [
    "F32", "F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K",
    "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",
    "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16", "TQ1_0", "TQ2_0",
    "MXFP4",
]

# Byte offsets of the f16 scale fields inside each block.
F16_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q8_1": [0, 2],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
}
EDGE_F16 = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x4000, 0xC000, 0x3C00]


def write_golden(path: Path, magic: bytes, qtype: T, n: int, first: bytes, second: bytes):
    m = len(first) if magic == b"MQGD" else len(second)
    with open(path, "wb") as f:
        f.write(magic + struct.pack("<IIII", 1, int(qtype), n, m) + first + second)


# gguf-py's GGML_QUANT_SIZES still lists Q8_1 with f32 d and s (40 bytes); ggml's
# block_q8_1 holds two f16s (36 bytes). Q8_1 never appears in GGUF files, so only
# this table entry is stale; quant_sizes.txt keeps gguf-py's value verbatim.
BLOCK_BYTES = {"Q8_1": 36}


def random_blocks(rng, name: str, nblocks: int) -> np.ndarray:
    type_size = BLOCK_BYTES.get(name, GGML_QUANT_SIZES[T[name]][1])
    raw = rng.integers(0, 256, size=(nblocks, type_size), dtype=np.uint8)
    for off in F16_FIELDS.get(name, []):
        vals = rng.uniform(-2.0, 2.0, size=nblocks).astype(np.float16).view(np.uint16)
        for b in range(min(nblocks, len(EDGE_F16))):  # every edge value once per field
            vals[b] = EDGE_F16[(b + off) % len(EDGE_F16)]
        raw[:, off:off + 2] = vals.reshape(-1, 1).view(np.uint8).reshape(nblocks, 2)
    if name == "Q8_K":
        d = rng.uniform(-2.0, 2.0, size=nblocks).astype(np.float32)
        d[:4] = [0.0, -0.0, np.float32(1e-40), np.float32(2.0)]
        raw[:, 0:4] = d.view(np.uint8).reshape(nblocks, 4)
    return raw


def numpy_dequant_q8(raw: np.ndarray, name: str) -> np.ndarray:
    """float32 d * q for the two activation formats gguf-py lacks."""
    if name == "Q8_K":
        d = raw[:, 0:4].copy().view(np.float32)
        q = raw[:, 4:260].copy().view(np.int8).astype(np.float32)
    else:  # Q8_1: f16 d, f16 s, int8 qs[32]
        d = raw[:, 0:2].copy().view(np.float16).astype(np.float32)
        q = raw[:, 4:36].copy().view(np.int8).astype(np.float32)
    return (d * q).astype(np.float32)


def gen_dequant(rng):
    for name, nblocks in [("Q4_0", 16), ("Q4_1", 16), ("Q5_0", 16), ("Q5_1", 16), ("Q8_0", 16),
                          ("Q8_1", 16), ("Q2_K", 8), ("Q3_K", 8), ("Q4_K", 8), ("Q5_K", 8),
                          ("Q6_K", 8), ("Q8_K", 8)]:
        raw = random_blocks(rng, name, nblocks)
        if name in ("Q8_1", "Q8_K"):
            out = numpy_dequant_q8(raw, name)
        else:
            out = gguf.quants.dequantize(raw, T[name])
        out = np.ascontiguousarray(out, dtype=np.float32).reshape(-1)
        assert np.all(np.isfinite(out)), name
        write_golden(OUT / f"dequant_{name}.bin", b"MQGD", T[name], out.size, raw.tobytes(),
                     out.tobytes())
    # Plain float formats: every special class plus random bit patterns.
    f16 = rng.integers(0, 1 << 16, size=1024, dtype=np.uint16)
    f16[:16] = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00,
                0x7E00, 0x7C01, 0xFE00, 0x3C00, 0x3555, 0x0200]
    write_golden(OUT / "dequant_F16.bin", b"MQGD", T.F16, f16.size, f16.tobytes(),
                 f16.view(np.float16).astype(np.float32).tobytes())
    bf16 = rng.integers(0, 1 << 16, size=1024, dtype=np.uint16)
    bf16[:8] = [0x0000, 0x8000, 0x0001, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x3F80]
    write_golden(OUT / "dequant_BF16.bin", b"MQGD", T.BF16, bf16.size, bf16.tobytes(),
                 gguf.quants.dequantize(bf16.view(np.uint8), T.BF16).astype(np.float32).tobytes())
    f32 = rng.standard_normal(256).astype(np.float32)
    write_golden(OUT / "dequant_F32.bin", b"MQGD", T.F32, f32.size, f32.tobytes(), f32.tobytes())


def block_inputs(rng, block: int, nrandom: int) -> np.ndarray:
    """Gaussian blocks of varied magnitude followed by edge-case blocks."""
    scales = np.array([1.0, 1e-3, 30.0, 1e-6][:4], dtype=np.float32)
    rows = [rng.standard_normal(block).astype(np.float32) * scales[i % 4] for i in range(nrandom)]
    ties = np.array([127.0] + [k + 0.5 for k in range(-60, 60, 4)], dtype=np.float32)
    edge = [
        np.zeros(block, np.float32),
        np.full(block, 0.7, np.float32),
        np.full(block, -0.7, np.float32),
        np.resize(ties, block).astype(np.float32),            # Q8_0: d = 1, x * id lands on .5
        np.resize(np.array([-3.0, 3.0, 1.0, -1.0], np.float32), block),  # equal opposite extremes
        np.resize(np.array([3.0, -3.0, 0.5], np.float32), block),
        (rng.standard_normal(block) * 1e6).astype(np.float32),  # d overflows f16 for 4/5-bit
    ]
    return np.concatenate(rows + edge).astype(np.float32)


def q8_1_numpy(x: np.ndarray) -> bytes:
    """ggml's quantize_row_q8_1_ref: Q8_0's rounding plus s = f16(sum(q) * d)."""
    blocks = x.reshape(-1, 32)
    out = bytearray()
    for b in blocks:
        d = np.float32(np.abs(b).max() / np.float32(127))
        inv = np.float32(1) / d if d != 0 else np.float32(0)
        v = (b * inv).astype(np.float32)
        q = gguf.quants.np_roundf(v).astype(np.int8)  # exact half-away-from-zero
        s = np.float32(np.float32(int(q.astype(np.int32).sum())) * d)
        out += np.float16(d).tobytes() + np.float16(s).tobytes() + q.tobytes()
    return bytes(out)


def q8_k_numpy(x: np.ndarray) -> bytes:
    """ggml's quantize_row_q8_K_ref: signed iscale = -127 / max, round half to even."""
    out = bytearray()
    for b in x.reshape(-1, 256):
        i = int(np.argmax(np.abs(b)))  # first maximum, like the strict '>' scan
        mx = b[i]
        if mx == 0:
            out += np.float32(0).tobytes() + bytes(256) + bytes(32)
            continue
        iscale = np.float32(np.float32(-127.0) / mx)
        q = np.minimum(np.rint((iscale * b).astype(np.float32)), 127).astype(np.int8)
        bsums = q.astype(np.int32).reshape(16, 16).sum(axis=1).astype(np.int16)
        out += np.float32(np.float32(1) / iscale).tobytes() + q.tobytes() + bsums.tobytes()
    return bytes(out)


def gen_quant(rng):
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        for name in ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]:
            x = block_inputs(rng, 32, 24)
            q = gguf.quants.quantize(x, T[name])
            write_golden(OUT / f"quant_{name}.bin", b"MQGQ", T[name], x.size, x.tobytes(), q.tobytes())
        x = block_inputs(rng, 32, 24)
        write_golden(OUT / "quant_Q8_1.bin", b"MQGQ", T.Q8_1, x.size, x.tobytes(), q8_1_numpy(x))
        x = np.concatenate([rng.standard_normal(512).astype(np.float32),
                            (rng.standard_normal(256) * 1e-4).astype(np.float32),
                            np.zeros(256, np.float32),
                            np.resize(np.array([-127.0] + [k + 0.5 for k in range(-50, 50, 3)],
                                               np.float32), 256)]).astype(np.float32)
        write_golden(OUT / "quant_Q8_K.bin", b"MQGQ", T.Q8_K, x.size, x.tobytes(), q8_k_numpy(x))
        x = float_edge_inputs(rng)
        write_golden(OUT / "quant_F16.bin", b"MQGQ", T.F16, x.size, x.tobytes(),
                     gguf.quants.quantize(x, T.F16).tobytes())
        write_golden(OUT / "quant_BF16.bin", b"MQGQ", T.BF16, x.size, x.tobytes(),
                     gguf.quants.quantize(x, T.BF16).tobytes())


def float_edge_inputs(rng) -> np.ndarray:
    """f32 values that exercise f16/bf16 rounding: ties, overflow, subnormals."""
    bits = [
        0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
        0x7F7FFFFF, 0x00000001, 0x3F808000, 0x3F818000, 0x3F80FFFF, 0x477FE000,
        0x477FEFFF, 0x477FF000, 0x477FFFFF, 0x38800000, 0x387FE000, 0x33000000,
        0x33000001, 0x33800000, 0x33C00000, 0x34200000, 0xB3000001, 0x38801000,
        0x38803000, 0x3F802000, 0x3F806000,
    ]
    edge = np.array(bits, dtype=np.uint32).view(np.float32)
    mags = np.exp(rng.uniform(-30, 12, size=512)).astype(np.float32)
    rand = (mags * np.where(rng.random(512) < 0.5, -1, 1)).astype(np.float32)
    rbits = rng.integers(0, 1 << 32, size=256, dtype=np.uint64).astype(np.uint32)
    rbits = rbits[(rbits & 0x7F800000) != 0x7F800000]  # no inf/NaN among random bits
    return np.concatenate([edge, rand, rbits.view(np.float32)]).astype(np.float32)


def gen_mxfp4(rng):
    """MXFP4 goldens: dequantization over every exponent byte, quantization."""
    raw = rng.integers(0, 256, size=(256 + 16, 17), dtype=np.uint8)
    raw[:256, 0] = np.arange(256, dtype=np.uint8)  # each E8M0 byte once
    with np.errstate(over="ignore"):  # e = 255: 2^127 times 8 or 12 overflows to inf, as in ggml
        out = np.ascontiguousarray(gguf.quants.dequantize(raw, T.MXFP4), dtype=np.float32)
    out = out.reshape(-1)
    assert not np.any(np.isnan(out))
    write_golden(OUT / "dequant_MXFP4.bin", b"MQGD", T.MXFP4, out.size, raw.tobytes(), out.tobytes())

    blocks = []
    for i in range(48):  # Gaussian blocks from 2^-60 to 2^60 times N(0, 1)
        blocks.append(rng.standard_normal(32) * np.float32(2.0 ** rng.integers(-60, 61)))
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float32)
    mids = (grid[1:] + grid[:-1]) / 2
    for scale in [1.0, 2.0 ** -20, 2.0 ** 30]:
        blocks.append(np.resize(np.concatenate([grid, -grid]), 32) * np.float32(scale))
        blocks.append(np.resize(np.concatenate([mids, -mids, [7.0, -7.0]]), 32) * np.float32(scale))
    for k in [-120, -40, -3, 0, 2, 3, 7, 20, 100, 127]:  # amax just below 2^(k+1)
        for j in [1, 2, 5]:
            b = rng.standard_normal(32).astype(np.float32) * np.float32(2.0 ** (k - 2))
            b[int(rng.integers(0, 32))] = np.float32((2 - j * 2.0 ** -23) * 2.0 ** k)
            blocks.append(b)
    blocks.append(np.zeros(32, np.float32))
    blocks.append(np.full(32, -0.0, np.float32))
    blocks.append(np.full(32, 0.7, np.float32))
    x = np.concatenate(blocks).astype(np.float32)
    assert np.all(np.abs(x.reshape(-1, 32)).max(axis=1)[np.abs(x.reshape(-1, 32)).max(axis=1) > 0]
                  >= np.float32(2.0 ** -125))
    with np.errstate(over="ignore"):
        q = gguf.quants.quantize(x, T.MXFP4)
    write_golden(OUT / "quant_MXFP4.bin", b"MQGQ", T.MXFP4, x.size, x.tobytes(), q.tobytes())


def gen_sizes():
    lines = []
    for name in TABLE_TYPES:
        t = T[name]
        block, size = GGML_QUANT_SIZES[t]
        lines.append(f"{name} {int(t)} {block} {size}")
    (OUT / "quant_sizes.txt").write_text("\n".join(lines) + "\n")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    gen_dequant(rng)
    gen_quant(rng)
    gen_mxfp4(np.random.default_rng(MXFP4_SEED))
    gen_sizes()
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(list(OUT.iterdir()))} files, {total} bytes, to {OUT}")


if __name__ == "__main__":
    main()
