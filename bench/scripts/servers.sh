# shellcheck shell=bash
# Sourced by run-persistence.sh and run-serve.sh: paths, models and the two
# servers (turbokv serve, llama-server) started on a free port and stopped.
#   start_server LOG turbokv|llama.cpp ARGS...   sets SPID and URL; waits for /health
#   stop_server                                  SIGTERM, wait
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${TKV_BIN:-$ROOT/build/cpu-release/tools/turbokv}"
LB="${TKV_PEER_DIR:-$HOME/.cache/turbokv/llama.cpp}/build/bin"
MD="${TKV_MODEL_DIR:-$HOME/.cache/turbokv/models}"
HTTP=(python3 "$ROOT/bench/scripts/bench_http.py")
# llama.cpp with its own (spinning) OpenMP wait policy: run on a quiet machine (see run-batching.sh).
[ -n "${LLAMA_OMP_WAIT:-}" ] && export OMP_WAIT_POLICY="$LLAMA_OMP_WAIT"  # turbokv has no OpenMP
LLAMA_EXTRA=()  # --no-repack when this CPU cannot run the repacked (AMX) kernels
SPID=""; URL=""

gguf_of() {
  case "$1" in
    smollm2) echo "$MD/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    qwen2.5-1.5b) echo "$MD/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" ;;
    *) echo "unknown model $1 (smollm2 | qwen2.5-1.5b)" >&2; exit 2 ;;
  esac
}
ensure_model() {  # ensure_model NAME: fetch it when missing
  [ -f "$(gguf_of "$1")" ] || "$ROOT/scripts/fetch-models" "$1" >&2
}
# KV types for llama.cpp: the nearest llama.cpp block types at or above each scheme's bits
# (bf16 -> f16, llama.cpp's default; turbo = k8v3 -> q8_0/q4_0; k4v3 -> q4_0/q4_0).
ctk_ctv() {
  case "$1" in
    bf16) echo "f16 f16" ;; 8) echo "q8_0 q8_0" ;; turbo|turbo:k8v3) echo "q8_0 q4_0" ;;
    turbo:k4v3) echo "q4_0 q4_0" ;; *) echo "no llama.cpp KV type for scheme $1" >&2; exit 2 ;;
  esac
}
load() { cut -d' ' -f1-3 /proc/loadavg; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
check_bins() {  # check_bins ENGINES
  [ -x "$BIN" ] || { echo "build turbokv first: scripts/build cpu-release --target turbokv" >&2; exit 1; }
  [[ " $1 " != *" llama.cpp "* ]] || [ -x "$LB/llama-server" ] ||
    { echo "build the peer first: scripts/peer/build-llamacpp (or ENGINES=turbokv)" >&2; exit 1; }
}

start_server() {  # start_server LOG ENGINE ARGS...
  local log="$1" engine="$2" port; shift 2
  port="$(free_port)"; URL="http://127.0.0.1:$port"
  if [ "$engine" = turbokv ]; then
    "$BIN" serve --port "$port" "$@" > "$log" 2>&1 &
  else
    LD_LIBRARY_PATH="$LB" "$LB/llama-server" --port "$port" --no-webui "${LLAMA_EXTRA[@]}" "$@" > "$log" 2>&1 &
  fi
  SPID=$!
  if ! "${HTTP[@]}" wait "$URL" "${SERVER_WAIT_S:-600}" "$SPID" >/dev/null 2>&1 || ! kill -0 "$SPID" 2>/dev/null; then
    kill "$SPID" 2>/dev/null || true; wait "$SPID" 2>/dev/null || true; SPID=""
    if [ "$engine" = llama.cpp ] && [ ${#LLAMA_EXTRA[@]} -eq 0 ]; then
      # A -march=native build may use AMX tiles that this VM does not enable (SIGILL).
      echo "llama-server did not start (tail of $log below): retrying with --no-repack" >&2
      tail -n 5 "$log" >&2; LLAMA_EXTRA=(--no-repack)
      start_server "$log" "$engine" "$@"; return
    fi
    echo "$engine server did not start; tail of $log:" >&2; tail -n 20 "$log" >&2; exit 1
  fi
}
stop_server() {
  [ -n "$SPID" ] || return 0
  kill -TERM "$SPID" 2>/dev/null || true; wait "$SPID" 2>/dev/null || true; SPID=""
}
trap stop_server EXIT
