#!/usr/bin/env bash
# Create a venv when missing and install the project into it, torch first: the CPU build (torch==2.13.0)
# where there is no GPU, so no multi-GB CUDA build is pulled. Re-installs only when pyproject.toml changes.
# Usage: bootstrap.sh [VENV [EXTRAS]]; default .venv with dev. scripts/bootstrap_fleet.sh: .venv-fleet, dev,fleet.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
EXTRAS=${2:-dev}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV with $PYTHON" >&2
  "$PYTHON" -m venv "$VENV"
fi
stamp=$VENV/.grpo-sweep-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $EXTRAS"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  pip=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
  if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
      echo "bootstrap: GPU found, installing torch with CUDA" >&2
      "${pip[@]}" torch
    else
      echo "bootstrap: no GPU, installing the CPU build torch==2.13.0" >&2
      "${pip[@]}" torch==2.13.0
    fi
  fi
  echo "bootstrap: installing grpo-sweep [$EXTRAS] into $VENV" >&2
  "${pip[@]}" -e ".[$EXTRAS]"
  echo "$want" > "$stamp"
fi
