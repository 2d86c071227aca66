#!/usr/bin/env bash
# usage: cli_errors_test.sh TURBOKV — checks exit codes and messages of bad invocations,
# and the CLI's edge behaviour on the SmolLM2 model of the model cache
# ($TKV_MODEL_DIR or ~/.cache/turbokv/models, as the e2e tests find it).
set -u
BIN="$1"
source "$(dirname "$0")/cli_lib.sh"
expect unknown-flag "not expected: --bogus" "$BIN" generate --bogus
expect unknown-subcommand "unknown subcommand 'frobnicate'.*generate" "$BIN" frobnicate
expect serve-bad-port "--port: value 70000 out of range \(valid: 0 to 65535\)" "$BIN" serve --port 70000
expect serve-key-and-file "excludes" "$BIN" serve --api-key k --api-key-file /dev/null
expect serve-budget "KV budget cannot hold one context.*lower -c or raise --kv-budget" "$BIN" serve --kv-quant turbo --kv-budget 1MiB --port 0
expect_ok version "^turbokv [0-9]+\.[0-9]+\.[0-9]+" "$BIN" --version
expect missing-model "model file not found: /nonexistent.gguf" "$BIN" generate -m /nonexistent.gguf -n 1
expect unknown-model-name "unknown model 'nosuchmodel'.*smollm2, gemma3, qwen2.5-1.5b" "$BIN" generate -m nosuchmodel -n 1
expect unfetched-model-name "model 'gemma3' is not fetched.*scripts/fetch-models gemma3" \
  env TKV_MODEL_DIR=/nonexistent-dir "$BIN" generate -m gemma3 -n 1
expect bad-kv-quant "unknown KV cache type 'turbo:k3v9'.*valid: bf16" "$BIN" generate --kv-quant turbo:k3v9 -n 1
expect bad-kv-quant-bench "valid: bf16" "$BIN" bench --kv-quant fp8 -n 1
expect bad-threads "threads" "$BIN" generate -t -3
expect threads-above-cores "value 1000 out of range \(valid: 0 to [0-9]+\)" "$BIN" generate -t 1000 -n 1
expect n-predict-negative "value -1 out of range \(valid: 0 to 2147483647\)" "$BIN" generate -n -1
expect ctx-zero "--ctx: value 0 out of range \(valid: >= 1\)" "$BIN" generate -c 0 -n 1
expect temp-nan "temperature nan out of range \(valid: finite, >= 0" "$BIN" generate --temp nan -n 1
expect top-p-5 "top-p 5 out of range \(valid: 0 < top-p <= 1" "$BIN" generate --top-p 5 -n 1
expect min-p "min-p 2 out of range" "$BIN" chat --min-p 2
expect top-k "top-k -2 out of range" "$BIN" generate --top-k -2 -n 1
expect repeat-penalty-0 "repeat-penalty 0 out of range \(valid: finite, > 0" "$BIN" generate --repeat-penalty 0 -n 1
expect repeat-last-n "repeat-last-n -5 out of range" "$BIN" generate --repeat-last-n -5 -n 1
expect prompt-and-file "excludes" "$BIN" generate -p hi -f /etc/hostname -n 1
expect prompt-file-unreadable "cannot read prompt file '/nonexistent.txt'" "$BIN" generate -f /nonexistent.txt -n 1
expect bench-nothing "nothing to measure" "$BIN" bench -p 0 -n 0
expect spec-unknown "--spec: lookahead not in \{none,ngram,draft\}" "$BIN" generate --spec lookahead -n 1
expect spec-max-0 "--spec-max: value 0 out of range \(valid: 1 to 32\)" "$BIN" generate --spec ngram --spec-max 0 -n 1
expect spec-max-chat "--spec-max: value 99 out of range \(valid: 1 to 32\)" "$BIN" chat --spec ngram --spec-max 99
# No huge doubles in any range message.
out="$("$BIN" generate -n -1 2>&1)"; grep -q "179769" <<<"$out" && bad no-huge-range "$out" || ok no-huge-range
expect_ok help-defaults "-c,--ctx,--ctx-size INT=4096" "$BIN" generate --help

# With the model: edge behaviour of real runs (greedy, a few tokens each).
MODEL_DIR="${TKV_MODEL_DIR:-${HOME}/.cache/turbokv/models}"
export TKV_MODEL_DIR="$MODEL_DIR"
[ -f "$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf" ] || { echo "FAIL SmolLM2 missing in $MODEL_DIR (scripts/fetch-models)"; exit 1; }
G=("$BIN" generate --temp 0)
expect prompt-longer-than-ctx "prompt is [0-9]+ tokens, longer than the context \(-c 4\)" "${G[@]}" -p "one two three four five six seven" -c 4 -n 1
expect_ok context-full "finish: context full" "${G[@]}" -p hi -c 8 -n 100
expect_ok context-full-timings "decode [0-9]+ tok at" "${G[@]}" -p hi -c 8 -n 100
expect_ok ctx-exact "kv cache bf16: 3 tokens" "${G[@]}" -p hi -c 3 -n 100
expect_ok system-without-chat "warning: --system has no effect without --chat" "${G[@]}" -p hi -n 1 --system x
expect_ok greedy-ignores-top-k "warning: --top-k has no effect with --temp 0" "${G[@]}" -p hi -n 1 --top-k 5
expect_ok float-cache-ignores-quant-start "warning: --kv-quant-start has no effect with a float KV cache" "${G[@]}" -p hi -n 1 --kv-quant-start 4
expect_ok kv-report-ignores-json "warning: --json has no effect with --kv-report" "$BIN" bench --kv-report --json --schemes bf16 -c 64
expect draft-model-missing "--draft-model: no such file: /x.gguf" "${G[@]}" -p hi -n 1 --draft-model /x.gguf
expect draft-without-model "--spec draft needs --draft-model PATH" "${G[@]}" -p hi -n 1 --spec draft
expect draft-and-ngram "--spec ngram and --draft-model: choose one drafter" "${G[@]}" -p hi -n 1 --spec ngram --draft-model /x.gguf
expect_ok spec-max-without-spec "warning: --spec-max has no effect without --spec" "${G[@]}" -p hi -n 1 --spec-max 4
# Prompt lookup: greedy output unchanged, drafts reported.
rep="a = 1; b = 2; c = 3; a = 1; b = 2; c = 3; a = 1;"
plain="$("${G[@]}" -p "$rep" -n 24 2>/dev/null)"
spec_out="$("${G[@]}" -p "$rep" -n 24 --spec ngram --spec-max 4 2>/tmp/spec.$$)"; err="$(cat /tmp/spec.$$)"; rm -f /tmp/spec.$$
if [ "$spec_out" = "$plain" ] && grep -qE "speculation: [1-9][0-9]* of [0-9]+ draft tokens accepted" <<<"$err"; then ok spec-ngram; else bad spec-ngram "got '$spec_out' want '$plain' ($err)"; fi
expect_ok short-name "finish: length" "${G[@]}" -m smollm2 -p hi -n 1
expect_ok random-seed "^seed: [0-9]+" "$BIN" generate -p hi -n 1
out="$("$BIN" generate -p hi -n 1 --seed 7 2>&1)"; grep -q "^seed:" <<<"$out" && bad seed-given-not-printed "$out" || ok seed-given-not-printed
tmp="$(mktemp)"; trap 'rm -f "$tmp" "$tmp.in" "$tmp.gguf"' EXIT
printf 'The capital of France is' >"$tmp"
expect_ok prompt-file "^The capital of France is" "${G[@]}" -f "$tmp" -n 2
# Stop string: a word from the middle of the greedy output ends it just before that word.
full="$("${G[@]}" -p "Once upon a time" -n 24 2>/dev/null)"
word="$(tr -s ' \n' '\n\n' <<<"$full" | sed -n 8p)"
cut="$("${G[@]}" -p "Once upon a time" -n 24 --stop "$word" 2>/tmp/stop.$$)"; err="$(cat /tmp/stop.$$)"; rm -f /tmp/stop.$$
prefix="${full%%"$word"*}"
if [ -n "$word" ] && [ "$cut" = "${prefix}" ] && grep -q "finish: stop" <<<"$err"; then ok stop-string; else bad stop-string "word '$word' got '$cut' want '$prefix'"; fi
# --kv-quant-start: the first N tokens are counted at bf16 bytes, the rest at the scheme's.
bytes() { "${G[@]}" -p "Once upon a time" -n 20 "$@" 2>&1 | sed -nE 's/.*: ([0-9]+) tokens, ([0-9]+) bytes used.*/\1 \2/p'; }
read -r n b16 <<<"$(bytes --kv-quant bf16)"; read -r _ bq <<<"$(bytes --kv-quant turbo)"
read -r _ bs <<<"$(bytes --kv-quant turbo --kv-quant-start 8)"
want=$(( 8 * b16 / n + (n - 8) * bq / n ))
[ "$bs" = "$want" ] && ok kv-quant-start-bytes || bad kv-quant-start-bytes "got $bs want $want (n=$n bf16=$b16 turbo=$bq)"
# bench: KV bytes per token and at each depth in the JSON rows.
js="$("$BIN" bench -p 4 -n 2 -d 32 -r 1 --json 2>/dev/null)"
bpt="$(sed -nE 's/.*"kv_bytes_per_token": ([0-9]+).*/\1/p' <<<"$js" | head -1)"
kvb="$(sed -nE 's/.*"kv_bytes": ([0-9]+).*/\1/p' <<<"$js" | head -1)"
[ -n "$bpt" ] && [ "$bpt" -gt 0 ] && [ "$kvb" = "$((32 * bpt))" ] && ok bench-kv-bytes || bad bench-kv-bytes "bpt=$bpt kv=$kvb"
# chat (stdin not a tty: plain lines): / commands, KV summary, context full keeps the session.
C=("$BIN" chat --temp 0 -n 8)
printf 'Hi\n/stats\n/bogus\n/save %s\n/reset\n/stats\n/quit\n' "$tmp" >"$tmp.in"
out="$("${C[@]}" <"$tmp.in" 2>&1)"; rc=$?
[ $rc -eq 0 ] && grep -q "unknown command /bogus; /help" <<<"$out" && grep -q "conversation cleared" <<<"$out" \
  && grep -q "kv cache bf16: 0 tokens" <<<"$out" && grep -q '"role": "user"' "$tmp" \
  && ok chat-commands || bad chat-commands "(rc=$rc) $out"
printf 'Hi\nTell me a long story\n/reset\nHi\n' >"$tmp.in"
out="$("${C[@]}" -c 40 <"$tmp.in" 2>&1)"; rc=$?
[ $rc -eq 0 ] && grep -q "context full" <<<"$out" && grep -q "/reset" <<<"$out" && grep -qE "kv cache bf16: [0-9]+ tokens" <<<"$out" \
  && ok chat-context-full || bad chat-context-full "(rc=$rc) $out"
rm -f "$tmp.in"
# A model without tokenizer.chat_template (SmolLM2 with that key renamed in a copy):
# --chat and chat refuse, naming the model, instead of guessing a format.
src="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
off="$(grep -obUa "tokenizer.chat_template" "$src" | head -1 | cut -d: -f1)"
cp "$src" "$tmp.gguf" && printf 'X' | dd of="$tmp.gguf" bs=1 seek=$((off + 22)) conv=notrunc status=none
expect no-chat-template-generate "model .*$tmp.gguf.* has no chat template" "${G[@]}" -m "$tmp.gguf" --chat -p hi -n 1
expect no-chat-template-chat "has no chat template" "$BIN" chat -m "$tmp.gguf"
expect_ok no-template-plain-generate "finish: length" "${G[@]}" -m "$tmp.gguf" -p hi -n 1
expect_ok generate-ttft "ttft [0-9]+\.[0-9] ms \(submit to first token\)" "${G[@]}" -p hi -n 1
rm -f "$tmp.gguf"
# KV sessions: --save-session writes a snapshot, kv inspect prints its header, a prompt
# continuing its tokens loads it, anything else is refused with the reason.
ses="$(mktemp -d)"
expect_ok session-save "session saved to $ses/a.tkv: 12 tokens \(written in [0-9]+\.[0-9] ms\)" "${G[@]}" -p "The capital of France is" -n 8 --kv-quant turbo --save-session "$ses/a.tkv"
expect_ok kv-inspect "scheme: +turbo:k8v3 \(kind turbo, k8 v3 bits\)" "$BIN" kv inspect "$ses/a.tkv"
expect_ok kv-inspect-tokens "tokens: +12" "$BIN" kv inspect "$ses/a.tkv"
cont="$("$BIN" kv inspect --tokens "$ses/a.tkv" >/dev/null && "${G[@]}" -p "The capital of France is" -n 8 --kv-quant turbo 2>/dev/null)"
expect_ok session-load "12 tokens loaded, not prefilled \(read and checked in [0-9]+\.[0-9] ms\)" "${G[@]}" -p "$cont and more" -n 2 --kv-quant turbo --load-session "$ses/a.tkv"
expect session-other-scheme "snapshot is for scheme turbo:k8v3 \(turbo\), this engine runs bf16" "${G[@]}" -p "$cont" -n 1 --load-session "$ses/a.tkv"
expect session-not-prefix "tokens are not a prefix of the prompt" "${G[@]}" -p "Something else entirely here" -n 1 --kv-quant turbo --load-session "$ses/a.tkv"
expect session-missing "cannot open $ses/none.tkv" "${G[@]}" -p hi -n 1 --load-session "$ses/none.tkv"
head -c 100 "$ses/a.tkv" >"$ses/t.tkv"
expect session-truncated "truncated snapshot" "$BIN" kv inspect "$ses/t.tkv"
expect kv-inspect-not-snapshot "not a turbokv KV snapshot" "$BIN" kv inspect "$src"
expect session-save-unwritable "cannot create /nonexistent-dir/x.tkv" "${G[@]}" -p hi -n 1 --save-session /nonexistent-dir/x.tkv
printf 'Hi\n/quit\n' | "${C[@]}" --save-session "$ses/c.tkv" >/dev/null 2>&1
out="$(printf 'And then?\n/quit\n' | "${C[@]}" --load-session "$ses/c.tkv" 2>&1)"; rc=$?
[ $rc -eq 0 ] && grep -q "resumed 2 messages from $ses/c.tkv" <<<"$out" && grep -qE "\[chat\] [1-9][0-9]* tokens of the session loaded" <<<"$out" && ok chat-session-resume || bad chat-session-resume "(rc=$rc) $out"
rm -rf "$ses"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
