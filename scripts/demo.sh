#!/usr/bin/env bash
# The demo sweep on CPU: Optuna TPE + ASHA over LR, KL coefficient and samples per prompt; prints a leaderboard.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m sweep run sweep/search_spaces/demo_cpu.yaml "$@"
