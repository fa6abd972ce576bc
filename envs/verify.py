"""Run a task's verifier on the episode's final state. Leaves out: untrusted ``verifier_code`` (issue 5)."""

from __future__ import annotations

from typing import Any

from envs.local import get_app
from envs.task import Task


def score(task: Task, start: dict[str, Any], final: dict[str, Any]) -> float:
    """The reward in [0, 1] the task's verifier gives the final state."""
    return float(get_app(task.env_key).verify(final, start, task.verifier))
