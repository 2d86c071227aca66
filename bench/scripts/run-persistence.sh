#!/usr/bin/env bash
# Issue 25 persistence table: KV snapshot bytes, save ms, load ms (page cache cold and
# warm) and time to first token cold (prefill) vs restored, per model, prompt length and
# scheme, three ways for turbokv and one for llama.cpp (same GGUF, same threads):
#   session       turbokv generate -n 1 --save-session F, then --load-session F (the tool
#                 prints ttft, the write's ms and the snapshot's read-and-check ms)
#   slot          a server on one slot: the prompt (max_tokens 1), POST /slots/0?action=save,
#                 restart, ?action=restore, the prompt again: turbokv serve --slot-save-path
#                 and llama-server --slot-save-path -np 1 -fa on -ctk/-ctv (n_written,
#                 timings.save_ms / restore_ms from the servers, TTFT = the request's wall time)
#   prompt-cache  turbokv serve --prompt-cache DIR: the prompt, stop, restart, the prompt
#                 again (bytes = the directory's blocks; cached_tokens from usage)
# Writes docs/bench/persistence.json and prints the table (docs/bench/persistence.md is
# written by hand around it).
#   bench/scripts/run-persistence.sh [MODEL...]   (smollm2 | qwen2.5-1.5b; default both, fetched if missing)
# env: T=2 PROMPTS=2048,8000 SCHEMES="bf16 turbo turbo:k4v3" VIAS="session slot prompt-cache"
#      ENGINES="turbokv llama.cpp" COLD=auto|drop|fadvise|none OUT_DIR=dir (resumable)
#      JSON_OUT=docs/bench/persistence.json TKV_BIN TKV_PEER_DIR TKV_MODEL_DIR
# KV types for llama.cpp: bf16 -> f16/f16, turbo (k8v3) -> q8_0/q4_0, turbo:k4v3 -> q4_0/q4_0.
# COLD: how the snapshot leaves the page cache before a cold load: drop = sync and
# `echo 3 > /proc/sys/vm/drop_caches` (root), then the GGUF is read back so only the
# snapshot is cold; fadvise = posix_fadvise(DONTNEED) on the snapshot files only;
# auto = drop when /proc/sys/vm/drop_caches is writable, else fadvise. The bytes of the
# snapshot still resident at the cold load are recorded per row (fincore).
# Smoke run (every path once, a minute): PROMPTS=256 SCHEMES="bf16 turbo" COLD=fadvise \
#   JSON_OUT=/tmp/p.json bench/scripts/run-persistence.sh smollm2
set -euo pipefail
source "$(dirname "$0")/servers.sh"
T="${T:-2}"; PROMPTS="${PROMPTS:-2048,8000}"; SCHEMES="${SCHEMES:-bf16 turbo turbo:k4v3}"
VIAS="${VIAS:-session slot prompt-cache}"; ENGINES="${ENGINES:-turbokv llama.cpp}"; COLD="${COLD:-auto}"
if [ "$COLD" = auto ]; then
  COLD=fadvise; [ -w /proc/sys/vm/drop_caches ] && COLD=drop
fi
OUT="${OUT_DIR:-$(mktemp -d)}"; mkdir -p "$OUT"
if [ $# -gt 0 ]; then MODELS=("$@"); else MODELS=(smollm2 qwen2.5-1.5b); fi
check_bins "$ENGINES"
echo "raw results in $OUT (cold page cache by: $COLD)" >&2

make_cold() {  # make_cold GGUF FILE...: the files out of the page cache, the model in it
  local gguf="$1"; shift
  if [ "$COLD" = drop ]; then
    sync; echo 3 > /proc/sys/vm/drop_caches; cat "$gguf" > /dev/null
  elif [ "$COLD" = fadvise ]; then
    "${HTTP[@]}" evict "$@" > /dev/null
  fi
}
step() {  # step FILE NAME JSON: one measured step, appended to the point's raw file
  printf '{"step": "%s", "load": "%s", "r": %s}\n' "$2" "$(load)" "$3" >> "$1"
}
dir_settled() {  # dir_settled DIR: wait until the background prompt-cache writer is done
  local prev=-1 cur
  for _ in $(seq 1 240); do
    cur="$(du -sb "$1" | cut -f1)"
    [ "$cur" -gt 0 ] && [ "$cur" = "$prev" ] && return 0
    prev="$cur"; sleep 1
  done
  echo "prompt cache $1 still changing after 240 s" >&2
}

tkv_session() {  # MODEL GGUF N SCHEME PROMPT CTX
  local f="$OUT/tkv-session-$1-$3-${4//:/_}.jsonl" snap="$OUT/snap/tkv-$1-$3-${4//:/_}.kv" e
  [ -f "$f.done" ] && return 0; rm -f "$f"; mkdir -p "$OUT/snap" "$OUT/log"
  echo "turbokv session $1 N=$3 $4 (load $(load))" >&2
  local G=("$BIN" generate -m "$2" -f "$5" -n 1 --temp 0 -t "$T" -c "$6" --kv-quant "$4")
  e="$OUT/log/${f##*/}"
  "${G[@]}" --save-session "$snap" > /dev/null 2> "$e.save"
  step "$f" save "$(python3 -c 'import json,sys; print(json.dumps({"stderr": open(sys.argv[1]).read(), "bytes": int(sys.argv[2])}))' "$e.save" "$(stat -c %s "$snap")")"
  for c in warm cold; do
    [ "$c" = cold ] && make_cold "$2" "$snap"
    local res; res="$("${HTTP[@]}" resident "$snap")"
    "${G[@]}" --load-session "$snap" > /dev/null 2> "$e.$c"
    step "$f" "load-$c" "$(python3 -c 'import json,sys; print(json.dumps({"stderr": open(sys.argv[1]).read(), **json.loads(sys.argv[2])}))' "$e.$c" "$res")"
  done
  rm -f "$snap"
  printf '{"engine": "turbokv", "model": "%s", "scheme": "%s", "prompt_tokens": %s, "cold": "%s"}\n' \
    "$1" "$4" "$3" "$COLD" > "$f.done"
}

# One server run of the slot and prompt-cache paths for ENGINE (turbokv | llama.cpp):
# cold prompt, save slot (and the prompt cache behind it), then per warm/cold a restart
# and a restore (or a prompt-cache hit) and the prompt again.
server_paths() {  # ENGINE MODEL GGUF N SCHEME PROMPT CTX
  local engine="$1" name="$2" gguf="$3" n="$4" s="$5" prompt="$6" ctx="$7" kv args tag
  if [ "$engine" = turbokv ]; then
    kv="$s"; args=(-m "$gguf" -t "$T" -c "$ctx" --kv-quant "$s" --parallel 1)
  else
    read -r ck cv <<<"$(ctk_ctv "$s")"; kv="$ck/$cv"
    args=(-m "$gguf" -t "$T" -c "$ctx" -np 1 -fa on -ctk "$ck" -ctv "$cv")
  fi
  tag="$name-$n-${kv//[:\/]/_}"
  local f="$OUT/$engine-server-$tag.jsonl" sd="$OUT/slots/$engine-$tag" pd="$OUT/pcache/$tag"
  [ -f "$f.done" ] && return 0; rm -f "$f"; rm -rf "$sd" "$pd"; mkdir -p "$sd" "$OUT/log"
  echo "$engine slot$([ "$engine" = turbokv ] && [[ "$VIAS" == *prompt-cache* ]] && echo ' + prompt-cache') $name N=$n $kv (load $(load))" >&2
  local log="$OUT/log/${f##*/}" extra=()
  [ "$engine" = turbokv ] && [[ "$VIAS" == *prompt-cache* ]] && extra=(--prompt-cache "$pd")
  start_server "$log.first" "$engine" "${args[@]}" --slot-save-path "$sd" "${extra[@]}"
  step "$f" cold "$("${HTTP[@]}" complete "$URL" "$prompt")"
  step "$f" save "$("${HTTP[@]}" slot "$URL" 0 save snap.bin)"
  if [ ${#extra[@]} -gt 0 ]; then
    dir_settled "$pd"
    step "$f" pcache-written "$(printf '{"bytes": %s, "metrics": %s}' "$(du -sb "$pd" | cut -f1)" "$("${HTTP[@]}" metrics "$URL")")"
  fi
  stop_server
  for c in warm cold; do
    if [[ "$VIAS" == *slot* ]]; then
      start_server "$log.slot-$c" "$engine" "${args[@]}" --slot-save-path "$sd"
      [ "$c" = cold ] && make_cold "$gguf" "$sd/snap.bin"
      step "$f" "restore-$c" "$(printf '{"resident": %s, "restore": %s}' "$("${HTTP[@]}" resident "$sd/snap.bin")" "$("${HTTP[@]}" slot "$URL" 0 restore snap.bin)")"
      step "$f" "restored-$c" "$("${HTTP[@]}" complete "$URL" "$prompt")"
      stop_server
    fi
    if [ ${#extra[@]} -gt 0 ]; then
      start_server "$log.pcache-$c" "$engine" "${args[@]}" "${extra[@]}"
      [ "$c" = cold ] && make_cold "$gguf" "$pd"
      local res; res="$("${HTTP[@]}" resident "$pd")"
      step "$f" "pcache-$c" "$(printf '{"resident": %s, "req": %s, "metrics": %s}' "$res" "$("${HTTP[@]}" complete "$URL" "$prompt")" "$("${HTTP[@]}" metrics "$URL")")"
      stop_server
    fi
  done
  printf '{"engine": "%s", "model": "%s", "scheme": "%s", "prompt_tokens": %s, "cold": "%s"}\n' \
    "$engine" "$name" "$kv" "$n" "$COLD" > "$f.done"
}

i=0
for name in "${MODELS[@]}"; do
  ensure_model "$name"; gguf="$(gguf_of "$name")"
  for n in ${PROMPTS//,/ }; do
    # Room past the prompt (llama-server caps -c at the model's training context: SmolLM2
    # has 8192, hence the 8000-token long prompt).
    ctx=$(( n + 256 )); prompt="$OUT/prompt-$name-$n.txt"
    if [ ! -s "$prompt" ]; then  # exactly n tokens of random words, counted by the server
      start_server "$OUT/prompt-$name-$n.log" turbokv -m "$gguf" -t "$T" -c "$ctx" --parallel 1
      "${HTTP[@]}" prompts "$URL" "$n" 1 "$n" "$prompt" --text > /dev/null; stop_server
    fi
    for s in $SCHEMES; do
      first=turbokv; second=llama.cpp; [ $((i++ % 2)) -eq 1 ] && { first=llama.cpp; second=turbokv; }
      for e in $first $second; do
        [[ " $ENGINES " == *" $e "* ]] || continue
        if [ "$e" = turbokv ]; then
          [[ "$VIAS" == *session* ]] && tkv_session "$name" "$gguf" "$n" "$s" "$prompt" "$ctx"
          [[ "$VIAS" == *slot* || "$VIAS" == *prompt-cache* ]] && server_paths turbokv "$name" "$gguf" "$n" "$s" "$prompt" "$ctx"
        else
          [[ "$VIAS" == *slot* ]] && server_paths llama.cpp "$name" "$gguf" "$n" "$s" "$prompt" "$ctx"
        fi
      done
    done
  done
done
python3 "$ROOT/bench/scripts/persistence_rows.py" "$OUT" "${JSON_OUT:-$ROOT/docs/bench/persistence.json}" "$T" "$COLD"
