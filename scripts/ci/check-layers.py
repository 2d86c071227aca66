#!/usr/bin/env python3
"""Checks that src/<layer> files include only their own layer or layers below
(DESIGN.md: base → device → quant → kernels → tensor → ops → kvcache → model →
runtime → api → {server, cli}; side branches io, tokenizer, sampling, eval).
Exit 1 with a list of upward includes."""
import pathlib, re, sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
# layer -> layers it may include (besides itself): the table the build enforces
# (cmake/TkvLayers.cmake, set(TKV_LAYER_<layer> ...)).
TABLE = re.compile(r"^set\(TKV_LAYER_([a-z_]+)\s*(.*)\)\s*$", re.M)
ALLOWED = {m.group(1): set(m.group(2).replace('""', "").split())
           for m in TABLE.finditer((ROOT / "cmake" / "TkvLayers.cmake").read_text())}
INC = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
bad = []
for layer, allowed in ALLOWED.items():
    d = ROOT / "src" / layer
    if not d.is_dir():
        continue
    for f in d.rglob("*"):
        if f.suffix not in {".h", ".cc", ".cu", ".cuh", ".inc"}:
            continue
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = INC.match(line)
            if m and m.group(1) != layer and m.group(1) in ALLOWED and m.group(1) not in allowed:
                bad.append(f"{f.relative_to(ROOT)}:{n}: {layer} includes {m.group(1)}/")
unknown = sorted(p.name for p in (ROOT / "src").iterdir() if p.is_dir() and p.name not in ALLOWED)
if unknown:
    bad.append(f"src/ folders with no layer rule: {', '.join(unknown)} (add them to cmake/TkvLayers.cmake)")
for b in bad:
    print(b)
print(f"[layers] {'FAIL' if bad else 'ok'}: {len(bad)} upward include(s)")
sys.exit(1 if bad else 0)
