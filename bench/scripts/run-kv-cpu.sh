#!/usr/bin/env bash
# Issue 5 table: decode tok/s and attention time per token at several context
# depths, per KV scheme, fused and reference attention, one `turbokv bench` run
# per (model, path) so schemes sit side by side; writes docs/bench/kv-cpu.json/.md.
#   bench/scripts/run-kv-cpu.sh [THREADS=2]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
T="${1:-2}"
BIN="$ROOT/build/cpu-release/tools/turbokv"
MD="${TKV_MODEL_DIR:-$HOME/.cache/turbokv/models}"
OUT="$(mktemp -d)"
SCHEMES="bf16,8,4,turbo:k8v4,turbo:k8v3,turbo:k4v3"
run() {  # run NAME GGUF DEPTHS PATH  (the reference path re-dequantizes the whole cache every
  # token and layer, ~20-80x slower: fewer steps there so the table finishes in minutes)
  local n=32 r=2; [ "$4" = reference ] && n=4 r=1
  "$BIN" bench -m "$MD/$2" -p 0 -n $n -d "$3" -t "$T" -r $r --schemes "$SCHEMES" --kv-attn "$4" --json > "$OUT/$1-$4.json"
}
run smollm2 SmolLM2-135M-Instruct.Q4_1.gguf 512,2048,8192 fused
run smollm2 SmolLM2-135M-Instruct.Q4_1.gguf 8192 reference
run qwen2.5-1.5b qwen2.5-coder-1.5b-instruct-q4_k_m.gguf 512,2048,8192,16384 fused
run qwen2.5-1.5b qwen2.5-coder-1.5b-instruct-q4_k_m.gguf 8192 reference
python3 - "$OUT" "$ROOT/docs/bench" "$T" <<'PY'
import json, sys, glob, os
out, docs, T = sys.argv[1:4]
rows = []
for f in sorted(glob.glob(f"{out}/*.json")):
    name, path = os.path.basename(f)[:-5].rsplit("-", 1)
    for r in json.load(open(f))["rows"]:
        rows.append({"model": name, "scheme": r["scheme"], "ctx": r["depth"], "decode_tok_s": r["tok_s"],
                     "attn_us_per_tok": r["attn_us_per_tok"], "gbs": r["gbs"], "path": path})
json.dump({"threads": int(T), "rows": rows}, open(f"{docs}/kv-cpu.json", "w"), indent=1)
md = ["# KV schemes on the CPU: decode speed vs context", "",
      f"`bench/scripts/run-kv-cpu.sh {T}` ({T} threads; depth context = a prefill of random tokens, mapped in from the prefix cache for each test, "
      "then 32 decode steps, median of 2 after a warm-up; reference path: 4 steps, 1 run). attention = wall time of the KV write + ops::attention per token.", "",
      "| model | path | ctx | " + " | ".join(sorted({r['scheme'] for r in rows}, key=lambda s: s)) + " |", ""]
schemes = sorted({r['scheme'] for r in rows})
md = md[:-2] + ["| model | path | ctx | " + " | ".join(f"{s} tok/s (attn µs)" for s in schemes) + " |",
                "|---|---|---|" + "---|" * len(schemes)]
for (m, p, c) in sorted({(r["model"], r["path"], r["ctx"]) for r in rows}):
    cells = []
    for s in schemes:
        x = [r for r in rows if (r["model"], r["path"], r["ctx"], r["scheme"]) == (m, p, c, s)]
        cells.append(f"{x[0]['decode_tok_s']:.1f} ({x[0]['attn_us_per_tok']:.0f})" if x else "-")
    md.append(f"| {m} | {p} | {c} | " + " | ".join(cells) + " |")
open(f"{docs}/kv-cpu.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
