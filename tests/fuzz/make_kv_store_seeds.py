#!/usr/bin/env python3
# Writes seeds for kv_store_fuzz into tests/fuzz/corpus/kv_store_fuzz: KV snapshot
# files (format v1, src/kvcache/kv_store.cc, docs/kv-format.md "Snapshots") for
# the fuzz target's small bf16 cache (2 layers, 2 kv heads, head_dim 64, page 4),
# with zero checksums and control byte 0x01 so the target reseals them first.
import os, struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "kv_store_fuzz")
NO_END = (2**63 - 1) // 4
LAYERS, HEADS, D, PAGE = 2, 2, 64, 4
ROW = 4 * D  # bf16 K and V


def snapshot(n_tokens, scheme="bf16", kind=0, bits=(16, 16), stores=None, model_id=7, version=1):
    stores = stores if stores is not None else [(0, NO_END, LAYERS, ROW, kind, bits[0], bits[1])]
    sb = scheme.encode()
    h = b"TKVSNAP\0" + struct.pack("<II", version, 0) + struct.pack("<QI", model_id, len(sb)) + sb
    h += struct.pack("<7i", kind, bits[0], bits[1], D, LAYERS, HEADS, PAGE)
    h += struct.pack("<BBHq", 1, 0, 0, 0) + struct.pack("<I", len(stores))
    for s in stores:
        h += struct.pack("<qq5i", *s)
    h += struct.pack("<q", n_tokens) + struct.pack(f"<{n_tokens}i", *range(1, n_tokens + 1))
    h = h[:12] + struct.pack("<I", len(h)) + h[16:]
    body = b""
    for (begin, end, layers, row, *_rest) in stores:
        local = max(0, min(n_tokens - begin, end - begin))
        for _ in range(layers):
            for p in range(0, local, PAGE):
                rows = min(PAGE, local - p)
                body += bytes((i * 7 + p) & 0xFF for i in range(HEADS * rows * row)) + b"\0" * 8
    return b"\x01" + h + b"\0" * 8 + body


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "empty.tkv": snapshot(0),
        "one.tkv": snapshot(1),
        "six.tkv": snapshot(6),
        "nine.tkv": snapshot(9),
        "turbo.tkv": snapshot(3, "turbo:k8v3", 2, (8, 3), [(0, NO_END, LAYERS, 88, 2, 8, 3)]),
        "two-stores.tkv": snapshot(7, "turbo:k8v3+bf16<4", 2, (8, 3),
                                   [(0, 4, LAYERS, ROW, 0, 16, 16), (4, NO_END, LAYERS, 88, 2, 8, 3)]),
        "version2.tkv": snapshot(2, version=2),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
