#!/usr/bin/env bash
# usage: synth_model_cli_test.sh TURBOKV — `turbokv synth-model`: bad shapes and
# flags are refused with the flag named and no file left; tiny models (2 layers,
# d_model 256, heads 4/2, d_ff 512) in q4_0, q8_0, q4_K and f16 run through
# `turbokv generate` and `turbokv bench`, and, where the peer build exists
# (~/.cache/turbokv/llama.cpp/build/bin), through llama-bench and llama-perplexity
# (finite: a NaN logit shows as nan). The tokenizer comes from SmolLM2 in the model cache.
set -u
BIN="$1"
source "$(dirname "$0")/cli_lib.sh"
MODEL_DIR="${TKV_MODEL_DIR:-${HOME}/.cache/turbokv/models}"
export TKV_MODEL_DIR="$MODEL_DIR"
[ -f "$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf" ] || { echo "FAIL SmolLM2 missing in $MODEL_DIR (scripts/fetch-models)"; exit 1; }
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
TINY=(--layers 2 --d-model 256 --heads 4 --kv-heads 2 --ff 512 --ctx 512)

# Refusals: the message names the flag, and nothing is left behind.
expect no-output "--output is required" "$BIN" synth-model "${TINY[@]}"
expect kv-heads "--kv-heads 3 must divide --heads 4" \
  "$BIN" synth-model -o "$DIR/bad.gguf" --layers 2 --d-model 256 --heads 4 --kv-heads 3 --ff 512
expect head-width "--heads 4 x --head-dim 32 = 128 must equal --d-model 256 for llama" \
  "$BIN" synth-model -o "$DIR/bad.gguf" "${TINY[@]}" --head-dim 32
expect block "--d-model 128 is not a multiple of q4_K's block of 256" \
  "$BIN" synth-model -o "$DIR/bad.gguf" --layers 2 --d-model 128 --heads 2 --ff 256 --type Q4_K
expect bad-type "unknown weight type 'q8_1' \(valid: f32, f16, bf16, q4_0" \
  "$BIN" synth-model -o "$DIR/bad.gguf" "${TINY[@]}" --type q8_1
expect bad-preset "unknown --preset 'llama9' \(valid: llama3-8b\)" "$BIN" synth-model -o "$DIR/bad.gguf" --preset llama9
expect no-shape "without --preset, --layers, --d-model, --heads and --ff are required" \
  "$BIN" synth-model -o "$DIR/bad.gguf" --layers 2
expect bad-arch "--arch: mamba not in" "$BIN" synth-model -o "$DIR/bad.gguf" "${TINY[@]}" --arch mamba
expect bad-tokenizer "/nonexistent.gguf" "$BIN" synth-model -o "$DIR/bad.gguf" "${TINY[@]}" --tokenizer-from /nonexistent.gguf
expect no-dir "cannot create" "$BIN" synth-model -o /nonexistent-dir/x.gguf "${TINY[@]}"
if ls "$DIR"/bad.gguf* >/dev/null 2>&1; then bad no-leftovers "$(ls "$DIR")"; else ok no-leftovers; fi
# --help says where n_vocab comes from and what the file is for.
help="$("$BIN" synth-model --help 2>&1)"
grep -q "n_vocab comes from this tokenizer" <<<"$help" && grep -q "never report quality" <<<"$help" \
  && ok help || bad help "$help"

LB="${HOME}/.cache/turbokv/llama.cpp/build/bin"
[ -x "$LB/llama-bench" ] || echo "skip llama.cpp checks: $LB/llama-bench is absent (build the peer to run them)"
for type in Q4_0 Q8_0 Q4_K F16; do
  f="$DIR/tiny-$type.gguf"
  out="$("$BIN" synth-model -o "$f" "${TINY[@]}" --type "$type" --seed 3 2>&1)"
  if [ $? -eq 0 ] && [ -f "$f" ] && [ ! -e "$f.tmp" ] && grep -q "n_vocab 49152" <<<"$out"; then
    ok "write-$type"
  else
    bad "write-$type" "$out"; continue
  fi
  out="$("$BIN" generate -m "$f" -p "Hello" -n 4 -t 2 --temp 0 2>&1 </dev/null)" \
    && ok "generate-$type" || bad "generate-$type" "$out"
  js="$("$BIN" bench -m "$f" -p 16 -n 4 -r 1 -t 2 --json 2>/dev/null)"
  python3 -c "import json,sys,math
j = json.loads(sys.stdin.read())
rows = [r for r in j['rows'] if r.get('engine') == 'turbokv' and 'tok_s' in r]
assert len(rows) == 2 and all(math.isfinite(r['tok_s']) and r['tok_s'] > 0 for r in rows), j" \
    <<<"$js" && ok "bench-$type" || bad "bench-$type" "$js"
  [ -x "$LB/llama-bench" ] || continue
  js="$(LD_LIBRARY_PATH="$LB" "$LB/llama-bench" -m "$f" -p 16 -n 4 -t 2 -r 1 -o json 2>/dev/null)"
  python3 -c "import json,sys,math
rows = json.loads(sys.stdin.read())
assert len(rows) == 2 and all(math.isfinite(r['avg_ts']) and r['avg_ts'] > 0 for r in rows), rows" \
    <<<"$js" && ok "llama-bench-$type" || bad "llama-bench-$type" "$js"
  if [ -x "$LB/llama-perplexity" ]; then
    out="$(LD_LIBRARY_PATH="$LB" "$LB/llama-perplexity" -m "$f" -f "$(dirname "$0")/../../data/wikitext-2-raw-test.txt" \
      -c 64 --chunks 1 -t 2 2>&1)"
    # Finite logits only: the value itself is meaningless for random weights.
    grep -qE "Final estimate: PPL = [0-9.]+ " <<<"$out" && ! grep -qi "nan" <<<"$(grep 'Final estimate' <<<"$out")" \
      && ok "llama-finite-$type" || bad "llama-finite-$type" "$(tail -5 <<<"$out")"
  fi
done
echo "passed $pass, failed $fail"
[ "$fail" -eq 0 ]
