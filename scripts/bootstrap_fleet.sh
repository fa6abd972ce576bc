#!/usr/bin/env bash
# .venv-fleet: the project with the fleet extra (fleet-python, mcp 1.x, which OpenEnv's Fleet code imports),
# beside .venv (mcp 2.x). OpenEnv itself is not installed: its src folder is named by OPENENV_PATH (README, Fleet).
set -euo pipefail
exec bash "$(dirname "$0")/bootstrap.sh" .venv-fleet dev,fleet
