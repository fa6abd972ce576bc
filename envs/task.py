"""The task record users know (``task_key``, ``prompt``, ``env_key``, ...) and a loader that says what is wrong.

One schema for local and hosted tasks. A task is judged either by ``verifier`` (a declarative spec the
env app's own verifier reads: ``{"type": ..., ...}``) or by ``verifier_code`` (untrusted Python source
defining ``verify(final_state: dict) -> float``, run in a sandboxed subprocess by ``envs.sandbox``);
exactly one of the two. The loader rejects a bad record with its file, line, task and key.
Leaves out: running verifiers (``envs.verify``) and checking that an ``env_key`` is served anywhere.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from configkit.base import ConfigError, StrictModel, validate

VERIFIER_FUNCTION = "verify"


class SolutionCall(StrictModel):
    """One tool call of a reference solution."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Task(StrictModel):
    """One task: what the agent is asked, where it acts, and how its final state is judged."""

    task_key: str = Field(min_length=1, description="Unique within a task set.")
    prompt: str = Field(min_length=1, description="What the agent is asked to do.")
    env_key: str = Field(min_length=1, description="Which environment serves the task (a local app or a Fleet env).")
    env_version: str = Field("1", description="The environment's version the task was written for.")
    env_variables: dict[str, str] = Field(default_factory=dict, description="E.g. CURRENT_DATE, LOGGED_IN_USER; seed the state.")
    initial_state: dict[str, Any] = Field(default_factory=dict, description="App state seeded before the episode.")
    verifier: dict[str, Any] | None = Field(None, description="Declarative check of the final state: {'type': ..., ...}.")
    verifier_code: str | None = Field(
        None, min_length=1, description="Untrusted Python defining verify(final_state: dict) -> float; run sandboxed."
    )
    solution: list[SolutionCall] = Field(default_factory=list, description="A reference sequence of tool calls.")
    modality: Literal["tool_use"] = Field("tool_use", description="Only tool use is trained here.")
    difficulty: int = Field(1, ge=1, description="Tool calls the reference solution needs.")

    @model_validator(mode="after")
    def _one_verifier(self) -> Task:
        problem = verifier_problem(self.verifier, self.verifier_code)
        if problem:
            raise ValueError(problem)
        return self


def verifier_problem(verifier: Any, verifier_code: Any) -> str | None:
    """Why a record's verifier fields are unusable, or None. Parses ``verifier_code`` without running it."""
    if (verifier is None) == (verifier_code is None):
        return "give exactly one of 'verifier' (a spec dict) or 'verifier_code' (Python source)"
    if verifier_code is None:
        return None
    if not isinstance(verifier_code, str):
        return f"key 'verifier_code' must be a string of Python source, got {type(verifier_code).__name__}"
    try:
        tree = ast.parse(verifier_code)
    except SyntaxError as exc:
        return f"key 'verifier_code' is not valid Python: line {exc.lineno}: {exc.msg}"
    if not any(isinstance(node, ast.FunctionDef) and node.name == VERIFIER_FUNCTION for node in tree.body):
        return f"key 'verifier_code' must define a top-level function {VERIFIER_FUNCTION}(final_state: dict) -> float"
    return None


def parse_task(record: Any, source: str) -> Task:
    """One record to a Task; ConfigError names ``source`` (file:line), the task and the key."""
    if not isinstance(record, dict):
        raise ConfigError(f"{source}: a task record must be a JSON object, got {type(record).__name__}")
    if isinstance(record.get("task_key"), str):
        source = f"{source} (task {record['task_key']!r})"
    problem = verifier_problem(record.get("verifier"), record.get("verifier_code"))
    if problem:
        raise ConfigError(f"{source}: {problem}")
    return validate(Task, record, source)


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
        task = parse_task(record, source)
        if task.task_key in seen:
            raise ConfigError(f"{source}: key 'task_key' = {task.task_key!r} appears twice")
        seen.add(task.task_key)
        tasks.append(task)
    return tasks


def load_task_files(paths: list[str | Path]) -> list[Task]:
    """Tasks of several files; a task_key in two files is an error naming both."""
    tasks: list[Task] = []
    where: dict[str, Path] = {}
    for path in map(Path, paths):
        for task in load_tasks(path):
            if task.task_key in where:
                raise ConfigError(f"{path}: key 'task_key' = {task.task_key!r} is also in {where[task.task_key]}")
            where[task.task_key] = path
            tasks.append(task)
    return tasks
