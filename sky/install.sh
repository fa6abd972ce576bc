#!/usr/bin/env bash
# SkyPilot in its own venv: it pins click<8.2 and uvicorn<0.36, below what this project (Ray, mcp) installs.
# Usage: bash sky/install.sh [VENV_DIR]   (default /tmp/sky-venv, where tests/sweep/test_cluster_launchers.py looks)
set -euo pipefail
venv="${1:-/tmp/sky-venv}"
python3 -m venv "$venv"
"$venv/bin/pip" install -q "skypilot[aws]"
"$venv/bin/python" -c "import sky; print(\"SkyPilot\", sky.__version__, \"in $venv\")"
