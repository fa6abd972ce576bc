#!/usr/bin/env bash
# Every test, the slow end-to-end ones included (plain `pytest` runs the fast ones only); then, in
# .venv-fleet (mcp 1.x, fleet-python), the Fleet contract tests (tests/fleet: the real SDK and OpenEnv's
# Fleet code against the fake Fleet service) and the environment suite on mcp 1.x. Arguments go to the
# first run only, and skip the second. The slowest tests are listed at the end of each run (CI keeps to 40 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/python -m pytest -rs -m "slow or not slow" --durations=30 --ignore=tests/fleet "$@"
if [ $# -eq 0 ]; then
  bash scripts/bootstrap_fleet.sh
  .venv-fleet/bin/python -m pytest -rs -m "slow or not slow" --durations=15 tests/fleet tests/toolenvs
fi
