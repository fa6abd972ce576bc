"""The Fleet contract tests' precondition: OpenEnv's Fleet code, the fleet SDK and mcp 1.x (``.venv-fleet``,
``scripts/bootstrap_fleet.sh``).

OpenEnv's code is where the user keeps it: ``OPENENV_PATH`` (its ``src`` folder, as README says to set after
cloning OpenEnv) when set, else this workspace's unmodified copy in ``../shared/upstream``. ``require()`` at a
test module's top returns that folder (appended to ``sys.path``) or skips the module with the reason; the
modules are marked ``fleet``, and in CI any skip but a GPU test's fails (``tests/conftest.py``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from configkit import environ

SHARED_OPENENV_SRC = Path(__file__).resolve().parents[3] / "shared" / "upstream" / "openenv-009c1ed" / "src"


def openenv_src() -> Path:
    """OpenEnv's src folder: ``OPENENV_PATH`` when set, else the workspace's copy."""
    where = environ.OPENENV_PATH.get()
    return Path(where).expanduser().resolve() if where else SHARED_OPENENV_SRC


def missing() -> str | None:
    """Why the Fleet contract tests cannot run here, or None."""
    src = openenv_src()
    if not (src / "envs" / "fleet_env" / "__init__.py").is_file():
        given = f"OPENENV_PATH={environ.OPENENV_PATH.get()}" if environ.OPENENV_PATH.is_set() else "OPENENV_PATH is not set, and"
        return f"OpenEnv's Fleet code (envs/fleet_env) is not under {src} ({given} the workspace's copy is looked for there)"
    try:
        importlib.import_module("fleet")
    except ImportError as exc:
        return f"the fleet SDK is not installed ({exc}): bash scripts/bootstrap_fleet.sh"
    from toolenvs import mcpcompat

    if mcpcompat.V2:
        return "OpenEnv's Fleet code imports mcp 1.x names: run in .venv-fleet (scripts/bootstrap_fleet.sh)"
    return None


def require() -> Path:
    reason = missing()
    if reason:
        pytest.skip(reason, allow_module_level=True)
    src = openenv_src()
    if str(src) not in sys.path:
        sys.path.append(str(src))
    return src
