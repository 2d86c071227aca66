# Sourced by the CLI test scripts: pass/fail counters and the expectations.
#   ok NAME | bad NAME WHY
#   expect NAME PATTERN CMD...     non-zero exit and PATTERN (grep -E) in the output
#   expect_ok NAME PATTERN CMD...  exit 0 and PATTERN in the output
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }
expect() {
  local name="$1" pat="$2"; shift 2
  local out rc
  out="$("$@" 2>&1 </dev/null)"; rc=$?
  if [ "$rc" -ne 0 ] && grep -qE -- "$pat" <<<"$out"; then ok "$name"; else bad "$name" "(rc=$rc) $out"; fi
}
expect_ok() {
  local name="$1" pat="$2"; shift 2
  local out rc
  out="$("$@" 2>&1 </dev/null)"; rc=$?
  if [ "$rc" -eq 0 ] && grep -qE -- "$pat" <<<"$out"; then ok "$name"; else bad "$name" "(rc=$rc) $out"; fi
}
