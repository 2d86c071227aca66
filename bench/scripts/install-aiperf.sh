#!/usr/bin/env bash
# Installs the load generator of bench/scripts/run-serve.sh, aiperf (PyPI), with gguf and
# tokenizers (for the tokenizer aiperf must load, made from the GGUF), into a venv of its
# own: ~/.cache/turbokv/venv-bench (TKV_VENV). Pinned; idempotent (pip runs only when a
# pin is missing).
set -euo pipefail
VENV="${TKV_VENV:-$HOME/.cache/turbokv/venv-bench}"
PINS=("aiperf==0.13.0" "gguf==0.19.0")
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
if ! "$VENV/bin/python" - "${PINS[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(any(version(p.split("==")[0]) != p.split("==")[1] for p in sys.argv[1:]))
PY
then
  echo "[install] pip install ${PINS[*]} into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PINS[@]}"
fi
"$VENV/bin/python" -c "import tokenizers, gguf" && [ -x "$VENV/bin/aiperf" ]
