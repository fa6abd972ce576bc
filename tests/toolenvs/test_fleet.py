"""The Fleet backend's parts that need neither OpenEnv nor the fleet extra: what it sends, what it says is missing.

Episodes through OpenEnv's real ``FleetTaskEnv`` and the real SDK are in ``test_fleet_contract.py`` (the
fleet virtual environment).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolenvs.fleet import INSTALL_HINT, fleet_problems, load_fleet_task_env, task_config
from toolenvs.task import Task

FUNC = "def validate_task(env, final_answer=None):\n    return 1\n"


def test_task_config_carries_what_fleet_task_env_reads_verbatim():
    task = Task(task_key="t1", prompt="Book it.", env_key="booking", env_version="v0.0.74", data_key="kinesis", data_version="v0.0.14",
                env_variables={"CURRENT_DATE": "2026-02-01", "LOGGED_IN_USER": 7}, verifier_func=FUNC)
    assert task_config(task) == {
        "task_key": "t1", "prompt": "Book it.", "env_key": "booking", "env_version": "v0.0.74", "data_key": "kinesis",
        "data_version": "v0.0.14", "env_variables": {"CURRENT_DATE": "2026-02-01", "LOGGED_IN_USER": 7}, "verifier_func": FUNC,
        "task_modality": "tool_use",
    }
    bare = task_config(Task(task_key="t2", prompt="p", env_key="booking", verifier_func=FUNC))
    assert "env_version" not in bare and "data_key" not in bare  # None: Fleet's newest, not the string "None"


def test_what_is_missing_is_said_with_the_fix_and_never_the_key(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENENV_PATH", raising=False)
    monkeypatch.delenv("FLEET_API_KEY", raising=False)
    problems = fleet_problems(str(tmp_path))
    assert any("needs FLEET_API_KEY in the environment" in p for p in problems)
    assert any(f"OpenEnv's Fleet code was not found under {tmp_path}" in p for p in problems)
    with pytest.raises(ImportError, match=f"no envs/fleet_env under {tmp_path}"):
        load_fleet_task_env(str(tmp_path))
    monkeypatch.setenv("FLEET_API_KEY", "fk-test-secret-123")
    problems = fleet_problems(str(tmp_path))
    assert not any("FLEET_API_KEY" in p for p in problems) and "fk-test-secret-123" not in json.dumps(problems)
    assert all(INSTALL_HINT in p for p in problems)


def test_openenv_is_appended_so_nothing_of_ours_is_shadowed(tmp_path, monkeypatch):
    """OpenEnv's top-level packages are ``envs`` and ``core``: its folder goes last on sys.path."""
    import sys

    package = tmp_path / "envs" / "fleet_env"
    package.mkdir(parents=True)
    (tmp_path / "envs" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("class FleetTaskEnv:\n    pass\n")
    (tmp_path / "toolenvs").mkdir()
    (tmp_path / "toolenvs" / "__init__.py").write_text("raise RuntimeError('shadowed')\n")
    # no other OpenEnv (a Fleet test in this process may have put the real one on the path and imported it)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (Path(p) / "envs" / "fleet_env").is_dir()])
    for name in [m for m in sys.modules if m == "envs" or m.startswith("envs.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setenv("OPENENV_PATH", str(tmp_path))
    assert load_fleet_task_env().__module__ == "envs.fleet_env"
    assert sys.path[-1] == str(tmp_path.resolve())
    import toolenvs.task  # noqa: F401 - still ours
    for name in [m for m in sys.modules if m == "envs" or m.startswith("envs.")]:
        sys.modules.pop(name)  # the fake; monkeypatch puts back what was there
