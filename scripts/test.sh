#!/usr/bin/env bash
# Every test, the slow end-to-end ones included (plain `pytest` runs the fast ones only); then, in
# .venv-fleet (mcp 1.x, fleet-python), the Fleet contract tests (tests/fleet: the real SDK and OpenEnv's
# Fleet code against the fake Fleet service) and the environment suite on mcp 1.x. Arguments go to the
# first run only, and skip the second. .venv-fleet installs in the background while the first run goes (an
# install is mostly download and unpacking: minutes saved, its log shown if it fails). The slowest tests are
# listed at the end of each run (CI keeps to 40 minutes). Each run spreads its tests over TEST_WORKERS
# processes (pytest-xdist; default 2 where there are 2 cores or more, 0 = one process): most tests use one core,
# so on CI's 2 cores two at a time take about half the time. Every test already has its own ports, Ray, cache
# and temporary folders. With workers, torch (and OpenMP) get one thread per process unless OMP_NUM_THREADS says
# otherwise: two workers' threads spinning on two cores slowed the in-process trainer tests by 2x.
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${TEST_WORKERS:-$(( $(nproc) >= 2 ? 2 : 0 ))}
if [ "$workers" -gt 0 ]; then export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}; fi
bash scripts/bootstrap.sh
fleet_log=""
if [ $# -eq 0 ]; then
  fleet_log=$(mktemp -t bootstrap-fleet.XXXXXX)
  bash scripts/bootstrap_fleet.sh >"$fleet_log" 2>&1 &
  fleet_pid=$!
  trap 'kill "$fleet_pid" 2>/dev/null || true' EXIT  # a failed first run leaves no install behind
fi
.venv/bin/python -m pytest -rs -m "slow or not slow" -n "$workers" --durations=30 --ignore=tests/fleet "$@"
if [ -n "$fleet_log" ]; then
  if ! wait "$fleet_pid"; then
    echo "test.sh: installing .venv-fleet failed (scripts/bootstrap_fleet.sh):" >&2
    cat "$fleet_log" >&2
    exit 1
  fi
  rm -f "$fleet_log"
  .venv-fleet/bin/python -m pytest -rs -m "slow or not slow" -n "$workers" --durations=15 tests/fleet tests/toolenvs
fi
