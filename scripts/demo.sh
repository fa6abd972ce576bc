#!/usr/bin/env bash
# The demo sweep on CPU: Optuna TPE + ASHA over LR, KL coefficient and samples per prompt on held-out eval;
# ends with the leaderboard, the verdict in words and the HTML report (sweep_results/demo_cpu/report/index.html).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m sweep run sweep/search_spaces/demo_cpu.yaml "$@"
