"""The Fleet contract tests' precondition: OpenEnv's Fleet code (``../shared/upstream``), the fleet SDK and
mcp 1.x (``.venv-fleet``, ``scripts/bootstrap_fleet.sh``). ``require()`` at a test module's top skips the
module with the reason where one is missing, and returns OpenEnv's src folder (appended to ``sys.path``)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

OPENENV_SRC = Path(__file__).resolve().parents[3] / "shared" / "upstream" / "openenv-009c1ed" / "src"


def require() -> Path:
    if not (OPENENV_SRC / "envs" / "fleet_env" / "__init__.py").is_file():
        pytest.skip(f"OpenEnv's Fleet code is not at {OPENENV_SRC} (a clone without ../shared/upstream)", allow_module_level=True)
    try:
        importlib.import_module("fleet")
    except ImportError as exc:
        pytest.skip(f"the fleet SDK is not installed ({exc}): bash scripts/bootstrap_fleet.sh", allow_module_level=True)
    from toolenvs import mcpcompat

    if mcpcompat.V2:
        pytest.skip("OpenEnv's Fleet code imports mcp 1.x names: run in .venv-fleet (scripts/bootstrap_fleet.sh)", allow_module_level=True)
    if str(OPENENV_SRC) not in sys.path:
        sys.path.append(str(OPENENV_SRC))
    return OPENENV_SRC
