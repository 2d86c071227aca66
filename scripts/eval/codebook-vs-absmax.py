#!/usr/bin/env python3
# Value-quantizer MSE on N(0,1) data in 32-element groups: TurboQuant's RMS scale +
# Lloyd-Max codebook (the goldens' centroids) against llama.cpp's q4_0-style rule
# (scale = signed absmax / -2^(b-1), levels -2^(b-1) .. 2^(b-1)-1). Both store one
# fp16 scale per 32 (+0.5 bit/element). Quoted in docs/eval/README.md.
import json, os
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
g = json.load(open(os.path.join(ROOT, "tests", "data", "goldens", "turboquant_tables.json")))
x = np.random.default_rng(0).standard_normal((200000, 32)).astype(np.float32)
for b in (3, 4):
    c = np.array(g[f"centroids_{b}"], dtype=np.float32)
    s = np.sqrt((x ** 2).mean(1, keepdims=True))
    idx = np.abs((x / s)[..., None] - c).argmin(-1)
    mse_t = ((c[idx] * s - x) ** 2).mean()
    L = 2 ** (b - 1)
    mx = x[np.arange(len(x)), np.abs(x).argmax(1)][:, None]
    d = mx / -L
    mse_s = ((np.clip(np.round(x / d), -L, L - 1) * d - x) ** 2).mean()
    print(f"{b}-bit, groups of 32: RMS + Lloyd-Max MSE {mse_t:.4f}   signed-absmax (q{b}_0 rule) MSE {mse_s:.4f}")
