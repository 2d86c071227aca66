#!/usr/bin/env python3
# Writes tests/fixtures/ggml/<type>.bin: raw GGML blocks plus the float32 values
# that gguf-py (gguf.quants.dequantize, numpy) computes from them; the C++
# dequantizers must reproduce them bit for bit (tests/quant/ggml/dequant_test.cc).
# Types found in the local models use a few rows of a real tensor; the others use
# random blocks from a fixed seed. Usage: scripts/make-ggml-fixtures.py [models_dir]
#
# File format (all little-endian):
#   char[4] "TKVG"; u32 format_version (1); u32 ggml type id; u32 n_rows; u32 n_elems per row;
#   u32 source_len; char[source_len] source (utf-8, e.g. "model.gguf:tensor rows 0,1");
#   u8  blocks[n_rows * row_bytes]; f32 values[n_rows * n_elems]
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "ggml")
MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"]
MAX_ELEMS = 4096  # per fixture: keeps all fixtures together well under 1 MB
ALL_TYPES = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]


def write_fixture(qtype, raw_rows, n_elems, source):
    raw = np.ascontiguousarray(raw_rows, dtype=np.uint8)
    n_rows = raw.shape[0]
    vals = dequantize(raw, qtype).astype(np.float32, copy=False).reshape(n_rows, n_elems)
    assert np.all(np.isfinite(vals)), f"{qtype.name}: non-finite reference values"
    src = source.encode()
    path = os.path.join(OUT, f"{qtype.name.lower()}.bin")
    with open(path, "wb") as f:
        f.write(b"TKVG" + struct.pack("<5I", 1, int(qtype), n_rows, n_elems, len(src)) + src)
        f.write(raw.tobytes())
        f.write(vals.astype("<f4").tobytes())
    print(f"{path}: {n_rows} x {n_elems} from {source}")


def from_model(models_dir, qtype):
    for model in MODELS:
        path = os.path.join(models_dir, model)
        if not os.path.exists(path):
            continue
        for t in GGUFReader(path).tensors:
            if t.tensor_type != qtype:
                continue
            n_elems = int(t.shape[0])
            n_rows_total = int(t.n_elements) // n_elems
            block, type_bytes = GGML_QUANT_SIZES[qtype]
            row_bytes = n_elems // block * type_bytes
            n_rows = max(1, min(4, MAX_ELEMS // n_elems, n_rows_total))
            picks = sorted(set(np.linspace(0, n_rows_total - 1, n_rows).astype(int).tolist()))
            flat = t.data.view(np.uint8).reshape(-1)
            raw = np.stack([flat[r * row_bytes:(r + 1) * row_bytes] for r in picks])
            write_fixture(qtype, raw, n_elems, f"{model}:{t.name} rows {','.join(map(str, picks))}")
            return True
    return False


def random_f16_scales(rng, n):
    # A mix of ordinary, tiny (subnormal), zero, negative and large fp16 scales.
    mag = rng.choice([1e-3, 1e-2, 0.1, 1.0], size=n) * rng.uniform(0.1, 1.0, size=n)
    d = (mag * rng.choice([-1.0, 1.0], size=n)).astype(np.float16)
    d[0] = np.float16(0.0)
    if n > 1:
        d[1] = np.frombuffer(struct.pack("<H", 0x0003), dtype=np.float16)[0]  # subnormal
    if n > 2:
        d[2] = np.float16(1024.0)
    return d.view(np.uint8).reshape(n, 2)


# Byte offsets of the fp16 scale fields in each block (ggml-common.h).
F16_FIELDS = {T.Q4_0: [0], T.Q5_1: [0, 2], T.Q2_K: [80, 82], T.Q3_K: [108], T.Q5_K: [0, 2]}


def random_blocks(rng, qtype):
    if qtype == T.F16:
        bits = rng.integers(0, 1 << 16, size=MAX_ELEMS // 2, dtype=np.uint32)
        bits = bits[(bits & 0x7C00) != 0x7C00].astype(np.uint16)  # finite: subnormals kept, inf/nan dropped
        n = bits.size // 32 * 32
        return bits[:n].view(np.uint8).reshape(1, -1), n
    if qtype == T.BF16:
        bits = rng.integers(0, 1 << 16, size=MAX_ELEMS // 2, dtype=np.uint32)
        bits = bits[(bits & 0x7F80) != 0x7F80].astype(np.uint16)
        n = bits.size // 32 * 32
        return bits[:n].view(np.uint8).reshape(1, -1), n
    block, type_bytes = GGML_QUANT_SIZES[qtype]
    n_blocks = max(8, MAX_ELEMS // 2 // block)
    raw = rng.integers(0, 256, size=(n_blocks, type_bytes), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        raw[:, off:off + 2] = random_f16_scales(rng, n_blocks)
    n_rows = 2
    return raw.reshape(n_rows, -1), n_blocks * block // n_rows


def main():
    models_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/turbokv/models")
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240607)
    for qtype in ALL_TYPES:
        if qtype in F16_FIELDS or qtype in (T.F16, T.BF16) or not from_model(models_dir, qtype):
            if qtype not in F16_FIELDS and qtype not in (T.F16, T.BF16):
                sys.exit(f"{qtype.name}: no tensor of this type in {models_dir} and no random generator")
            raw, n_elems = random_blocks(rng, qtype)
            write_fixture(qtype, raw, n_elems, f"random blocks, numpy default_rng(20240607), {T(qtype).name}")


if __name__ == "__main__":
    main()
