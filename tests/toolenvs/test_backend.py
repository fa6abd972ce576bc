"""Environment backends: each config owns its checks and opens its environments, which serve the episode seam."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from grpo.config import EnvConfig
from toolenvs.backend import FleetBackendConfig, LocalBackendConfig
from toolenvs.task import Task


def test_the_config_names_the_backend_by_type():
    assert EnvConfig().backend == LocalBackendConfig()
    assert EnvConfig.model_validate({"backend": "local"}).backend.type == "local"
    fleet = EnvConfig.model_validate({"backend": {"type": "fleet", "max_instances": 4}}).backend
    assert isinstance(fleet, FleetBackendConfig) and (fleet.max_instances, fleet.ttl_s, fleet.partial_reward) == (4, 600, False)
    with pytest.raises(ValidationError, match="does not match any of the expected tags: 'local', 'fleet'"):
        EnvConfig.model_validate({"backend": {"type": "nowhere"}})
    with pytest.raises(ValidationError, match="max_instances"):
        EnvConfig.model_validate({"backend": {"type": "fleet", "max_instances": 0}})
    with pytest.raises(ValidationError, match="api_key"):  # the key is never a config key
        EnvConfig.model_validate({"backend": {"type": "fleet", "api_key": "fk-1"}})


FLEET_FUNC = "def validate_task(env, final_answer=None):\n    return 1\n"


def test_each_backend_refuses_the_tasks_it_cannot_run_by_name(tasks):
    local = tasks[0]
    hosted = Task(task_key="booking-1", prompt="Book it.", env_key="booking", verifier_func=FLEET_FUNC)
    hosted_hotel = Task(task_key="hotel-f", prompt="Book it.", env_key="hotel", verifier_func=FLEET_FUNC)

    def on_fleet(tasks):  # Fleet also names what this machine lacks (key, SDK, OpenEnv): only the task lines here
        return [p for p in FleetBackendConfig().problems(tasks) if "verifier_func" in p]

    assert LocalBackendConfig().problems([local]) == [] and on_fleet([hosted, hosted_hotel]) == []
    on_local = LocalBackendConfig().problems([local, hosted, hosted_hotel])
    assert len(on_local) == 2 and "env_key(s) booking are not local apps" in on_local[0] and "hotel-f" in on_local[1]
    (refused,) = on_fleet([hosted, local])
    assert refused.startswith("1 task(s) have no verifier_func") and refused.endswith(local.task_key)


def test_fleet_names_what_it_lacks_here(monkeypatch):
    """Without the key (and, in this venv, the fleet extra and OpenEnv) the Fleet backend says so, one line each."""
    monkeypatch.delenv("FLEET_API_KEY", raising=False)
    monkeypatch.delenv("OPENENV_PATH", raising=False)
    problems = FleetBackendConfig(openenv_path="/nowhere").problems([])
    assert any("FLEET_API_KEY" in p for p in problems) and any("not found under /nowhere" in p for p in problems)


def test_the_client_limits_moved_under_the_local_backend_and_old_configs_still_load():
    """``env.max_concurrent``/``env.call_timeout_s`` are the local backend's now; a config written before the move
    (every saved sweep has both, at their defaults) still loads, on either backend."""
    moved = EnvConfig.model_validate({"max_concurrent": 8, "call_timeout_s": 3.0}).backend
    assert moved == LocalBackendConfig(max_concurrent=8, call_timeout_s=3.0)
    same = EnvConfig.model_validate({"max_concurrent": 4, "backend": {"type": "local", "max_concurrent": 4}}).backend
    assert same.max_concurrent == 4
    with pytest.raises(ValidationError, match=r"env.max_concurrent = 8 and env.backend.max_concurrent = 4: .*keep env.backend.max_concurrent only"):
        EnvConfig.model_validate({"max_concurrent": 8, "backend": {"type": "local", "max_concurrent": 4}})  # never one silently winning
    saved_fleet = EnvConfig.model_validate({"max_concurrent": 32, "call_timeout_s": 10.0, "backend": {"type": "fleet"}}).backend
    assert saved_fleet == FleetBackendConfig()
    with pytest.raises(ValidationError, match=r"env.max_concurrent = 64: the fleet backend has no such limit \(its keys: max_instances"):
        EnvConfig.model_validate({"max_concurrent": 64, "backend": {"type": "fleet"}})  # Fleet never honoured it
    assert EnvConfig.model_dump(EnvConfig()).keys() == {"backend", "tasks_path", "env_keys", "max_tasks"}


def test_the_local_backend_serves_episodes_and_stops_its_servers(tasks):
    task = tasks[0]
    backend = LocalBackendConfig(max_concurrent=4, call_timeout_s=5.0).open([task.env_key, task.env_key])

    async def replay(clients):
        async with clients[task.env_key].episode(task) as session:
            for call in task.solution:
                await session.call_tool(call.name, call.arguments)
            return await session.score()

    with backend:
        clients = None

        async def run():
            nonlocal clients
            clients = backend.clients()
            return await replay(clients)

        assert asyncio.run(run()) == 1.0
        assert list(clients) == [task.env_key] and clients[task.env_key].call_timeout_s == 5.0
        servers = list(backend.pool.servers.values())
        assert all(s.process is not None and s.process.poll() is None for s in servers)
    assert all(s.process is None for s in servers)
