"""Hosted Fleet tasks through OpenEnv's ``FleetTaskEnv``, behind the same episode seam as ``EnvClient``.

``async with FleetClient().episode(task) as session``: ``session.tools``, ``await session.call_tool(name,
args)`` and ``await session.score()``, like a local episode, so the trainer's episode loop runs Fleet
tasks unchanged (pass a ``FleetClient`` where it takes an ``EnvClient``).

``FleetTaskEnv`` lives in OpenEnv's repository (``envs/fleet_env``), in no PyPI package; it needs
``fleet-python``, ``FLEET_API_KEY`` and the network. Its top-level package is named ``envs``, like ours, so
it is found on ``sys.path`` and loaded under another name. Its interface, as this adapter uses it:
``FleetTaskEnv(task_config, api_key=..., max_steps=..., request_timeout_s=...)``;
``await reset_async() -> {"prompt", "observation", "tools", "step"}``;
``await step_async({"tool", "params", "done"}) -> (obs, reward, done, info)`` with the reward only when done;
``await close_async()``. The API key is read from the environment, passed only to that constructor and
never logged, printed or stored in configs.

Unverified against Fleet itself (unreachable here): the contract test drives this adapter against our
local apps exposed through the same interface. Leaves out: computer-use tasks (only ``tool_use``), and
telling a Fleet transport failure from a tool error (``FleetTaskEnv`` reports both as ``tool_error``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from configkit import environ
from configkit.base import ConfigError
from toolenvs.errors import EnvError
from toolenvs.outcomes import Failure
from toolenvs.task import Task

KEY_VARIABLE = environ.FLEET_API_KEY.name
INSTALL_HINT = (
    "OpenEnv's FleetTaskEnv is not installed. It is in no PyPI package (openenv and openenv-core lack it): "
    "install it from the repository, e.g. pip install 'git+https://github.com/fleet-ai/OpenEnv' fleet-python"
)
_OUR_ROOT = Path(__file__).resolve().parents[1]

EnvFactory = Callable[[dict[str, Any]], Any]


def load_fleet_task_env() -> type:
    """OpenEnv's ``FleetTaskEnv`` class, found outside this repository; ImportError with the fix if absent."""
    for entry in sys.path:
        package = Path(entry or ".").resolve() / "envs" / "fleet_env"
        if package.parent.parent == _OUR_ROOT or not (package / "__init__.py").is_file():
            continue
        name = "openenv_fleet_env"  # our own package is called envs too
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, package / "__init__.py", submodule_search_locations=[str(package)])
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except ImportError as exc:
                del sys.modules[name]
                raise ImportError(f"{INSTALL_HINT} (found {package}, but importing it failed: {exc})") from exc
        return sys.modules[name].FleetTaskEnv
    raise ImportError(INSTALL_HINT)


def task_config(task: Task) -> dict[str, Any]:
    """Our task record as the ``task_config`` dict ``FleetTaskEnv`` reads."""
    config = {"task_key": task.task_key, "prompt": task.prompt, "env_key": task.env_key, "env_version": task.env_version,
              "env_variables": task.env_variables, "task_modality": task.modality}
    if task.verifier_code is not None:
        config["verifier_code"] = task.verifier_code
    return config


class FleetClient:
    """Episodes on Fleet's hosted envs; ``env_factory`` replaces ``FleetTaskEnv`` (tests, other backends)."""

    def __init__(self, max_steps: int = 50, request_timeout_s: float = 60.0, env_factory: EnvFactory | None = None):
        if env_factory is None:
            if not environ.FLEET_API_KEY.is_set():
                raise ConfigError(f"hosted Fleet tasks need the {KEY_VARIABLE} environment variable (it is not set)")
            env_class = load_fleet_task_env()

            def env_factory(config: dict[str, Any]) -> Any:  # the key goes from the environment to Fleet, nowhere else
                return env_class(config, api_key=environ.FLEET_API_KEY.get(), max_steps=max_steps, request_timeout_s=request_timeout_s)

        self._env_factory = env_factory

    def __repr__(self) -> str:
        return "FleetClient()"

    @asynccontextmanager
    async def episode(self, task: Task) -> AsyncIterator[FleetSession]:
        """Provision and reset the task's env, yield its session, always close it."""
        env = self._env_factory(task_config(task))
        try:
            try:
                observation = await env.reset_async()
            except Exception as exc:  # provisioning, reset or an empty tool list: Fleet's failure, not the agent's
                raise EnvError(f"Fleet env {task.env_key} for {task.task_key}: reset failed: {type(exc).__name__}: {exc}") from exc
            yield FleetSession(env, task, observation)
        finally:
            try:
                await env.close_async()
            except Exception:
                pass  # an instance whose TTL expired is already gone


class FleetSession:
    """One Fleet episode, shaped like ``toolenvs.client.EpisodeSession``."""

    def __init__(self, env: Any, task: Task, observation: dict[str, Any]):
        from toolenvs.client import ToolSpec

        self._env = env
        self.task = task
        self.start_state: dict[str, Any] = {}  # hosted state is not readable from here
        self.tools = [ToolSpec(*_tool_fields(t)) for t in observation.get("tools", [])]
        self._names = {t.name for t in self.tools}
        self._reward: float | None = None  # set once the env has ended the episode

    async def call_tool(self, name: str, arguments: dict[str, Any]):
        from toolenvs.client import ToolResult

        if name not in self._names:
            return ToolResult(f"error: unknown tool {name}", True, Failure.UNKNOWN_TOOL)
        if self._reward is not None:
            return ToolResult("error: the environment ended the episode (max steps)", True, Failure.TOOL_ERROR)
        observation, reward, done, info = await self._step({"tool": name, "params": arguments, "done": False})
        if done:
            self._reward = float(reward)
        result = observation.get("observation")
        text = result if isinstance(result, str) else json.dumps(result, separators=(", ", ": "))
        failed = bool(info.get("tool_error"))  # FleetTaskEnv names no kind: a tool error is all it says
        return ToolResult(str(info.get("tool_error")) if failed else text, failed, Failure.TOOL_ERROR if failed else None)

    async def score(self) -> float:
        """The task verifier's reward: ending the episode makes Fleet run it."""
        if self._reward is None:
            _, reward, _, _ = await self._step({"done": True})
            self._reward = float(reward)
        return self._reward

    async def _step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        try:
            return await self._env.step_async(action)
        except Exception as exc:
            raise EnvError(f"Fleet env {self.task.env_key} step failed: {type(exc).__name__}: {exc}") from exc


def _tool_fields(tool: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(name, description, JSON schema) of a tool in MCP form or OpenAI function form."""
    spec = tool.get("function", tool)
    schema = spec.get("inputSchema") or spec.get("input_schema") or spec.get("parameters") or {}
    return spec["name"], spec.get("description") or "", schema
