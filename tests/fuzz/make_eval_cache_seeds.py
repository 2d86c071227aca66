#!/usr/bin/env python3
# Writes seeds for eval_cache_fuzz into tests/fuzz/corpus/eval_cache_fuzz: valid-layout
# base-logits files (format in src/eval/base_logits.h) with zero checksums and
# control byte 0x01, so the fuzz target recomputes the checksums before parsing.
import math, os, struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "eval_cache_fuzz")


def record(target, argmax, probs, tail):
    logp = [math.log(p) for p in probs]
    ids = list(range(len(probs)))
    b = struct.pack("<iifdI", target, argmax, math.log(probs[target]) if target < len(probs) else -9.0, tail, len(ids))
    return b + struct.pack(f"<{len(ids)}i", *ids) + struct.pack(f"<{len(logp)}f", *logp)


def cache(key, n_vocab, records, k_min=1, k_max=8, mass=0.99):
    kb = key.encode()
    h = b"TKVBASE\0" + struct.pack("<II", 2, len(kb)) + kb
    h += struct.pack("<iiiIdqQ", n_vocab, k_min, k_max, 0, mass, len(records), 0)
    h += struct.pack("<Q", 0)
    return b"\x01" + h + b"".join(records)


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "empty.bin": cache("fuzz", 64, []),
        "one.bin": cache("fuzz", 64, [record(0, 0, [0.5, 0.25, 0.125], 0.125)]),
        "three.bin": cache("model=xxh3:0 corpus=xxh3:0:10 protocol=wikitext", 64,
                           [record(1, 0, [0.6, 0.3], 0.1), record(0, 0, [0.9], 0.1),
                            record(2, 0, [0.4, 0.3, 0.2, 0.1], 0.0)]),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
