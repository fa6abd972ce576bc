"""Contract test of the Fleet adapter: our local hotel app behind OpenEnv's FleetTaskEnv interface.

``LocalFleetTaskEnv`` implements what FIELD_NOTES and OpenEnv's ``envs/fleet_env/task_env.py`` give as the
interface (reset/step and their async twins, close; tool results as parsed JSON or ``{"error": ...}``,
``info["tool_error"]``, the reward only when done, ``max_steps``) on top of our MCP server and client.
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import AsyncExitStack
from typing import Any

import pytest

from configkit.base import ConfigError
from toolenvs.client import EnvClient
from toolenvs.errors import EnvError
from toolenvs.fleet import INSTALL_HINT, FleetClient, load_fleet_task_env, task_config
from toolenvs.task import Task


class LocalFleetTaskEnv:
    """A FleetTaskEnv-shaped env whose instance is an episode on a local MCP server."""

    def __init__(self, task_config: dict[str, Any], urls: dict[str, str], api_key: str | None = None, max_steps: int = 50):
        self.task = task_config
        self.urls = urls
        self.max_steps = max_steps
        self._stack: AsyncExitStack | None = None
        self._session = None
        self._steps = 0
        self._done = False
        self.closed = False

    async def reset_async(self, seed: int | None = None) -> dict[str, Any]:
        fields = {k: v for k, v in self.task.items() if k not in ("task_modality", "local_verifier")}
        judged_by = {} if "verifier_code" in self.task else {"verifier": self.task["local_verifier"]}
        task = Task(**fields, **judged_by, modality=self.task.get("task_modality", "tool_use"))
        self._stack = AsyncExitStack()
        self._session = await self._stack.enter_async_context(EnvClient(self.urls[task.env_key]).episode(task))
        self._steps, self._done = 0, False
        tools = [{"name": t.name, "description": t.description, "inputSchema": t.input_schema} for t in self._session.tools]
        return {"prompt": task.prompt, "observation": {}, "tools": tools, "step": 0}

    async def step_async(self, action: dict[str, Any]) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        if self._done:
            raise RuntimeError("Episode is done. Call reset() to start a new episode.")
        self._steps += 1
        info: dict[str, Any] = {"step": self._steps}
        result: Any = None
        if action.get("tool"):
            called = await self._session.call_tool(action["tool"], action.get("params", {}))
            result = {"error": called.text} if called.is_error else json.loads(called.text)
            if called.is_error:
                info["tool_error"] = called.text
        self._done = bool(action.get("done")) or self._steps >= self.max_steps
        reward = await self._session.score() if self._done else 0.0
        return {"prompt": self.task["prompt"], "observation": result or {}, "step": self._steps}, reward, self._done, info

    async def close_async(self) -> None:
        self.closed = True
        if self._stack is not None:
            await self._stack.aclose()

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        return asyncio.run(self.reset_async(seed))

    def step(self, action: dict[str, Any]):
        return asyncio.run(self.step_async(action))

    def close(self) -> None:
        asyncio.run(self.close_async())


def _fleet_task(task: Task) -> Task:
    """A hotel task as a hosted task would arrive: judged by verifier_code on the final state."""
    spec = task.verifier
    code = (
        "def verify(final_state):\n"
        f"    spec = {spec!r}\n"
        "    new = [b for b in final_state['bookings'].values() if b['status'] == 'active']\n"
        "    return float(len(new) == 1 and all(new[0][k] == spec[k] for k in ('hotel_id', 'check_in', 'nights')))\n"
    )
    return Task(**{**task.model_dump(exclude={"verifier"}), "verifier_code": code})


@pytest.fixture
def booking_task(tasks) -> Task:
    return next(t for t in tasks if t.verifier["type"] == "booking_made" and not t.initial_state)


def _client(hotel_server, made: list | None = None, max_steps: int = 50) -> FleetClient:
    def factory(config: dict[str, Any]) -> LocalFleetTaskEnv:
        config = {**config, **({} if "verifier_code" in config else {"local_verifier": LOCAL_VERIFIERS[config["task_key"]]})}
        env = LocalFleetTaskEnv(config, {"hotel": hotel_server.base_url}, max_steps=max_steps)
        if made is not None:
            made.append(env)
        return env

    return FleetClient(env_factory=factory)


LOCAL_VERIFIERS: dict[str, dict] = {}


async def _play(client: FleetClient, task: Task, calls) -> tuple[list, float]:
    async with client.episode(task) as session:
        assert {t.name for t in session.tools} >= {"search_hotels", "book_hotel"}
        results = [await session.call_tool(c.name, c.arguments) for c in calls]
        return results, await session.score()


def test_reference_solution_scores_1_through_the_adapter(hotel_server, booking_task):
    task, made = _fleet_task(booking_task), []
    results, reward = asyncio.run(_play(_client(hotel_server, made), task, task.solution))
    assert reward == 1.0 and not any(r.is_error for r in results)
    assert made[0].closed


def test_wrong_actions_score_0_and_tool_errors_are_results(hotel_server, booking_task):
    task = _fleet_task(booking_task)
    wrong = [type(c)(name=c.name, arguments={**c.arguments, "nights": 13}) for c in task.solution]
    missing = [type(task.solution[0])(name="book_hotel", arguments={"hotel_id": "H99", "check_in": "2030-01-01", "nights": 1})]
    _, reward = asyncio.run(_play(_client(hotel_server), task, wrong))
    results, no_reward = asyncio.run(_play(_client(hotel_server), task, missing))
    assert reward == 0.0 and no_reward == 0.0
    assert results[0].is_error and "H99 not found" in results[0].text


def test_declarative_verifier_tasks_and_max_steps(hotel_server, booking_task):
    LOCAL_VERIFIERS[booking_task.task_key] = booking_task.verifier
    client = _client(hotel_server, max_steps=len(booking_task.solution))

    async def go():
        async with client.episode(booking_task) as session:
            for call in booking_task.solution:
                await session.call_tool(call.name, call.arguments)
            after = await session.call_tool("list_bookings", {})  # past max_steps: the env has ended the episode
            return after, await session.score()

    after, reward = asyncio.run(go())
    assert reward == 1.0 and after.is_error and "ended the episode" in after.text


def test_reset_failure_is_an_env_error(booking_task):
    class Broken:
        async def reset_async(self):
            raise RuntimeError("list_tools returned no tools")

        async def close_async(self):
            pass

    async def go():
        async with FleetClient(env_factory=lambda config: Broken()).episode(booking_task):
            pass

    with pytest.raises(EnvError, match="reset failed: RuntimeError: list_tools returned no tools"):
        asyncio.run(go())


def test_task_config_carries_what_fleet_reads(booking_task):
    config = task_config(_fleet_task(booking_task))
    assert config["task_modality"] == "tool_use" and "def verify" in config["verifier_code"]
    assert {"task_key", "prompt", "env_key", "env_version", "env_variables"} <= set(config)


def test_missing_key_and_missing_openenv_say_what_to_do(monkeypatch):
    monkeypatch.delenv("FLEET_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="FLEET_API_KEY environment variable"):
        FleetClient()
    monkeypatch.setenv("FLEET_API_KEY", "fk-test-secret-123")
    with pytest.raises(ImportError, match="fleet-ai/OpenEnv"):
        load_fleet_task_env()
    with pytest.raises(ImportError) as info:
        FleetClient()
    assert str(info.value) == INSTALL_HINT and "fk-test-secret-123" not in str(info.value)


def test_the_key_is_never_logged(monkeypatch, caplog, hotel_server, booking_task):
    secret = "fk-test-secret-456"
    monkeypatch.setenv("FLEET_API_KEY", secret)
    caplog.set_level(logging.DEBUG)
    client = _client(hotel_server)
    asyncio.run(_play(client, _fleet_task(booking_task), booking_task.solution))
    assert secret not in caplog.text and secret not in repr(client) and secret not in json.dumps(task_config(booking_task))


def test_openenv_is_found_beside_our_own_envs_package(tmp_path, monkeypatch):
    """OpenEnv's top-level package is also called ``envs``: the loader finds its fleet_env anyway."""
    import sys

    package = tmp_path / "envs" / "fleet_env"
    package.mkdir(parents=True)
    (tmp_path / "envs" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from .task_env import FleetTaskEnv\n")
    (package / "task_env.py").write_text("class FleetTaskEnv:\n    def __init__(self, task_config, **kwargs):\n        self.kwargs = kwargs\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "openenv_fleet_env", raising=False)
    monkeypatch.setenv("FLEET_API_KEY", "fk-test-secret-789")
    found = load_fleet_task_env()
    assert found.__module__ == "openenv_fleet_env.task_env"
    env = FleetClient(max_steps=7)._env_factory({"task_key": "t"})
    assert env.kwargs == {"api_key": "fk-test-secret-789", "max_steps": 7, "request_timeout_s": 60.0}
    monkeypatch.delitem(sys.modules, "openenv_fleet_env")
    monkeypatch.delitem(sys.modules, "openenv_fleet_env.task_env")
