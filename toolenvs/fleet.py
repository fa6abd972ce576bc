"""Hosted Fleet tasks through OpenEnv's ``FleetTaskEnv``: the ``fleet`` environment backend.

``FleetTaskEnv`` (OpenEnv's ``envs/fleet_env``, in no PyPI package) provisions a Fleet instance for a task
through the ``fleet-python`` SDK, lists and calls its tools over MCP (mcp 1.x names: the ``fleet`` extra
installs mcp 1.x, and ``toolenvs.mcpcompat`` keeps our own servers and client working on it) and, when the
episode is done, has Fleet run the task's ``verifier_func`` against the live instance. This module puts it
behind the same episode seam as our local client (``episode(task)`` -> ``tools``, ``call_tool``, ``score``),
so the trainer's loop runs Fleet tasks unchanged, and adds what it lacks, each from its code:

- A ``None`` reward (the verification could not run, or its LLM judge failed, after OpenEnv's own retries:
  3 + 6 + 12 s) is a ``VerifierError``: the episode is left out of its group's advantage and counted,
  never scored 0.
- A sweep-wide cap on instances open at once (``InstanceSlots``; Fleet's quotas are per API key): a Ray
  actor every trial of the sweep shares, or a count of the process for ``sweep train`` (its loops may run at once).
- The conversation reaches a judge-style verifier (``FleetTaskEnv.conversation_messages``, which its
  caller must set).
- Closing deletes the instance: ``FleetEnvClient.close_async`` hands the SDK's ``AsyncEnv.close``, a
  coroutine, to a thread that never awaits it (``client.py:440-443``), so instances lived to their TTL.

The API key comes from ``FLEET_API_KEY`` only and is passed to ``FleetTaskEnv`` and nowhere else; the
SDK's base URL from ``FLEET_BASE_URL`` (the SDK reads it; a fake service on 127.0.0.1 in the tests).
Leaves out: computer-use tasks (refused when tasks load) and telling a Fleet transport failure from a tool
error (``FleetTaskEnv`` reports both as ``tool_error``).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any

from configkit import environ
from toolenvs.errors import EnvError, VerifierError
from toolenvs.outcomes import Failure
from toolenvs.task import Task

INSTALL_HINT = (
    "the fleet backend needs OpenEnv's Fleet code (in no PyPI package) and the fleet extra: "
    "pip install -e '.[fleet]' and a checkout of https://github.com/fleet-ai/OpenEnv, then set OPENENV_PATH to its src "
    "folder (or env.backend.openenv_path); README, Fleet"
)

EnvFactory = Callable[[dict[str, Any]], Any]


def load_fleet_task_env(openenv_path: str | None = None) -> type:
    """OpenEnv's ``FleetTaskEnv``: installed (``envs.fleet_env``), or from the checkout at ``openenv_path`` /
    ``OPENENV_PATH`` (appended to ``sys.path``, so nothing of ours is shadowed); ImportError with the fix."""
    where = openenv_path or environ.OPENENV_PATH.get()
    if where:
        src = str(Path(where).expanduser().resolve())
        if not (Path(src) / "envs" / "fleet_env" / "__init__.py").is_file():
            raise ImportError(f"{INSTALL_HINT} (no envs/fleet_env under {src})")
        if src not in sys.path:
            sys.path.append(src)
    try:
        return importlib.import_module("envs.fleet_env").FleetTaskEnv
    except ImportError as exc:
        raise ImportError(f"{INSTALL_HINT} ({type(exc).__name__}: {exc})") from None


def fleet_problems(openenv_path: str | None = None) -> list[str]:
    """What running on Fleet needs, checked without importing it: the key, the SDK, mcp 1.x and OpenEnv."""
    import importlib.util

    from toolenvs import mcpcompat

    problems = []
    if not environ.FLEET_API_KEY.is_set():
        problems.append(f"the fleet backend needs {environ.FLEET_API_KEY.name} in the environment (it is read there only, never from a file)")
    if importlib.util.find_spec("fleet") is None or mcpcompat.V2:
        problems.append(f"the fleet backend needs the fleet extra (fleet-python and mcp 1.x: OpenEnv's Fleet code imports 1.x names): {INSTALL_HINT}")
    where = openenv_path or environ.OPENENV_PATH.get()
    found = (Path(where).expanduser() / "envs" / "fleet_env" / "__init__.py").is_file() if where else importlib.util.find_spec("envs") is not None
    if not found:
        problems.append(f"OpenEnv's Fleet code was not found{f' under {where}' if where else ''}: {INSTALL_HINT}")
    return problems


def task_config(task: Task) -> dict[str, Any]:
    """Our task record as the ``task_config`` dict ``FleetTaskEnv`` reads (OpenEnv's names)."""
    config: dict[str, Any] = {"task_key": task.task_key, "prompt": task.prompt, "env_key": task.env_key,
                              "env_variables": task.env_variables, "task_modality": task.modality}
    for key in ("env_version", "data_key", "data_version", "verifier_func"):  # our verifier_code is not Fleet's (FleetBackendConfig.problems)
        if getattr(task, key) is not None:
            config[key] = getattr(task, key)
    return config


class InstanceSlots:
    """At most ``size`` Fleet instances open at once in this process (``sweep train``), whichever event loops and
    threads ask (a pack's members roll out at once, each on a loop of its own: ``grpo.pack``): a count under a lock
    and a queue of waiters, each a future on its own loop. A release hands its slot to the first waiter (woken from
    any thread), so slots go in the order they were asked for and a release wakes one waiter, not all; a waiter
    cancelled after its slot was handed to it passes the slot on, and one whose loop has closed is skipped. Loops are
    ``asyncio.run``'s, which cancels a waiter before closing: a loop closed under a waiter it never resumes keeps the
    slot handed to it until the waiter is collected."""

    def __init__(self, size: int):
        self.size = size
        self._lock = threading.RLock()  # a waiter collected by the GC runs its exit path in whatever thread holds it
        self._open = 0
        self._waiters: deque[_Waiter] = deque()

    async def acquire(self) -> None:
        with self._lock:
            if self._open < self.size and not self._waiters:
                self._open += 1
                return
            waiter = _Waiter(asyncio.get_running_loop())
            self._waiters.append(waiter)
        try:
            await waiter.woken
        except BaseException:  # cancelled (or its coroutine closed) while waiting
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                granted, waiter.granted = waiter.granted, False
            if granted:  # the slot was handed to it as it went: the next waiter has it
                self._hand_on()
            raise

    async def release(self, lease: None) -> None:
        self._hand_on()

    def _hand_on(self) -> None:
        """A slot freed: to the first waiter whose loop still runs (its wake scheduled under the lock, so each
        handed slot has one owner), else back to the count."""
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                try:
                    waiter.loop.call_soon_threadsafe(_wake, waiter.woken)
                except Exception:  # its loop has closed (RuntimeError): the waiter went with it, never granted
                    continue
                waiter.granted = True
                return
            self._open -= 1

    def slot(self) -> Any:
        from toolenvs.fleet_slots import held

        return held(self)


class _Waiter:
    """One ``InstanceSlots.acquire`` in the queue: its loop, the future its release sets, whether a slot was handed to it."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop, self.woken, self.granted = loop, loop.create_future(), False


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


class FleetClient:
    """Episodes on Fleet's hosted envs, each holding one of ``slots`` while its instance is open;
    ``env_factory`` builds the env for a task config (``FleetTaskEnv`` with the backend's settings)."""

    def __init__(self, env_factory: EnvFactory, slots: Any):
        self._env_factory = env_factory
        self._slots = slots

    def __repr__(self) -> str:
        return "FleetClient()"

    @asynccontextmanager
    async def episode(self, task: Task, queued: Callable[[], AbstractAsyncContextManager[None]] | None = None) -> AsyncIterator[FleetSession]:
        """Wait for a slot (inside ``queued()``: the episode asks for no turn meanwhile), provision and reset
        the task's instance, yield its session, always close and delete it and free the slot."""
        async with queued() if queued is not None else nullcontext():
            lease = await self._slots.acquire()
        try:
            env = self._env_factory(task_config(task))
            try:
                try:
                    observation = await env.reset_async()
                except Exception as exc:  # provisioning, reset or an empty tool list: Fleet's failure, not the agent's
                    raise EnvError(f"Fleet env {task.env_key} for {task.task_key}: reset failed: {type(exc).__name__}: {exc}") from exc
                yield FleetSession(env, task, observation)
            finally:
                await close_instance(env)
        finally:
            await self._slots.release(lease)


async def close_instance(env: Any) -> None:
    """``close_async``, then the SDK's own close, awaited: OpenEnv's leaves the instance alive (module docstring)."""
    instance = getattr(getattr(env, "_orch", None), "_fleet_env", None)
    try:
        await env.close_async()
    except Exception:
        pass  # an instance whose TTL expired is already gone
    close = getattr(instance, "close", None)
    if close is not None and inspect.iscoroutinefunction(close):
        try:
            await close()
        except Exception:
            pass


class FleetSession:
    """One Fleet episode, shaped like ``toolenvs.session.EpisodeSession``."""

    def __init__(self, env: Any, task: Task, observation: dict[str, Any]):
        from toolenvs.session import ToolSpec

        self._env = env
        self.task = task
        self.start_state: dict[str, Any] = {}  # hosted state is not readable from here
        self.tools = [ToolSpec(*_tool_fields(t)) for t in observation.get("tools", [])]
        self._names = {t.name for t in self.tools}
        self._done = False
        self._reward: float | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any]):
        from toolenvs.session import ToolResult

        if name not in self._names:
            return ToolResult(f"error: unknown tool {name}", True, Failure.UNKNOWN_TOOL)
        if self._done:
            return ToolResult("error: the environment ended the episode (max steps)", True, Failure.TOOL_ERROR)
        observation, reward, done, info = await self._step({"tool": name, "params": arguments, "done": False})
        if done:
            self._done, self._reward = True, reward
        result = observation.get("observation")
        text = result if isinstance(result, str) else json.dumps(result, separators=(", ", ": "))
        failed = bool(info.get("tool_error"))  # FleetTaskEnv names no kind: a tool error is all it says
        return ToolResult(str(info.get("tool_error")) if failed else text, failed, Failure.TOOL_ERROR if failed else None)

    async def score(self, conversation: Sequence[Mapping[str, Any]] | None = None) -> float:
        """The task verifier's reward: ending the episode makes Fleet run it (a judge-style verifier gets
        ``conversation``). ``VerifierError`` when Fleet could not score it (a ``None`` reward)."""
        if conversation is not None:
            self._env.conversation_messages = [dict(m) for m in conversation]
        if not self._done:
            _, self._reward, _, _ = await self._step({"done": True})
            self._done = True
        if self._reward is None:
            raise VerifierError(f"Fleet could not score {self.task.task_key} ({self.task.env_key}): the verification failed after "
                                "OpenEnv's retries (a verifier error, or its LLM judge's); left out, not scored 0")
        return float(self._reward)

    async def _step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float | None, bool, dict[str, Any]]:
        try:
            return await self._env.step_async(action)
        except Exception as exc:
            raise EnvError(f"Fleet env {self.task.env_key} step failed: {type(exc).__name__}: {exc}") from exc


def _tool_fields(tool: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(name, description, JSON schema) of a tool in MCP form or OpenAI function form."""
    spec = tool.get("function", tool)
    schema = spec.get("inputSchema") or spec.get("input_schema") or spec.get("parameters") or {}
    return spec["name"], spec.get("description") or "", schema
