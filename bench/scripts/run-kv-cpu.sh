#!/usr/bin/env bash
# Decode tok/s at context depth per KV scheme (issue 31's table), turbokv beside
# llama.cpp's llama-bench -d (same GGUF, same threads, -fa on), engines alternated
# per model; writes docs/bench/kv-cpu.json and prints the tables
# (docs/bench/kv-cpu.md is written by hand around them).
#   bench/scripts/run-kv-cpu.sh [MODEL...]   (smollm2 | gemma3 | qwen2.5-1.5b; default all three)
# env: T=2 NGEN=32 REPS=2 DEPTHS=2048,8192,16384,32768 DEPTHS_QWEN=2048,8192,16384
#      SCHEMES=bf16,8,4,turbo,turbo:k8v4,turbo:k4v3 LLAMA_KV="f16/f16 q8_0/q8_0 q8_0/q4_0"
#      OUT_DIR=dir (raw results kept there; a rerun skips the points already measured)
# Each depth is a real prefill of random tokens (both engines), once per scheme:
# on 2 cores Qwen2.5-1.5B prefills ~60-100 tok/s, so its 32k point would take
# ~9 prefills x 6-9 min; DEPTHS_QWEN leaves it out unless asked for.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
T="${T:-2}"; NGEN="${NGEN:-32}"; REPS="${REPS:-2}"
DEPTHS="${DEPTHS:-2048,8192,16384,32768}"; DEPTHS_QWEN="${DEPTHS_QWEN:-2048,8192,16384}"
SCHEMES="${SCHEMES:-bf16,8,4,turbo,turbo:k8v4,turbo:k4v3}"
LLAMA_KV="${LLAMA_KV:-f16/f16 q8_0/q8_0 q8_0/q4_0}"
# llama.cpp with its own (spinning) OpenMP wait policy: run on a quiet machine (see run-batching.sh).
[ -n "${LLAMA_OMP_WAIT:-}" ] && export OMP_WAIT_POLICY="$LLAMA_OMP_WAIT"  # turbokv has no OpenMP
BIN="$ROOT/build/cpu-release/tools/turbokv"
LB="${TKV_PEER_DIR:-$HOME/.cache/turbokv/llama.cpp}/build/bin"
MD="${TKV_MODEL_DIR:-$HOME/.cache/turbokv/models}"
OUT="${OUT_DIR:-$(mktemp -d)}"; mkdir -p "$OUT"
MODELS=("${@:-smollm2 gemma3 qwen2.5-1.5b}"); MODELS=(${MODELS[*]})
gguf_of() {
  case "$1" in
    smollm2) echo "$MD/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    gemma3) echo "$MD/gemma-3-270m-q4_k_m.gguf" ;;
    qwen2.5-1.5b) echo "$MD/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" ;;
    *) echo "unknown model $1 (smollm2 | gemma3 | qwen2.5-1.5b)" >&2; exit 2 ;;
  esac
}
[ -x "$BIN" ] || { echo "build turbokv first: scripts/build cpu-release --target turbokv" >&2; exit 1; }
[ -x "$LB/llama-bench" ] || { echo "build the peer first: scripts/peer/build-llamacpp" >&2; exit 1; }
LBENCH=("$LB/llama-bench")
# A -march=native build may use AMX tiles this VM does not enable: then no repacking.
if ! LD_LIBRARY_PATH="$LB" "${LBENCH[@]}" -m "$(gguf_of smollm2)" -p 8 -n 2 -r 1 -t "$T" >/dev/null 2>&1; then
  LBENCH+=(-nr 1); echo "llama-bench failed with repacking on: running it with -nr 1" >&2
fi
load() { cut -d' ' -f1-3 /proc/loadavg; }
for name in "${MODELS[@]}"; do
  gguf="$(gguf_of "$name")"
  [ -f "$gguf" ] || { echo "skip $name: $gguf missing (scripts/fetch-models $name)" >&2; continue; }
  depths="$DEPTHS"; [ "$name" = qwen2.5-1.5b ] && depths="$DEPTHS_QWEN"
  for d in ${depths//,/ }; do  # per depth, engines alternated: both see the same machine state
    f="$OUT/tkv-$name-$d.json"
    if [ ! -s "$f" ]; then
      echo "turbokv $name d=$d (load $(load))" >&2
      js="$("$BIN" bench -m "$gguf" -p 0 -n "$NGEN" -d "$d" -t "$T" -r "$REPS" --schemes "$SCHEMES" --json)"
      printf '{"model": "%s", "load": "%s", "run": %s}\n' "$name" "$(load)" "$js" > "$f"
    fi
    for kv in $LLAMA_KV; do
      f="$OUT/llama-$name-$d-${kv//\//_}.json"; [ -s "$f" ] && continue
      echo "llama-bench $name d=$d $kv (load $(load))" >&2
      js="$(LD_LIBRARY_PATH="$LB" "${LBENCH[@]}" -m "$gguf" -p 0 -n "$NGEN" -d "$d" -t "$T" -r "$REPS" \
            -fa 1 -ctk "${kv%/*}" -ctv "${kv#*/}" -o jsonl 2>/dev/null | grep '^{' || true)"
      [ -n "$js" ] || { echo "llama-bench gave no row for $name d=$d $kv" >&2; continue; }
      printf '{"model": "%s", "load": "%s", "kv": "%s", "run": %s}\n' "$name" "$(load)" "$kv" "$js" > "$f"
    done
  done
done
python3 - "$OUT" "$ROOT/docs/bench/kv-cpu.json" "$T" "$NGEN" "$REPS" <<'PY'
import glob, json, subprocess, sys
out, dst, T, ngen, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = []
for f in sorted(glob.glob(f"{out}/tkv-*.json")):
    d = json.load(open(f))
    for r in d["run"]["rows"]:
        rows.append({"engine": "turbokv", "model": d["model"], "scheme": r["scheme"], "ctx": r["depth"],
                     "decode_tok_s": r["tok_s"], "path": r.get("path", "fused"), "attn_gbs": r.get("attn_gbs"),
                     "attn_us_per_tok": r.get("attn_us_per_tok"), "gbs": r.get("gbs"),
                     "kv_bytes_per_token": r.get("kv_bytes_per_token"), "load": d["load"]})
for f in sorted(glob.glob(f"{out}/llama-*.json")):
    d = json.load(open(f)); x = d["run"]
    rows.append({"engine": "llama.cpp", "model": d["model"], "scheme": d["kv"], "ctx": x["n_depth"],
                 "decode_tok_s": x["avg_ts"], "path": "fa", "attn_gbs": None, "load": d["load"]})
cpu = subprocess.run(["bash", "-c", "lscpu | grep 'Model name' | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
json.dump({"cpu": cpu, "threads": T, "n_gen": ngen, "reps": reps, "rows": rows}, open(dst, "w"), indent=1)
print(f"CPU: {cpu}, {T} threads, tg{ngen}, median of {reps} (turbokv) / mean of {reps} (llama-bench)\n")
for m in sorted({r["model"] for r in rows}):
    tk = sorted({r["scheme"] for r in rows if r["model"] == m and r["engine"] == "turbokv"},
                key=lambda s: ["bf16", "8", "4", "turbo", "turbo:k8v4", "turbo:k4v3"].index(s) if s in ["bf16", "8", "4", "turbo", "turbo:k8v4", "turbo:k4v3"] else 9)
    ll = sorted({r["scheme"] for r in rows if r["model"] == m and r["engine"] == "llama.cpp"})
    print(f"### {m}\n")
    print("| ctx | " + " | ".join(f"{s} tok/s (attn GB/s)" for s in tk) + " | turbo/bf16 | "
          + " | ".join(f"llama.cpp {s}" for s in ll) + " | turbo / llama q8_0/q4_0 |")
    print("|---|" + "---|" * (len(tk) + len(ll) + 2))
    for c in sorted({r["ctx"] for r in rows if r["model"] == m}):
        get = lambda e, s: next((r for r in rows if (r["engine"], r["model"], r["scheme"], r["ctx"]) == (e, m, s, c)), None)
        cells = []
        for s in tk:
            r = get("turbokv", s)
            cells.append(f"{r['decode_tok_s']:.1f} ({r['attn_gbs']:.1f})" if r and r["attn_gbs"] else (f"{r['decode_tok_s']:.1f}" if r else "-"))
        tb, bf, lq = get("turbokv", "turbo"), get("turbokv", "bf16"), get("llama.cpp", "q8_0/q4_0")
        ratio = f"{tb['decode_tok_s'] / bf['decode_tok_s']:.2f}×" if tb and bf else "-"
        lcells = [f"{r['decode_tok_s']:.1f}" if (r := get("llama.cpp", s)) else "-" for s in ll]
        vs = f"{tb['decode_tok_s'] / lq['decode_tok_s']:.2f}×" if tb and lq else "-"
        print(f"| {c} | " + " | ".join(cells) + f" | {ratio} | " + " | ".join(lcells) + f" | {vs} |")
    print()
PY
