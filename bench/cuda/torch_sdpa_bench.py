#!/usr/bin/env python3
# PyTorch bf16 scaled_dot_product_attention decode on the shapes of tkv_cuda_bench
# (q [B,32,1,128], K/V [B,8,T,128], enable_gqa), timed like it (CUDA events, median),
# merged with the turbokv rows into one JSON and printed as a table with speedups.
# Usage (GPU machine): torch_sdpa_bench.py turbokv.json merged.json
import json, sys
import torch
import torch.nn.functional as F

_scratch = None

def median_us(fn, iters, warm=3, flush=True):
    # As tkv_cuda_bench: reading 256 MB before each call evicts L2 (clean lines) and hides
    # the host's launch latency (GPU time); flush=False: idle GPU, launch latency included.
    global _scratch
    if flush and _scratch is None:
        _scratch = torch.randint(0, 2**31 - 1, (64 << 20,), dtype=torch.int32, device="cuda")
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for i in range(iters):
        if flush:
            _scratch.max()  # a read of all 256 MB, one scalar written
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2] * 1e3

def main():
    src, dst = sys.argv[1], sys.argv[2]
    j = json.load(open(src))
    copy = j["copy_gbs"]
    shapes = sorted({(r["batch"], r["ctx"]) for r in j["rows"]})
    hq, hkv, d = 32, 8, 128
    for b, t in shapes:
        q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, hkv, t, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, hkv, t, d, device="cuda", dtype=torch.bfloat16)
        fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        n = 10 if b * t >= 32 * 65536 else 30
        us, us_idle = median_us(fn, n), median_us(fn, n, flush=False)
        nbytes = 2 * b * hkv * t * d * 2 + q.numel() * 2
        gbs = nbytes / (us * 1e-6) / 1e9
        # A decode step's attention part, as tkv_cuda_bench --step: the new token's K/V written
        # into the last position of the cache (two copy kernels), then SDPA.
        kn = torch.randn(b, hkv, d, device="cuda", dtype=torch.bfloat16)
        vn = torch.randn(b, hkv, d, device="cuda", dtype=torch.bfloat16)
        def step():
            k[:, :, t - 1].copy_(kn)
            v[:, :, t - 1].copy_(vn)
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        step_us = median_us(step, n)
        j["rows"].append({"impl": "torch-sdpa", "scheme": "bf16", "batch": b, "ctx": t, "us": us, "gbs": gbs, "us_idle": us_idle,
                          "pct_copy": 100 * gbs / copy, "bytes": nbytes, "step_us": step_us})
        print(f"torch-sdpa bf16  B={b:<3} ctx={t:<6} {us:9.1f} us {gbs:7.0f} GB/s {100 * gbs / copy:5.1f}% copy  (idle GPU {us_idle:.1f} us; step {step_us:.1f} us)", flush=True)
        del q, k, v, kn, vn
        torch.cuda.empty_cache()
    j["torch"] = torch.__version__
    json.dump(j, open(dst, "w"), indent=1)
    sdpa = {(r["batch"], r["ctx"]): r["us"] for r in j["rows"] if r["impl"] == "torch-sdpa"}
    idle = {(r["batch"], r["ctx"]): r.get("us_idle", 0) for r in j["rows"] if r["impl"] == "torch-sdpa"}
    print("\n| scheme | batch | ctx | µs | GB/s | % copy | speedup vs SDPA | idle-GPU µs | idle-GPU speedup |\n|---|---|---|---|---|---|---|---|---|")
    for r in j["rows"]:
        if r["impl"] != "turbokv":
            continue
        sp = sdpa[(r["batch"], r["ctx"])] / r["us"]
        ri = r.get("us_idle", 0)
        spi = idle[(r["batch"], r["ctx"])] / ri if ri else 0
        print(f"| {r['scheme']} | {r['batch']} | {r['ctx']} | {r['us']:.1f} | {r['gbs']:.0f} | {r['pct_copy']:.1f} | {sp:.2f}x | {ri:.1f} | {spi:.2f}x |")
    for b, t in shapes:
        print(f"| torch-sdpa bf16 | {b} | {t} | {sdpa[(b, t)]:.1f} | | | 1.00x | {idle[(b, t)]:.1f} | 1.00x |")

if __name__ == "__main__":
    main()
