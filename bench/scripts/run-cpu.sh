#!/usr/bin/env bash
# Issue 4 speed table: `turbokv bench` beside `llama-bench` (same GGUF, same
# threads), pp512 and tg128, alternating the engines for ROUNDS rounds so
# machine drift hits both; writes docs/bench/cpu.json and docs/bench/cpu.md.
#   bench/scripts/run-cpu.sh [THREADS=2] [ROUNDS=2]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
T="${1:-2}"; ROUNDS="${2:-2}"
BIN="$ROOT/build/cpu-release/tools/turbokv"
LB="${TKV_PEER_DIR:-$HOME/.cache/turbokv/llama.cpp}/build/bin"
MD="${TKV_MODEL_DIR:-$HOME/.cache/turbokv/models}"
OUT="$(mktemp -d)"
MODELS=("smollm2:SmolLM2-135M-Instruct.Q4_1.gguf" "qwen2.5-1.5b:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" "gemma3:gemma-3-270m-q4_k_m.gguf")
for r in $(seq 1 "$ROUNDS"); do
  for m in "${MODELS[@]}"; do
    name="${m%%:*}"; gguf="$MD/${m#*:}"
    [ -f "$gguf" ] || { echo "skip $name: $gguf missing"; continue; }
    uptime > "$OUT/load-$name-$r.txt"
    LD_LIBRARY_PATH="$LB" "$LB/llama-bench" -m "$gguf" -p 512 -n 128 -t "$T" -r 3 -o json > "$OUT/llama-$name-$r.json"
    "$BIN" bench -m "$gguf" -p 512 -n 128 -t "$T" -r 3 --json > "$OUT/tkv-$name-$r.json"
  done
done
python3 - "$OUT" "$ROOT/docs/bench" "$T" "$ROUNDS" <<'PY'
import json, sys, glob, os, statistics, platform, subprocess
out, docs, T, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = []
for f in sorted(glob.glob(f"{out}/*.json")):
    base = os.path.basename(f)[:-5]; eng, name, r = base.split("-", 1)[0], base.split("-", 1)[1].rsplit("-", 1)[0], base.rsplit("-", 1)[1]
    load = open(f"{out}/load-{name}-{r}.txt").read().strip().split("load average:")[-1].strip()
    d = json.load(open(f))
    if eng == "llama":
        for t in d:
            test = f"pp{t['n_prompt']}" if t["n_prompt"] else f"tg{t['n_gen']}"
            rows.append({"engine": "llama.cpp", "model": name, "test": test, "tok_s": t["avg_ts"], "round": int(r), "load": load})
    else:
        for t in d["rows"]:
            rows.append({"engine": "turbokv", "model": name, "test": t["test"], "tok_s": t["tok_s"], "gbs": t["gbs"],
                         "round": int(r), "load": load})
cpu = subprocess.run(["bash", "-c", "lscpu | grep 'Model name' | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
json.dump({"threads": T, "cpu": cpu, "rows": rows}, open(f"{docs}/cpu.json", "w"), indent=1)
md = ["# CPU speed: turbokv vs llama.cpp", "",
      f"`bench/scripts/run-cpu.sh {T} {rounds}`: {cpu}, {T} threads, engines alternated per round, "
      "each figure the engine's own median/mean of 3 repetitions. bf16 KV for turbokv, f16 KV for llama.cpp.", "",
      "| model | test | llama.cpp tok/s | turbokv tok/s | turbokv / llama.cpp | turbokv GB/s of weights+KV | round | load avg |",
      "|---|---|---|---|---|---|---|---|"]
for r in range(1, rounds + 1):
    for name in sorted({x["model"] for x in rows}):
        for test in ("pp512", "tg128"):
            l = [x for x in rows if x["engine"] == "llama.cpp" and x["model"] == name and x["test"] == test and x["round"] == r]
            t = [x for x in rows if x["engine"] == "turbokv" and x["model"] == name and x["test"] == test and x["round"] == r]
            if l and t:
                g = f"{t[0]['gbs']:.2f}" if t[0].get("gbs") else "-"
                md.append(f"| {name} | {test} | {l[0]['tok_s']:.2f} | {t[0]['tok_s']:.2f} | {t[0]['tok_s']/l[0]['tok_s']:.2f}× | {g} | {r} | {t[0]['load']} |")
open(f"{docs}/cpu.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
