#!/usr/bin/env bash
# Create .venv when missing and install the project into it, torch first: the CPU build (torch==2.13.0)
# where there is no GPU, so no multi-GB CUDA build is pulled. Re-installs only when pyproject.toml changes.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $PYTHON" >&2
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.grpo-sweep-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  pip=(.venv/bin/python -m pip install --disable-pip-version-check -q)
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
      echo "bootstrap: GPU found, installing torch with CUDA" >&2
      "${pip[@]}" torch
    else
      echo "bootstrap: no GPU, installing the CPU build torch==2.13.0" >&2
      "${pip[@]}" torch==2.13.0
    fi
  fi
  echo "bootstrap: installing grpo-sweep and its dev tools" >&2
  "${pip[@]}" -e ".[dev]"
  echo "$want" > "$stamp"
fi
