#!/usr/bin/env python3
# The three k8v3 target shapes, turbokv and PyTorch SDPA bf16 interleaved on one GPU:
# each round runs tkv_cuda_bench for a shape (its own process: the flushed median of 30
# calls) and then SDPA on the same shape (in this process, timed as torch_sdpa_bench.py),
# so every ratio compares two figures taken seconds apart on the same machine.
# Usage (GPU machine): target_ab.py <tkv_cuda_bench> [rounds (3)] [scheme (k8v3)]
import re, subprocess, sys
import torch
import torch.nn.functional as F
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_sdpa_bench import median_us

def main():
    bench, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    scheme = sys.argv[3] if len(sys.argv) > 3 else "k8v3"
    shapes = [(1, 131072), (8, 32768), (8, 131072)]
    hq, hkv, d = 32, 8, 128
    data = {}
    for b, t in shapes:
        data[(b, t)] = [torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for h, n in ((hq, 1), (hkv, t), (hkv, t))]
    ratios = {s: [] for s in shapes}
    for r in range(rounds):
        for b, t in shapes:
            out = subprocess.run([bench, "--scheme", scheme, "--batch", str(b), "--ctx", str(t), "--no-encode", "--no-copy",
                                  "--out", "/tmp/target_ab.json"], capture_output=True, text=True).stdout
            m = re.search(r"^turbokv\s.*?([0-9.]+) us", out, re.M)
            tkv = float(m.group(1))
            q, k, v = data[(b, t)]
            sdpa = median_us(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), 30)
            ratios[(b, t)].append(sdpa / tkv)
            print(f"round {r + 1}  B={b} ctx={t}  turbokv {scheme} {tkv:.1f} us  sdpa {sdpa:.1f} us  {sdpa / tkv:.3f}x", flush=True)
    for s, v in ratios.items():
        print(f"B={s[0]} ctx={s[1]}: {scheme} vs SDPA min {min(v):.3f}x median {sorted(v)[len(v) // 2]:.3f}x max {max(v):.3f}x")

if __name__ == "__main__":
    main()
