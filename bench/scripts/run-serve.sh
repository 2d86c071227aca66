#!/usr/bin/env bash
# Issue 24 serving table: output tok/s, p50/p99 TTFT and p50 inter-token latency of
# `turbokv serve` beside llama-server (same GGUF, same threads, -np = concurrency, -fa on,
# KV types matched: bf16 -> f16/f16, turbo (k8v3) -> q8_0/q4_0, turbo:k4v3 -> q4_0/q4_0),
# measured by aiperf (PyPI, in its own venv) on /v1/completions, streamed, each point a
# fresh server, the engines alternated point by point so machine drift hits both; then
# the fixed-memory point: the full-context sequences each scheme admits in --kv-budget
# (turbokv prints it at start). Writes docs/bench/serve.json and prints the tables
# (docs/bench/serve.md is written by hand around them).
#   bench/scripts/run-serve.sh [MODEL...]     (smollm2 | qwen2.5-1.5b; default both, fetched if missing)
# env: T=2 CONC=1,8,32 PROMPTS=512,2048 SCHEMES="bf16 turbo" OSL=128 REQS=2 MIN_REQS=8 WARMUP=2
#      (a point sends max(MIN_REQS, REQS x concurrency) requests after WARMUP, each its own
#      prompt of exactly PROMPTS tokens as the server counts them, random words, so no
#      prefix is shared; the output is OSL tokens, ignore_eos)
#      ENGINES="turbokv llama.cpp" MAX_PREFILL=0 MAX_PREFILL_QWEN=0 (skip and list points whose
#      prompts total more tokens per engine and scheme; 0 = no limit: on 2 cores Qwen2.5-1.5B
#      prefills ~60-110 tok/s, so its 32 x 2k point alone is ~135k tokens, 20-35 min per
#      engine and scheme; MAX_PREFILL_QWEN=40000 leaves it out) FIT_BUDGET=512MiB FIT_CTX=4096 FIT_SCHEMES="bf16 8 turbo turbo:k4v3"
#      OUT_DIR=dir (raw results kept there; a rerun skips the points already measured)
#      JSON_OUT=docs/bench/serve.json TKV_VENV=~/.cache/turbokv/venv-bench TKV_BIN TKV_PEER_DIR
# aiperf runs on the same 2 cores as the server (one worker, one record processor, no
# dashboard, no server-metrics scraping); its own CPU time is part of every figure, for
# both engines alike, but llama.cpp's OpenMP threads spin at every barrier, so each time
# aiperf wakes for a streamed token it preempts a spinning thread (see run-batching.sh):
# LLAMA_OMP_WAIT=passive is the knob, recorded in serve.json, at its own large cost. Token counts come from the servers' usage (--use-server-token-count);
# the tokenizer aiperf insists on loading is made from the GGUF (bench_http.py tokenizer).
# Smoke run (every path once, a few minutes): CONC=1,2 PROMPTS=256 OSL=8 MIN_REQS=2 REQS=1 \
#   WARMUP=1 FIT_SCHEMES="bf16 turbo" JSON_OUT=/tmp/s.json bench/scripts/run-serve.sh smollm2
set -euo pipefail
source "$(dirname "$0")/servers.sh"
T="${T:-2}"; CONC="${CONC:-1,8,32}"; PROMPTS="${PROMPTS:-512,2048}"; SCHEMES="${SCHEMES:-bf16 turbo}"
OSL="${OSL:-128}"; REQS="${REQS:-2}"; MIN_REQS="${MIN_REQS:-8}"; WARMUP="${WARMUP:-2}"
ENGINES="${ENGINES:-turbokv llama.cpp}"; MAX_PREFILL="${MAX_PREFILL:-0}"; MAX_PREFILL_QWEN="${MAX_PREFILL_QWEN:-0}"
FIT_BUDGET="${FIT_BUDGET:-512MiB}"; FIT_CTX="${FIT_CTX:-4096}"; FIT_SCHEMES="${FIT_SCHEMES:-bf16 8 turbo turbo:k4v3}"
VENV="${TKV_VENV:-$HOME/.cache/turbokv/venv-bench}"
OUT="${OUT_DIR:-$(mktemp -d)}"; mkdir -p "$OUT/log" "$OUT/aiperf"
if [ $# -gt 0 ]; then MODELS=("$@"); else MODELS=(smollm2 qwen2.5-1.5b); fi
check_bins "$ENGINES"
"$ROOT/bench/scripts/install-aiperf.sh" >&2
AIPERF="$VENV/bin/aiperf"
echo "raw results in $OUT" >&2

nreq() { local r=$(( REQS * $1 )); [ "$r" -lt "$MIN_REQS" ] && r="$MIN_REQS"; echo "$r"; }
max_reqs=0
for c in ${CONC//,/ }; do n=$(( $(nreq "$c") + WARMUP )); [ "$n" -gt "$max_reqs" ] && max_reqs="$n"; done

point() {  # point ENGINE MODEL GGUF ISL CONC SCHEME
  local engine="$1" name="$2" gguf="$3" isl="$4" c="$5" s="$6" kv args
  local ctx=$(( isl + OSL + 16 )) n; n="$(nreq "$c")"
  if [ "$engine" = turbokv ]; then
    kv="$s"; args=(-m "$gguf" -t "$T" -c "$ctx" --kv-quant "$s" --parallel "$c")
  else
    read -r ck cv <<<"$(ctk_ctv "$s")"; kv="$ck/$cv"
    args=(-m "$gguf" -t "$T" -c $(( c * ctx )) -np "$c" -fa on -ctk "$ck" -ctv "$cv")
  fi
  local tag="$engine-$name-$isl-$c-${kv//[:\/]/_}"; local f="$OUT/$tag.json"
  [ -s "$f" ] && return 0
  echo "$engine $name isl=$isl N=$c $kv: $n requests (load $(load))" >&2
  start_server "$OUT/log/$tag.server" "$engine" "${args[@]}"
  rm -rf "$OUT/aiperf/$tag"
  local l0; l0="$(load)"
  if ! "$AIPERF" profile -m "$name" --url "$URL" --endpoint-type completions --streaming \
      --tokenizer "$OUT/tok-$name" --use-server-token-count --use-legacy-max-tokens \
      --input-file "$OUT/data-$name-$isl.jsonl" --custom-dataset-type single_turn \
      --dataset-sampling-strategy sequential --concurrency "$c" --request-count "$n" \
      --warmup-request-count "$WARMUP" --extra-inputs ignore_eos:true --random-seed 1 \
      --artifact-dir "$OUT/aiperf/$tag" --ui none --no-server-metrics --no-gpu-telemetry \
      --workers-max 1 --record-processors 1 > "$OUT/log/$tag.aiperf" 2>&1; then
    echo "aiperf failed for $tag; tail of $OUT/log/$tag.aiperf:" >&2; tail -n 20 "$OUT/log/$tag.aiperf" >&2
    stop_server; return 0
  fi
  stop_server
  printf '{"engine": "%s", "model": "%s", "scheme": "%s", "concurrency": %s, "prompt_tokens": %s, "osl": %s, "requests": %s, "load_before": "%s", "load": "%s", "aiperf": %s}\n' \
    "$engine" "$name" "$kv" "$c" "$isl" "$OSL" "$n" "$l0" "$(load)" "$(python3 "$ROOT/bench/scripts/bench_http.py" aiperf "$OUT/aiperf/$tag")" > "$f"
}

i=0
rm -f "$OUT/skipped.jsonl"
for name in "${MODELS[@]}"; do
  ensure_model "$name"; gguf="$(gguf_of "$name")"
  cap="$MAX_PREFILL"; [ "$name" = qwen2.5-1.5b ] && cap="$MAX_PREFILL_QWEN"
  [ -f "$OUT/tok-$name/tokenizer.json" ] || "$VENV/bin/python" "$ROOT/bench/scripts/bench_http.py" tokenizer "$gguf" "$OUT/tok-$name" > /dev/null
  for isl in ${PROMPTS//,/ }; do
    data="$OUT/data-$name-$isl.jsonl"
    if [ ! -s "$data" ] || [ "$(wc -l < "$data")" -lt "$max_reqs" ] || ! grep -q "\"output_length\": $OSL}" "$data"; then
      start_server "$OUT/log/data-$name-$isl.server" turbokv -m "$gguf" -t "$T" -c $(( isl + 16 )) --parallel 1
      python3 "$ROOT/bench/scripts/bench_http.py" prompts "$URL" "$isl" "$max_reqs" "$isl" "$data" --osl "$OSL" > /dev/null
      stop_server
    fi
    for c in ${CONC//,/ }; do
      total=$(( ($(nreq "$c") + WARMUP) * isl ))
      if [ "$cap" -gt 0 ] && [ "$total" -gt "$cap" ]; then
        echo "{\"model\": \"$name\", \"concurrency\": $c, \"prompt_tokens\": $isl, \"why\": \"$total prompt tokens per engine and scheme > the cap $cap\"}" >> "$OUT/skipped.jsonl"
        continue
      fi
      for s in $SCHEMES; do
        first=turbokv; second=llama.cpp; [ $((i++ % 2)) -eq 1 ] && { first=llama.cpp; second=turbokv; }
        for e in $first $second; do
          [[ " $ENGINES " == *" $e "* ]] && point "$e" "$name" "$gguf" "$isl" "$c" "$s"
        done
      done
    done
  done
  # Fixed memory: full-context sequences admitted in FIT_BUDGET, from turbokv serve's start line
  # (the pool is the smaller of --parallel x context and the budget: a large --parallel leaves the budget).
  for s in $FIT_SCHEMES; do
    f="$OUT/fit-$name-${s//:/_}.json"; [ -s "$f" ] && continue
    start_server "$OUT/log/fit-$name-${s//:/_}.server" turbokv -m "$gguf" -t "$T" -c "$FIT_CTX" --kv-budget "$FIT_BUDGET" --kv-quant "$s" --parallel 1024
    stop_server
    python3 - "$OUT/log/fit-$name-${s//:/_}.server" "$name" "$s" "$FIT_BUDGET" "$FIT_CTX" > "$f" <<'PY'
import json, re, sys
log, name, scheme, budget, ctx = sys.argv[1:]
m = re.search(r"kv cache: \S+, (\d+) bytes/token, context (\d+) tokens, pool (\d+) tokens .*?: (\d+) full-context sequences? fit", open(log).read())
if not m:
    sys.exit(f"no 'kv cache: ... sequences fit' line in {log}")
print(json.dumps({"engine": "turbokv", "model": name, "scheme": scheme, "kv_budget": budget, "ctx": int(ctx),
                  "kv_bytes_per_token": int(m[1]), "pool_tokens": int(m[3]), "seqs": int(m[4])}))
PY
  done
done
python3 "$ROOT/bench/scripts/serve_rows.py" "$OUT" "${JSON_OUT:-$ROOT/docs/bench/serve.json}" "$T" "$OSL"
