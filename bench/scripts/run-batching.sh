#!/usr/bin/env bash
# Issue 23 batching table: aggregate decode tok/s and per-sequence TPOT of N
# concurrent sequences (`turbokv bench --concurrency`) beside llama.cpp's
# llama-batched-bench (same GGUF, same threads, -fa on, matching -ctk/-ctv),
# the engines alternated point by point so machine drift hits both; then the
# prefix-hit TTFT and the --fit table. Writes docs/bench/batching.json and
# prints the tables (docs/bench/batching.md is written by hand around them).
#   bench/scripts/run-batching.sh [MODEL...]     (smollm2 | qwen2.5-1.5b; default smollm2)
# env: T=2 NGEN=32 REPS=1 CONC=1,4,16,64 CTX=512,4096 SCHEMES="bf16 8 turbo turbo:k4v3"
#      MAX_PREFILL=32768 MAX_PREFILL_QWEN=4096 (points whose N x ctx prefill is larger are
#      skipped and listed: on 2 shared cores a 4k x 64 point is 262k prefill tokens per scheme)
#      TTFT_CTX=2048 FIT_CTX=4096 FIT_BUDGET=8GiB
# KV types for llama.cpp: bf16 -> f16/f16 (16 bits, llama.cpp's default cache type),
# 8 -> q8_0/q8_0, turbo (k8v3) -> q8_0/q4_0 and turbo:k4v3 -> q4_0/q4_0: the nearest
# llama.cpp block types at or above each scheme's key/value bits.
# llama.cpp runs with its own OpenMP wait policy (threads spin at every barrier):
# run this on a quiet machine. On 2 cores shared with another job a preempted
# spinning thread stalls the other (measured 1.0 vs 17.6 tok/s decode), and
# LLAMA_OMP_WAIT=passive avoids that at a large cost of its own (one SmolLM2
# sequence at 20 tok/s instead of 90-100): its figures are then no comparison.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
T="${T:-2}"; NGEN="${NGEN:-32}"; REPS="${REPS:-1}"
CONC="${CONC:-1,4,16,64}"; CTX="${CTX:-512,4096}"; SCHEMES="${SCHEMES:-bf16 8 turbo turbo:k4v3}"
MAX_PREFILL="${MAX_PREFILL:-32768}"; MAX_PREFILL_QWEN="${MAX_PREFILL_QWEN:-4096}"; TTFT_CTX="${TTFT_CTX:-2048}"
FIT_CTX="${FIT_CTX:-4096}"; FIT_BUDGET="${FIT_BUDGET:-8GiB}"
[ -n "${LLAMA_OMP_WAIT:-}" ] && export OMP_WAIT_POLICY="$LLAMA_OMP_WAIT"  # turbokv has no OpenMP
BIN="$ROOT/build/cpu-release/tools/turbokv"
LB="${TKV_PEER_DIR:-$HOME/.cache/turbokv/llama.cpp}/build/bin"
MD="${TKV_MODEL_DIR:-$HOME/.cache/turbokv/models}"
# OUT_DIR: keep the raw results there; a rerun with the same OUT_DIR skips the points
# already measured (a long run survives an interruption).
OUT="${OUT_DIR:-$(mktemp -d)}"; mkdir -p "$OUT"
MODELS=("${@:-smollm2}")
gguf_of() {
  case "$1" in
    smollm2) echo "$MD/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    qwen2.5-1.5b) echo "$MD/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" ;;
    *) echo "unknown model $1 (smollm2 | qwen2.5-1.5b)" >&2; exit 2 ;;
  esac
}
ctk_ctv() {
  case "$1" in
    bf16) echo "f16 f16" ;; 8) echo "q8_0 q8_0" ;; turbo|turbo:k8v3) echo "q8_0 q4_0" ;;
    turbo:k4v3) echo "q4_0 q4_0" ;; *) echo "no llama.cpp KV type for scheme $1" >&2; exit 2 ;;
  esac
}
[ -x "$BIN" ] || { echo "build turbokv first: scripts/build cpu-release --target turbokv" >&2; exit 1; }
# The peer may still be building (scripts/peer/build-llamacpp): wait for it.
for _ in $(seq 1 60); do [ -x "$LB/llama-batched-bench" ] && break; echo "waiting for $LB/llama-batched-bench"; sleep 60; done
LBB=("$LB/llama-batched-bench")
# A -march=native build may use AMX tiles that this VM does not enable (SIGILL):
# then weight repacking, which is where llama.cpp's AMX kernels live, is turned off.
if ! LD_LIBRARY_PATH="$LB" "${LBB[@]}" -m "$(gguf_of smollm2)" -c 256 -npp 8 -ntg 2 -npl 1 -t "$T" >/dev/null 2>&1; then
  LBB+=(-nr); echo "llama-batched-bench failed with repacking on: running it with -nr (--no-repack)"
fi
load() { cut -d' ' -f1-3 /proc/loadavg; }
tkv() {  # tkv MODEL GGUF CTX N SCHEME
  local f="$OUT/tkv-$1-$3-$4-${5//:/_}.json"; [ -s "$f" ] && return 0
  echo "turbokv $1 $5 N=$4 ctx=$3 (load $(load))" >&2
  local js; js="$("$BIN" bench -m "$2" -t "$T" --concurrency "$4" -p "$3" -n "$NGEN" -r "$REPS" --schemes "$5" --json)"
  printf '{"model": "%s", "load": "%s", "run": %s}\n' "$1" "$(load)" "$js" > "$f"
}
llama() {  # llama MODEL GGUF CTX N CTK CTV
  local f="$OUT/llama-$1-$3-$4-$5-$6.json"; [ -s "$f" ] && return 0
  echo "llama.cpp $1 $5/$6 N=$4 ctx=$3 (load $(load))" >&2
  local per=$(( ($3 + NGEN + 255) / 256 * 256 )) js  # whole 256-cell blocks per sequence
  js="$(LD_LIBRARY_PATH="$LB" "${LBB[@]}" -m "$2" -c $(($4 * per)) -npp "$3" -ntg "$NGEN" -npl "$4" \
        -t "$T" -fa on -ctk "$5" -ctv "$6" --output-format jsonl 2>/dev/null | grep '^{' || true)"
  [ -n "$js" ] || { echo "llama-batched-bench gave no row for $1 N=$4 ctx=$3 $5/$6" >&2; return; }
  printf '{"model": "%s", "load": "%s", "kv": "%s/%s", "run": %s}\n' "$1" "$(load)" "$5" "$6" "$js" > "$f"
}
once() {  # once FILE MODEL BENCH-ARGS...: turbokv bench --json into FILE unless it is there
  local f="$1" name="$2" js; shift 2; [ -s "$f" ] && return 0
  echo "turbokv $name bench $*" >&2
  js="$("$BIN" bench "$@" --json)"
  printf '{"model": "%s", "load": "%s", "run": %s}\n' "$name" "$(load)" "$js" > "$f"
}
i=0
rm -f "$OUT/skipped.jsonl"
for name in "${MODELS[@]}"; do
  gguf="$(gguf_of "$name")"; [ -f "$gguf" ] || { echo "skip $name: $gguf missing (scripts/fetch-models $name)"; continue; }
  max="$MAX_PREFILL"; [ "$name" = qwen2.5-1.5b ] && max="$MAX_PREFILL_QWEN"
  for ctx in ${CTX//,/ }; do
    for n in ${CONC//,/ }; do
      if [ $((n * ctx)) -gt "$max" ]; then
        echo "{\"model\": \"$name\", \"concurrency\": $n, \"ctx\": $ctx, \"why\": \"prefill of $((n * ctx)) tokens per scheme and engine > $max\"}" >> "$OUT/skipped.jsonl"
        continue
      fi
      seen=" "  # llama.cpp KV pairs already run at this point (turbo and k4v3 may share one)
      for s in $SCHEMES; do
        read -r ck cv <<<"$(ctk_ctv "$s")"
        if [[ "$seen" == *" $ck/$cv "* ]]; then tkv "$name" "$gguf" "$ctx" "$n" "$s"; continue; fi
        seen+="$ck/$cv "
        # Alternate which engine goes first.
        if [ $((i++ % 2)) -eq 0 ]; then
          tkv "$name" "$gguf" "$ctx" "$n" "$s"; llama "$name" "$gguf" "$ctx" "$n" "$ck" "$cv"
        else
          llama "$name" "$gguf" "$ctx" "$n" "$ck" "$cv"; tkv "$name" "$gguf" "$ctx" "$n" "$s"
        fi
      done
    done
  done
  # One sequence at each ctx: decode tok/s and attention time per token (what bounds the batch).
  once "$OUT/depth-$name.json" "$name" -m "$gguf" -t "$T" -p 0 -n "$NGEN" -d "$CTX" -r 1 --schemes "${SCHEMES// /,}"
  # Prefix cache: TTFT of a TTFT_CTX-token prompt, cold and repeated; KV sequences that fit.
  once "$OUT/ttft-$name.json" "$name" -m "$gguf" -t "$T" --prefix-hit -p "$TTFT_CTX" -r 1 --schemes "${SCHEMES// /,}"
  once "$OUT/fit-$name.json" "$name" -m "$gguf" --fit -c "$FIT_CTX" --kv-budget "$FIT_BUDGET" --schemes "${SCHEMES// /,}"
done
python3 - "$OUT" "$ROOT/docs/bench/batching.json" "$T" "$NGEN" "$REPS" "${LBB[*]}" <<'PY'
import glob, json, os, subprocess, sys
out, dst, T, ngen, reps, lbb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rows, ttft, fit, depth = [], [], [], []
for f in sorted(glob.glob(f"{out}/tkv-*.json")):
    d = json.load(open(f))
    for r in d["run"]["rows"]:
        rows.append(dict(r, model=d["model"], load=d["load"]))
for f in sorted(glob.glob(f"{out}/llama-*.json")):
    d = json.load(open(f)); name = d["model"]
    x = d["run"]
    rows.append({"engine": "llama.cpp", "model": name, "scheme": d["kv"], "test": "batch",
                 "concurrency": x["pl"], "ctx": x["pp"], "n_gen": x["tg"], "agg_tok_s": x["speed_tg"],
                 "tpot_ms": x["t_tg"] / x["tg"] * 1000, "prefill_tok_s": x["speed_pp"], "load": d["load"]})
for f in sorted(glob.glob(f"{out}/ttft-*.json")):
    d = json.load(open(f))
    ttft += [dict(r, model=d["model"], load=d["load"]) for r in d["run"]["rows"]]
for f in sorted(glob.glob(f"{out}/depth-*.json")):
    d = json.load(open(f))
    depth += [dict(r, model=d["model"], load=d["load"]) for r in d["run"]["rows"]]
for f in sorted(glob.glob(f"{out}/fit-*.json")):
    d = json.load(open(f))
    fit += [dict(r, model=d["model"], load=d["load"]) for r in d["run"]["fit"]]
skipped = [json.loads(l) for l in open(f"{out}/skipped.jsonl")] if os.path.exists(f"{out}/skipped.jsonl") else []
cpu = subprocess.run(["bash", "-c", "lscpu | grep 'Model name' | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
kvmap = {"bf16": "f16/f16", "8": "q8_0/q8_0", "turbo": "q8_0/q4_0", "turbo:k8v3": "q8_0/q4_0", "turbo:k4v3": "q4_0/q4_0"}
doc = {"cpu": cpu, "threads": T, "llama_omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "llama.cpp default"), "n_gen": ngen, "reps": reps, "llama_batched_bench": lbb.split("/")[-1],
       "kv_map": kvmap, "rows": rows, "single": depth, "ttft": ttft, "fit": fit, "skipped": skipped}
json.dump(doc, open(dst, "w"), indent=1)
print(f"{cpu}, {T} threads, -n {ngen}\n")
print("| model | ctx | seqs | kv (turbokv) | turbokv tok/s | TPOT ms | llama.cpp kv | llama.cpp tok/s | TPOT ms | turbokv / llama.cpp | prefill tok/s turbokv / llama.cpp | load |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for t in sorted([r for r in rows if r["engine"] == "turbokv"], key=lambda r: (r["model"], r["ctx"], r["concurrency"], r["scheme"])):
    l = [r for r in rows if r["engine"] == "llama.cpp" and r["model"] == t["model"] and r["ctx"] == t["ctx"]
         and r["concurrency"] == t["concurrency"] and r["scheme"] == kvmap[t["scheme"]]]
    lc = l[0] if l else None
    print(f"| {t['model']} | {t['ctx']} | {t['concurrency']} | {t['scheme']} | {t['agg_tok_s']:.1f} | {t['tpot_ms']:.1f} | "
          + (f"{lc['scheme']} | {lc['agg_tok_s']:.1f} | {lc['tpot_ms']:.1f} | {t['agg_tok_s'] / lc['agg_tok_s']:.2f}x | "
             f"{t['prefill_tok_s']:.0f} / {lc['prefill_tok_s']:.0f} | " if lc else "- | - | - | - | - | ") + f"{t['load']} |")
print("\n| model | kv | ctx | one sequence tok/s | attention µs/token | load |\n|---|---|---|---|---|---|")
for r in depth:
    print(f"| {r['model']} | {r['scheme']} | {r['depth']} | {r['tok_s']:.1f} | {r['attn_us_per_tok']:.0f} | {r['load']} |")
print("\n| model | kv | prompt | TTFT cold ms | TTFT repeated ms | speedup | tokens reused |\n|---|---|---|---|---|---|---|")
for r in ttft:
    print(f"| {r['model']} | {r['scheme']} | {r['ctx']} | {r['cold_ms']:.1f} | {r['hit_ms']:.1f} | {r['speedup']:.1f}x | {r['cached_tokens']} |")
print("\n| model | kv | ctx | budget GiB | KV bytes/sequence | sequences | vs bf16 |\n|---|---|---|---|---|---|---|")
for r in fit:
    print(f"| {r['model']} | {r['scheme']} | {r['ctx']} | {r['kv_budget_bytes'] / 2**30:.0f} | {r['bytes_per_seq']} | {r['seqs']} | {r['vs_bf16']:.2f}x |")
for s in skipped:
    print(f"skipped: {s['model']} N={s['concurrency']} ctx={s['ctx']}: {s['why']}")
PY
