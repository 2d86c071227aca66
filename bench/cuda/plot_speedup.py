#!/usr/bin/env python3
# docs/bench/cuda.json -> docs/bench/cuda-speedup.svg: speedup of each turbokv scheme over
# PyTorch SDPA bf16 (same call, cold L2) per (batch, context), grouped bars; dashed lines
# at 1x, at the 2.3x target and at 2.56x (k8v3's byte ratio to bf16: the memory-bound
# ceiling). SVG written directly (no matplotlib on the dev machine).
# Usage: plot_speedup.py [cuda.json] [out.svg]
import json, os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs", "bench", "cuda.json")
out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "docs", "bench", "cuda-speedup.svg")
d = json.load(open(src))
sdpa = {(r["batch"], r["ctx"]): r["us"] for r in d["rows"] if r["impl"] == "torch-sdpa"}
schemes = [("k8v3", "#1f77b4"), ("k8v4", "#6baed6"), ("k4v3", "#2ca02c"), ("k4v2", "#98df8a"), ("bf16", "#7f7f7f")]
shapes = sorted(sdpa)
sp = {(r["scheme"], r["batch"], r["ctx"]): sdpa[(r["batch"], r["ctx"])] / r["us"]
      for r in d["rows"] if r["impl"] == "turbokv"}
W, H, L, R, T, B = 900, 380, 60, 20, 40, 70
ymax = 3.0
y = lambda v: T + (H - T - B) * (1 - v / ymax)
gw = (W - L - R) / len(shapes)
bw = gw * 0.8 / len(schemes)
o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
     f'<rect width="{W}" height="{H}" fill="white"/>',
     f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="13">Decode attention on the H200: speedup over PyTorch SDPA bf16 '
     f'(Llama-3-8B shape, page 64, cold L2)</text>']
for v in [0, 0.5, 1, 1.5, 2, 2.5, 3]:
    o.append(f'<line x1="{L}" x2="{W - R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>')
    o.append(f'<text x="{L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}x</text>')
for v, lab in [(1.0, "SDPA"), (2.3, "target 2.3x"), (2.56, "k8v3 byte ratio 2.56x")]:
    o.append(f'<line x1="{L}" x2="{W - R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#d62728" stroke-dasharray="4 3"/>')
    o.append(f'<text x="{W - R - 4}" y="{y(v) - 3:.1f}" text-anchor="end" fill="#d62728">{lab}</text>')
for i, (b, c) in enumerate(shapes):
    x0 = L + i * gw + gw * 0.1
    for j, (s, col) in enumerate(schemes):
        v = sp.get((s, b, c))
        if v is None:
            continue
        o.append(f'<rect x="{x0 + j * bw:.1f}" y="{y(v):.1f}" width="{bw - 1:.1f}" height="{y(0) - y(v):.1f}" fill="{col}">'
                 f'<title>{s} B={b} ctx={c}: {v:.2f}x</title></rect>')
    o.append(f'<text x="{L + (i + 0.5) * gw:.1f}" y="{y(0) + 16:.1f}" text-anchor="middle">B={b}</text>')
    o.append(f'<text x="{L + (i + 0.5) * gw:.1f}" y="{y(0) + 30:.1f}" text-anchor="middle">{c // 1024}k</text>')
for j, (s, col) in enumerate(schemes):
    lx = L + j * 110
    o.append(f'<rect x="{lx}" y="{H - 22}" width="12" height="12" fill="{col}"/>')
    o.append(f'<text x="{lx + 16}" y="{H - 12}">turbokv {s}</text>')
o.append("</svg>")
open(out, "w").write("\n".join(o) + "\n")
print("wrote", out)
