#!/usr/bin/env bash
# usage: eval_cli_test.sh TURBOKV — `turbokv eval` at its edges: bad flags are
# rejected before any work, flags the protocol ignores are warned about, the
# default corpus and cache resolve without the current directory, and a corrupt
# base cache is reported and recomputed.
set -u
BIN="$(realpath "$1")"
MODEL="${HOME:-/nonexistent}/.cache/turbokv/models/SmolLM2-135M-Instruct.Q4_1.gguf"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
pass=0 fail=0
check() {  # check NAME WANT_RC(0|nonzero) PATTERN CMD...
  local name="$1" want="$2" pat="$3"; shift 3
  local out rc
  out="$(cd "$WORK" && "$@" 2>&1 </dev/null)"; rc=$?
  if { [ "$want" = 0 ] && [ "$rc" -eq 0 ]; } || { [ "$want" != 0 ] && [ "$rc" -ne 0 ]; }; then
    if grep -qE -- "$pat" <<<"$out"; then pass=$((pass + 1)); echo "ok   $name"; return; fi
  fi
  fail=$((fail + 1)); echo "FAIL $name (rc=$rc): $out"
}
# A bad scheme is named with the valid forms before the model is even opened
# (the model path does not exist, so any later check would report that instead).
check bad-scheme nonzero "schemes: .*unknown KV cache type 'garbage'.*valid: bf16" \
  "$BIN" eval -m /nonexistent.gguf --schemes bf16,garbage
check empty-schemes nonzero "schemes is empty" "$BIN" eval -m /nonexistent.gguf --schemes ,
check bad-protocol nonzero "unknown protocol 'bogus' \(valid: serving-kl, wikitext, needle\)" \
  "$BIN" eval -m /nonexistent.gguf --protocol bogus
check bad-lengths nonzero "--lengths: 'abc' is not a number" \
  "$BIN" eval -m /nonexistent.gguf --protocol needle --lengths 1024,abc
for f in "--n-ctx 256" "--chunks 3" "--lengths 1024" "--depths 0.5" "--trials 3"; do
  check "ignored ${f%% *} (serving-kl)" nonzero "warning: .*${f%% *} has no effect with --protocol serving-kl" \
    "$BIN" eval -m /nonexistent.gguf --protocol serving-kl $f
done
for f in "--prompts 2" "--prefix 16" "--steps 4"; do
  check "ignored ${f%% *} (wikitext)" nonzero "warning: .*${f%% *} has no effect with --protocol wikitext" \
    "$BIN" eval -m /nonexistent.gguf --protocol wikitext $f
done
for f in "--base x.tkvbase" "-f x.txt" "--base-topk 4"; do
  check "ignored ${f%% *} (needle)" nonzero "has no effect with --protocol needle" \
    "$BIN" eval -m /nonexistent.gguf --protocol needle $f
done

if [ -f "$MODEL" ]; then
  export XDG_CACHE_HOME="$WORK/cache"
  run=("$BIN" eval -m "$MODEL" --protocol wikitext --n-ctx 64 --chunks 1 --schemes bf16 --no-progress -t 2)
  # Run from an empty directory: the corpus comes from the build's data dir.
  check default-corpus 0 "bf16" "${run[@]}"
  base="$XDG_CACHE_HOME/turbokv/eval/SmolLM2-135M-Instruct.Q4_1.wikitext-64.tkvbase"
  if [ -f "$base" ] && [ ! -e "$WORK/eval-cache" ] && [ -z "$(ls "$XDG_CACHE_HOME/turbokv/eval" | grep -v '\.tkvbase$')" ]; then
    pass=$((pass + 1)); echo "ok   cache-under-xdg"
  else
    fail=$((fail + 1)); echo "FAIL cache-under-xdg: $(ls -la "$WORK" "$XDG_CACHE_HOME/turbokv/eval" 2>&1)"
  fi
  # Flip one payload byte: the cache is reported and recomputed, never trusted.
  size=$(stat -c %s "$base")
  printf '\xff' | dd of="$base" bs=1 seek=$((size - 3)) conv=notrunc status=none
  check corrupt-cache 0 "warning: .*checksum mismatch.*recomputing" "${run[@]}"
  check recomputed-cache 0 "bf16" "${run[@]}"
  out="$(cd "$WORK" && "${run[@]}" 2>&1)"; rc=$?
  if [ "$rc" -eq 0 ] && ! grep -q warning <<<"$out"; then
    pass=$((pass + 1)); echo "ok   rewritten-cache-clean"
  else
    fail=$((fail + 1)); echo "FAIL rewritten cache (rc=$rc): $out"
  fi
  check corpus-env nonzero "cannot read corpus /nonexistent-data/wikitext-2-raw-test.txt" \
    env TKV_DATA_DIR=/nonexistent-data "${run[@]}"
else
  echo "note: $MODEL absent (scripts/fetch-models smollm2); model-backed eval checks not run"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
