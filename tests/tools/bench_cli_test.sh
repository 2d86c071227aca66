#!/usr/bin/env bash
# usage: bench_cli_test.sh TURBOKV — `turbokv bench` modes over the public API:
# bad values of the batching flags are refused before any model is loaded; a tiny
# --concurrency run, --prefix-hit and --fit give JSON rows that parse, with
# positive figures, on the SmolLM2 model of the model cache.
set -u
BIN="$1"
source "$(dirname "$0")/cli_lib.sh"
# Refusals: the model path does not exist, so each error must come before it is opened.
NO=(-m /nonexistent.gguf)
expect concurrency-zero "--concurrency: value 0 out of range \(valid: 1 to 4096\)" "$BIN" bench "${NO[@]}" --concurrency 0
expect concurrency-big "value 5000 out of range \(valid: 1 to 4096\)" "$BIN" bench "${NO[@]}" --concurrency 1,5000
expect concurrency-word "'abc' is not an integer" "$BIN" bench "${NO[@]}" --concurrency 4,abc
expect concurrency-n1 "every -n must be >= 2" "$BIN" bench "${NO[@]}" --concurrency 2 -n 1
expect concurrency-p0 "every prompt length \(-p\) must be >= 1" "$BIN" bench "${NO[@]}" --concurrency 2 -p 0,64
expect prefix-hit-short "--prefix-hit: every prompt length \(-p\) must be > 64" "$BIN" bench "${NO[@]}" --prefix-hit -p 64
expect bad-scheme "unknown KV cache type 'fp8'.*valid: bf16" "$BIN" bench "${NO[@]}" --schemes bf16,fp8
expect empty-schemes "no scheme given" "$BIN" bench "${NO[@]}" --schemes ,
expect bad-budget "kv-budget" "$BIN" bench "${NO[@]}" --fit --kv-budget 12XB
expect depth-ignored "warning: --depth has no effect with --concurrency" "$BIN" bench "${NO[@]}" --concurrency 2 -d 64
expect spec-n1 "--spec: -n must be >= 2" "$BIN" bench "${NO[@]}" --spec ngram -n 1
expect spec-max-big "--spec-max: value 33 out of range \(valid: 1 to 32\)" "$BIN" bench "${NO[@]}" --spec ngram --spec-max 33

MODEL_DIR="${TKV_MODEL_DIR:-${HOME}/.cache/turbokv/models}"
export TKV_MODEL_DIR="$MODEL_DIR"
[ -f "$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf" ] || { echo "FAIL SmolLM2 missing in $MODEL_DIR (scripts/fetch-models)"; exit 1; }
# A pool that holds 2 of the 4 sequences (bf16: 23040 B/token, 576-token contexts): refused, named.
expect pool-too-small "--concurrency 4 at ctx 512: the KV pool holds [0-9]+ tokens.*raise --kv-budget" \
  "$BIN" bench --concurrency 4 -p 512 -n 4 --kv-budget 30MiB
# check NAME JSON PYTHON: PYTHON asserts on j (the parsed output); it prints why it fails.
check() {
  local name="$1" js="$2" code="$3" why
  why="$(python3 -c "import json,sys
j = json.loads(sys.stdin.read())
$code" <<<"$js" 2>&1)" && ok "$name" || bad "$name" "$why :: $js"
}
js="$("$BIN" bench --concurrency 2 -p 64 -n 4 -r 1 -t 2 --json 2>/dev/null)"
check concurrency-json "$js" '
rows = [r for r in j["rows"] if r["test"] == "batch"]
assert len(rows) == 1, rows
r = rows[0]
assert r["engine"] == "turbokv" and r["model"] and r["scheme"] == "bf16", r
assert r["concurrency"] == 2 and r["ctx"] == 64 and r["n_gen"] == 4, r
for k in ("agg_tok_s", "tpot_ms", "prefill_tok_s", "gbs"):
    assert r[k] > 0, (k, r)
# 2 sequences x 3 tokens after the first at most, over at least one step of ~TPOT.
assert r["agg_tok_s"] <= 2 * 1000.0 / r["tpot_ms"] * 1.5, r'
js="$("$BIN" bench --spec ngram -n 24 -r 1 -t 2 --json 2>/dev/null)"
check spec-json "$js" '
rows = {r["drafter"]: r for r in j["rows"] if r["test"] == "spec"}
assert set(rows) == {"none", "ngram"}, rows
assert all(r["tok_s"] > 0 and r["prompts"] == "code-edit" and r["n_gen"] == 24 for r in rows.values()), rows
s = rows["ngram"]
assert 0 < s["accept_rate"] <= 1 and s["tokens_per_step"] > 1, s'
js="$("$BIN" bench --prefix-hit -p 192 -r 1 -t 2 --json 2>/dev/null)"
check prefix-hit-json "$js" '
r = [r for r in j["rows"] if r["test"] == "ttft"][0]
assert r["ctx"] == 192 and r["cold_ms"] > 0 and r["hit_ms"] > 0, r
assert r["cached_tokens"] == 128, r  # whole pages below the prompt length'
js="$("$BIN" bench --fit --schemes bf16,turbo --kv-budget 1GiB -c 4096 --json 2>/dev/null)"
check fit-json "$js" '
f = {r["scheme"]: r for r in j["fit"]}
assert f["bf16"]["seqs"] == (1 << 30) // (4096 * 23040), f  # 30 layers x 3 kv heads x 64 x 2 x bf16
assert f["turbo"]["bytes_per_seq"] == 4096 * 9000, f
assert f["turbo"]["vs_bf16"] >= 2.5, f'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
