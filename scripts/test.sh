#!/usr/bin/env bash
# Every test, the slow end-to-end ones included (plain `pytest` runs the fast ones only), on two pytest
# workers: the learning test on one, every other test in order on the other (tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest -m "slow or not slow" -n 2 --dist loadgroup "$@"
