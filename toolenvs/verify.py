"""Run a task's verifier on the episode's final state: the app's declarative verifier, or untrusted code.

A ``verifier`` spec is judged by the env app's own ``verify(final, start, spec)`` (trusted, in-process).
A ``verifier_code`` string runs in ``toolenvs.sandbox`` with only the final state as input; any failure there
raises ``VerifierError`` (counted as ``verifier_error``, never a success).
"""

from __future__ import annotations

from typing import Any

from toolenvs.local import get_app
from toolenvs.sandbox import DEFAULT_LIMITS, SandboxLimits, run_verifier, run_verifier_async
from toolenvs.task import Task


def score(task: Task, start: dict[str, Any], final: dict[str, Any], limits: SandboxLimits = DEFAULT_LIMITS) -> float:
    """The reward in [0, 1] the task's verifier gives the final state."""
    if task.verifier_code is not None:
        return run_verifier(task.verifier_code, final, limits)
    return _declarative(task, start, final)


async def score_async(task: Task, start: dict[str, Any], final: dict[str, Any], limits: SandboxLimits = DEFAULT_LIMITS) -> float:
    """``score`` without blocking the event loop while untrusted code runs."""
    if task.verifier_code is not None:
        return await run_verifier_async(task.verifier_code, final, limits)
    return _declarative(task, start, final)


def _declarative(task: Task, start: dict[str, Any], final: dict[str, Any]) -> float:
    assert task.verifier is not None  # Task guarantees exactly one of verifier / verifier_code
    return float(get_app(task.env_key).verify(final, start, task.verifier))
