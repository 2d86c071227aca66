#!/usr/bin/env bash
# usage: cli_errors_test.sh TURBOKV — checks exit codes and messages of bad invocations.
set -u
BIN="$1"
pass=0 fail=0
expect() {  # expect NAME PATTERN CMD...
  local name="$1" pat="$2"; shift 2
  local out rc
  out="$("$@" 2>&1 </dev/null)"; rc=$?
  if [ "$rc" -ne 0 ] && grep -qE "$pat" <<<"$out"; then
    pass=$((pass + 1)); echo "ok   $name"
  else
    fail=$((fail + 1)); echo "FAIL $name (rc=$rc): $out"
  fi
}
expect unknown-flag "not expected: --bogus" "$BIN" generate --bogus
expect unknown-subcommand "subcommand" "$BIN" frobnicate
expect missing-model "model file not found: /nonexistent.gguf" "$BIN" generate -m /nonexistent.gguf -n 1
expect bad-kv-quant "unknown KV cache type 'turbo:k3v9'.*valid: bf16" "$BIN" generate --kv-quant turbo:k3v9 -n 1
expect bad-kv-quant-bench "valid: bf16" "$BIN" bench --kv-quant fp8 -n 1
expect bad-threads "threads" "$BIN" generate -t -3
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
