#!/usr/bin/env bash
# Issue 27 speculative table: decode tok/s with and without speculation, acceptance rate
# and mean tokens per target step, for Qwen2.5-Coder-1.5B with the 0.5B draft and with
# prompt lookup, on code-edit and chat prompts (bench/scripts/spec_client.py holds them),
# turbokv serve (bf16 and turbo KV) beside llama-server (f16 and q8_0/q4_0 KV, -fa on,
# --spec-type draft-simple / ngram-simple) on the same GGUFs and threads. Every point is
# a fresh server; requests go one at a time, streamed, greedy, MAX_TOKENS each; decode
# tok/s is measured by the client from the first to the last streamed token. Writes
# docs/bench/speculative.json and prints the table (docs/bench/speculative.md is written
# by hand around it).
#   bench/scripts/run-speculative.sh
# env: T=2 MAX_TOKENS=192 SETS="code-edit chat" DRAFTERS="none ngram draft" SPEC_MAX=8
#      SCHEMES="bf16 turbo" ENGINES="turbokv llama.cpp" OUT_DIR=dir (resumable)
#      JSON_OUT=docs/bench/speculative.json TKV_BIN TKV_PEER_DIR TKV_MODEL_DIR
# llama.cpp's drafters, set to match turbokv's: prompt lookup = ngram-simple with a 3-token
# lookup and SPEC_MAX drafted tokens; draft model = draft-simple, SPEC_MAX drafted tokens,
# stopping when the draft's probability falls under 0.75 (llama-speculative's long-time
# default; turbokv adapts its draft length to the acceptance rate instead).
set -euo pipefail
source "$(dirname "$0")/servers.sh"
T="${T:-2}"; MAX_TOKENS="${MAX_TOKENS:-192}"; SETS="${SETS:-code-edit chat}"
DRAFTERS="${DRAFTERS:-none ngram draft}"; SPEC_MAX="${SPEC_MAX:-8}"; SCHEMES="${SCHEMES:-bf16 turbo}"
ENGINES="${ENGINES:-turbokv llama.cpp}"
OUT="${OUT_DIR:-$(mktemp -d)}"; mkdir -p "$OUT/log"
check_bins "$ENGINES"
ensure_model qwen2.5-1.5b
DRAFT="$MD/qwen2.5-coder-0.5b-instruct-q4.gguf"
[ -f "$DRAFT" ] || "$ROOT/scripts/fetch-models" qwen2.5-0.5b >&2
TARGET="$(gguf_of qwen2.5-1.5b)"
echo "raw results in $OUT" >&2

for scheme in $SCHEMES; do
  for drafter in $DRAFTERS; do
    for engine in $ENGINES; do  # engines alternated point by point
      tag="$engine-${scheme//:/_}-$drafter"
      [ -s "$OUT/$tag.json" ] && continue
      if [ "$engine" = turbokv ]; then
        args=(-m "$TARGET" -t "$T" -c 4096 --parallel 1 --kv-quant "$scheme")
        case "$drafter" in
          ngram) args+=(--spec ngram --spec-max "$SPEC_MAX") ;;
          draft) args+=(--draft-model "$DRAFT" --spec-max "$SPEC_MAX") ;;
        esac
      else
        read -r ctk ctv <<< "$(ctk_ctv "$scheme")"
        args=(-m "$TARGET" -t "$T" -c 4096 -np 1 -fa on -ctk "$ctk" -ctv "$ctv")
        case "$drafter" in
          ngram) args+=(--spec-type ngram-simple --spec-ngram-simple-size-n 3
                        --spec-ngram-simple-size-m "$SPEC_MAX") ;;
          draft) args+=(--spec-type draft-simple --model-draft "$DRAFT" -ctkd "$ctk" -ctvd "$ctv"
                        -td "$T" --spec-draft-n-max "$SPEC_MAX" --spec-draft-p-min 0.75) ;;
        esac
      fi
      echo "$tag (load $(load))" >&2
      start_server "$OUT/log/$tag.log" "$engine" "${args[@]}"
      {
        printf '{"engine": "%s", "scheme": "%s", "drafter": "%s", "load": "%s", "sets": {' \
          "$engine" "$scheme" "$drafter" "$(load)"
        sep=""
        for set in $SETS; do
          printf '%s"%s": ' "$sep" "$set"; sep=", "
          python3 "$ROOT/bench/scripts/spec_client.py" "$URL" "$engine" "$set" "$MAX_TOKENS"
        done
        printf '}}\n'
      } > "$OUT/$tag.json.tmp"
      stop_server
      mv "$OUT/$tag.json.tmp" "$OUT/$tag.json"
    done
  done
done

python3 - "$OUT" "${JSON_OUT:-$ROOT/docs/bench/speculative.json}" "$T" "$MAX_TOKENS" "$SPEC_MAX" <<'EOF'
import glob, json, platform, sys
out, dst, threads, max_tokens, spec_max = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = []
for f in sorted(glob.glob(f"{out}/*.json")):
    p = json.load(open(f))
    for prompts, s in p["sets"].items():
        toks = sum(r["tokens"] for r in s["requests"])
        rows.append({"engine": p["engine"], "model": "qwen2.5-1.5b", "scheme": p["scheme"],
                     "drafter": p["drafter"], "prompts": prompts, "tok_s": s["tok_s"],
                     "accept_rate": s["accept_rate"], "drafted": s["drafted"],
                     "accepted": s["accepted"],
                     # target forward steps = tokens - accepted drafts (one target token each)
                     "tokens_per_step": toks / (toks - s["accepted"]) if toks > s["accepted"] else None,
                     "tokens": toks, "load": p["load"]})
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
json.dump({"threads": threads, "max_tokens": max_tokens, "spec_max": spec_max, "cpu": cpu,
           "rows": rows}, open(dst, "w"), indent=1)
base = {(r["engine"], r["scheme"], r["prompts"]): r["tok_s"] for r in rows if r["drafter"] == "none"}
print("| engine | KV | prompts | drafter | decode tok/s | speed-up | accept rate | tokens/step |")
print("|---|---|---|---|---|---|---|---|")
for r in sorted(rows, key=lambda r: (r["prompts"], r["scheme"], r["engine"], r["drafter"])):
    b = base.get((r["engine"], r["scheme"], r["prompts"]))
    fmt = lambda v, spec: "-" if v is None else format(v, spec)
    print(f"| {r['engine']} | {r['scheme']} | {r['prompts']} | {r['drafter']} | {fmt(r['tok_s'], '.2f')} | "
          f"{fmt(r['tok_s'] / b if b and r['tok_s'] else None, '.2f')}x | {fmt(r['accept_rate'], '.2f')} | "
          f"{fmt(r['tokens_per_step'], '.2f')} |")
EOF
