"""Local tool-use apps, each a module with ENV_KEY, ENV_VERSION, AppError, initial_state, TOOLS, verify and replay.

Apps: hotel (booking), github (code hosting), outlook (email and calendar), ticketmaster (ticket sales),
zillow (real-estate listings). Each has a task generator ``<app>_tasks`` writing ``toolenvs/data/<app>.jsonl``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

APPS = {key: f"toolenvs.local.{key}" for key in ("hotel", "github", "outlook", "ticketmaster", "zillow")}
GENERATORS = {key: f"{module}_tasks" for key, module in APPS.items()}


def get_app(env_key: str) -> ModuleType:
    """The app module for an env_key; an unknown key lists the known ones."""
    if env_key not in APPS:
        raise KeyError(f"unknown local env {env_key!r} (known: {', '.join(sorted(APPS))})")
    return importlib.import_module(APPS[env_key])


def tool_signatures(app: ModuleType) -> list[str]:
    """``name(arg, ...)`` per tool, in the order the MCP server lists them and their arguments."""
    import inspect

    return [f"{name}({', '.join(list(inspect.signature(fn).parameters)[1:])})" for name, fn in app.TOOLS.items()]


def generated_tasks(env_key: str, seed: int) -> list:
    """Task records from an app's deterministic task generator with another seed (warm-start data)."""
    from toolenvs.task import Task

    if env_key not in GENERATORS:
        return []
    return [Task.model_validate(r) for r in importlib.import_module(GENERATORS[env_key]).generate(seed)]
