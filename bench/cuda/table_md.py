#!/usr/bin/env python3
# docs/bench/cuda.json -> the decode table of docs/bench/cuda.md (markdown on stdout): every
# turbokv and SDPA row of "rows" with GB/s, % of copy, the speedup over SDPA of the same call
# (flushed and idle-GPU), and the same row's µs from an earlier table (key, column title).
# Usage: table_md.py [cuda.json] [prev key (run18_rows)] [prev title (run 18 µs)]
import json, os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs", "bench", "cuda.json")
prev_key = sys.argv[2] if len(sys.argv) > 2 else "run18_rows"
prev_title = sys.argv[3] if len(sys.argv) > 3 else "run 18 µs"
d = json.load(open(src))
sdpa = {(r["batch"], r["ctx"]): r for r in d["rows"] if r["impl"] == "torch-sdpa"}
prev = {(r["impl"], r["scheme"], r["batch"], r["ctx"]): r["us"] for r in d.get(prev_key, [])}
print(f"| impl | scheme | batch | ctx | kernel | µs | GB/s (bytes read) | % of copy | vs SDPA | idle-GPU µs (vs SDPA) | {prev_title} |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
k = lambda t: f"{t // 1024}k"
for r in d["rows"]:
    s = sdpa[(r["batch"], r["ctx"])]
    sp = s["us"] / r["us"]
    idle = r.get("us_idle", 0)
    idle_txt = f"{idle:.1f}" + (f" ({s['us_idle'] / idle:.2f}×)" if r["impl"] == "turbokv" and idle else "")
    p = prev.get((r["impl"], r["scheme"], r["batch"], r["ctx"]))
    print(f"| {r['impl']} | {r['scheme']} | {r['batch']} | {k(r['ctx'])} | {r.get('kernel', '—')} | {r['us']:.1f} | "
          f"{r['gbs']:.0f} | {r['pct_copy']:.1f} | {sp:.2f}× | {idle_txt} | {'' if p is None else f'{p:.1f}'} |")
