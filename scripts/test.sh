#!/usr/bin/env bash
# Every test, the slow end-to-end ones included (plain `pytest` runs the fast ones only); then, in
# .venv-fleet (mcp 1.x, fleet-python), the environment suite and the Fleet contract tests: the real SDK and
# OpenEnv's Fleet code against the fake Fleet service. Arguments go to the first run only.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/python -m pytest -m "(slow or not slow) and not fleet" "$@"
if [ $# -eq 0 ]; then
  bash scripts/bootstrap_fleet.sh
  .venv-fleet/bin/python -m pytest -m "slow or not slow" tests/toolenvs tests/sweep/test_fleet_sweep.py
fi
