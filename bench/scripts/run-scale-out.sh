#!/usr/bin/env bash
# Issue 30 scale-out table: 1, 2 and 3 `turbokv serve` replicas behind vllm-router
# (scripts/cluster/up) with round_robin and cache_aware routing, loaded by aiperf with a
# multi-turn chat workload whose conversations open with one of PREFIXES shared system
# prompts (aiperf's prefix-prompt pool; each later turn carries the history). Per point:
# output tok/s and p50/p99 TTFT (aiperf), and the prefix-cache hit ratio of each replica
# (prompt tokens served from its cache / prompt tokens, its /metrics). Each replica gets
# a KV budget (BUDGET) smaller than all the prefixes, as a loaded server's cache is, so
# where a conversation lands decides whether its prefix is still cached.
# Writes docs/bench/scale-out.json (rows of another TURNS already there are kept) and
# prints the table.
#   bench/scripts/run-scale-out.sh
# env: REPLICAS="1 2 3" POLICIES="round_robin cache_aware" MODEL=smollm2 KV=turbo
#      PREFIXES=24 PREFIX_LEN=512 CONVS=48 TURNS=3 ISL=64 OSL=32 CONC=6 BUDGET=96MiB
#      CPUS=1 (cores pinned per replica where N x CPUS fits this machine; else unpinned,
#      one thread each) OUT_DIR=dir JSON_OUT=docs/bench/scale-out.json
# aiperf and the router run on the same cores as the replicas; the table says how many
# cores there were.
set -euo pipefail
source "$(dirname "$0")/servers.sh"
REPLICAS="${REPLICAS:-1 2 3}"; POLICIES="${POLICIES:-round_robin cache_aware}"
MODEL="${MODEL:-smollm2}"; KV="${KV:-turbo}"; PREFIXES="${PREFIXES:-24}"; PREFIX_LEN="${PREFIX_LEN:-512}"
CONVS="${CONVS:-48}"; TURNS="${TURNS:-3}"; ISL="${ISL:-64}"; OSL="${OSL:-32}"; CONC="${CONC:-6}"
BUDGET="${BUDGET:-96MiB}"; CPUS="${CPUS:-1}"
VENV="${TKV_VENV:-$HOME/.cache/turbokv/venv-bench}"
OUT="${OUT_DIR:-$(mktemp -d)}"; mkdir -p "$OUT"
check_bins turbokv
"$ROOT/bench/scripts/install-aiperf.sh" >&2
ensure_model "$MODEL"; gguf="$(gguf_of "$MODEL")"
[ -f "$OUT/tok/tokenizer.json" ] || "$VENV/bin/python" "$ROOT/bench/scripts/bench_http.py" tokenizer "$gguf" "$OUT/tok" > /dev/null
echo "raw results in $OUT" >&2
cores=$(nproc)
base=$(free_port); port=$(free_port)

for n in $REPLICAS; do
  for policy in $POLICIES; do
    tag="$n-$policy"; f="$OUT/$tag.json"
    [ -s "$f" ] && continue
    pin=(); [ $((n * CPUS)) -le "$cores" ] && pin=(--cpus "$CPUS")
    echo "$n replicas, $policy (load $(load))" >&2
    TURBOKV="$BIN" "$ROOT/scripts/cluster/up" -n "$n" -m "$gguf" --policy "$policy" --port "$port" \
      --base-port "$base" --dir "$OUT/run-$tag" "${pin[@]}" -- -c 4096 \
      --kv-quant "$KV" --kv-budget "$BUDGET" --parallel 8 --alias "$MODEL" >&2
    rm -rf "$OUT/aiperf-$tag"
    if ! "$VENV/bin/aiperf" profile -m "$MODEL" --url "http://127.0.0.1:$port" --endpoint-type chat \
        --streaming --tokenizer "$OUT/tok" --use-server-token-count \
        --num-prefix-prompts "$PREFIXES" --prefix-prompt-length "$PREFIX_LEN" \
        --conversation-num "$CONVS" --conversation-turn-mean "$TURNS" --isl "$ISL" --osl "$OSL" \
        --concurrency "$CONC" --extra-inputs ignore_eos:true --random-seed 1 \
        --artifact-dir "$OUT/aiperf-$tag" --ui none --no-server-metrics --no-gpu-telemetry \
        --workers-max 1 --record-processors 1 > "$OUT/aiperf-$tag.log" 2>&1; then
      echo "aiperf failed for $tag; tail of $OUT/aiperf-$tag.log:" >&2; tail -n 20 "$OUT/aiperf-$tag.log" >&2
      "$ROOT/scripts/cluster/down" --dir "$OUT/run-$tag" >&2; continue
    fi
    reps=()
    while read -r _ name url; do
      [[ "$name" == replica-* ]] && reps+=("$("${HTTP[@]}" metrics "$url")")
    done < "$OUT/run-$tag/pids"
    "$ROOT/scripts/cluster/down" --dir "$OUT/run-$tag" >&2
    python3 - "$n" "$policy" "$cores" "${#pin[@]}" "$("${HTTP[@]}" aiperf "$OUT/aiperf-$tag")" "${reps[@]}" > "$f" <<'PY'
import json, sys
n, policy, cores, pinned, ai = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] != "0", json.loads(sys.argv[5])
reps = [json.loads(r) for r in sys.argv[6:]]
per = [{"prompt_tokens": r["turbokv:prefix_cache_queries_total"], "hit_tokens": r["turbokv:prefix_cache_hits_total"],
        "hit_ratio": r["turbokv:prefix_cache_hit_ratio"], "evicted_blocks": r["turbokv:prefix_cache_evictions_total"]}
       for r in reps]
q = sum(p["prompt_tokens"] for p in per)
print(json.dumps({"replicas": n, "policy": policy, "out_tok_s": ai["out_tok_s"], "ttft_p50_ms": ai["ttft_p50_ms"],
                  "ttft_p99_ms": ai["ttft_p99_ms"], "hit_ratio": sum(p["hit_tokens"] for p in per) / q if q else 0,
                  "requests": ai["requests"], "errors": ai["errors"], "cores": cores, "pinned": pinned,
                  "per_replica": per}))
PY
  done
done

python3 - "$OUT" "${JSON_OUT:-$ROOT/docs/bench/scale-out.json}" "$MODEL" "$KV" "$PREFIXES" "$PREFIX_LEN" "$CONVS" "$TURNS" "$ISL" "$OSL" "$CONC" "$BUDGET" <<'PY'
import glob, json, os, sys
out, dst, model, kv, prefixes, plen, convs, turns, isl, osl, conc, budget = sys.argv[1:]
rows = sorted((json.load(open(f)) for f in glob.glob(f"{out}/*-*.json")), key=lambda r: (r["replicas"], r["policy"]))
for r in rows:
    r.update(turns=int(turns), conversations=int(convs))
# Rows of other conversation lengths already in dst (an earlier run with another TURNS) stay.
kept = []
if os.path.exists(dst):
    kept = [r for r in json.load(open(dst)).get("rows", []) if r.get("turns") != int(turns)]
json.dump({"model": model, "kv_quant": kv, "workload": {"prefix_prompts": int(prefixes), "prefix_tokens": int(plen),
           "isl": int(isl), "osl": int(osl), "concurrency": int(conc)},
           "kv_budget_per_replica": budget, "router": "vllm-router 0.1.17",
           "rows": sorted(kept + rows, key=lambda r: (r["turns"], r["replicas"], r["policy"]))},
          open(dst, "w"), indent=1)
one = {r["policy"]: r["out_tok_s"] for r in rows if r["replicas"] == 1}
print(f"{convs} conversations of {turns} turns")
print("| replicas | policy | cores (pinned) | out tok/s | vs 1 replica | TTFT p50 ms | TTFT p99 ms | prefix hit ratio | per replica |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    base = one.get(r["policy"])
    rel = f"{r['out_tok_s'] / base:.2f}x" if base else "-"
    per = " / ".join(f"{p['hit_ratio']:.2f}" for p in r["per_replica"])
    print(f"| {r['replicas']} | {r['policy']} | {r['cores']} ({'yes' if r['pinned'] else 'no'}) | {r['out_tok_s']:.1f} | {rel} | "
          f"{r['ttft_p50_ms']:.0f} | {r['ttft_p99_ms']:.0f} | {r['hit_ratio']:.3f} | {per} |")
PY
