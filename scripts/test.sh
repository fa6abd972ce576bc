#!/usr/bin/env bash
# Every test, the slow end-to-end ones included (plain `pytest` runs the fast ones only).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest -m "slow or not slow" "$@"
