"""The task record users know (``task_key``, ``prompt``, ``env_key``, ...) and a loader that says what is wrong.

Leaves out: ``verifier_code`` (untrusted code run in a subprocess) and hosted-env fields (issue 5).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from grpo.configbase import ConfigError, StrictModel, validate


class SolutionCall(StrictModel):
    """One tool call of a reference solution."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Task(StrictModel):
    """One task: what the agent is asked, where it acts, and how its final state is judged."""

    task_key: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    env_key: str = Field(min_length=1)
    env_version: str = "1"
    env_variables: dict[str, str] = Field(default_factory=dict)
    initial_state: dict[str, Any] = Field(default_factory=dict, description="App state seeded before the episode.")
    verifier: dict[str, Any] = Field(description="Declarative check of the final state: {'type': ..., ...}.")
    solution: list[SolutionCall] = Field(default_factory=list, description="A reference sequence of tool calls.")
    modality: Literal["tool_use"] = "tool_use"
    difficulty: int = Field(1, ge=1, description="Tool calls the reference solution needs.")


def load_tasks(path: str | Path) -> list[Task]:
    """Read JSONL task records; a bad record raises ConfigError naming the file, the line and the key."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such task file")
    tasks: list[Task] = []
    seen: set[str] = set()
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        source = f"{path}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{source}: not valid JSON: {exc}") from None
        if not isinstance(record, dict):
            raise ConfigError(f"{source}: a task record must be a JSON object")
        task = validate(Task, record, source)
        if task.task_key in seen:
            raise ConfigError(f"{source}: key 'task_key' = {task.task_key!r} appears twice")
        seen.add(task.task_key)
        tasks.append(task)
    return tasks
