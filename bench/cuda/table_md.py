#!/usr/bin/env python3
# docs/bench/cuda.json -> the decode table of docs/bench/cuda.md (markdown on stdout): every
# turbokv and SDPA row of "rows" with GB/s, % of copy, the speedup over SDPA of the same call
# (flushed and idle-GPU), and optionally the same row's µs from an earlier table of the
# same JSON layout (another cuda.json, e.g. from git history, and a column title).
# Usage: table_md.py [cuda.json] [earlier.json title]
import json, os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs", "bench", "cuda.json")
d = json.load(open(src))
prev_rows = json.load(open(sys.argv[2]))["rows"] if len(sys.argv) > 3 else []
prev_title = sys.argv[3] if len(sys.argv) > 3 else ""
sdpa = {(r["batch"], r["ctx"]): r for r in d["rows"] if r["impl"] == "torch-sdpa"}
prev = {(r["impl"], r["scheme"], r["batch"], r["ctx"]): r["us"] for r in prev_rows}
extra = f" {prev_title} |" if prev_title else ""
print(f"| impl | scheme | batch | ctx | kernel | µs | GB/s (bytes read) | % of copy | vs SDPA | idle-GPU µs (vs SDPA) |{extra}")
print("|---|---|---|---|---|---|---|---|---|---|" + ("---|" if extra else ""))
k = lambda t: f"{t // 1024}k"
for r in d["rows"]:
    s = sdpa[(r["batch"], r["ctx"])]
    sp = s["us"] / r["us"]
    idle = r.get("us_idle", 0)
    idle_txt = f"{idle:.1f}" + (f" ({s['us_idle'] / idle:.2f}×)" if r["impl"] == "turbokv" and idle else "")
    p = prev.get((r["impl"], r["scheme"], r["batch"], r["ctx"]))
    print(f"| {r['impl']} | {r['scheme']} | {r['batch']} | {k(r['ctx'])} | {r.get('kernel', '—')} | {r['us']:.1f} | "
          f"{r['gbs']:.0f} | {r['pct_copy']:.1f} | {sp:.2f}× | {idle_txt} |" + (f" {'' if p is None else f'{p:.1f}'} |" if extra else ""))
