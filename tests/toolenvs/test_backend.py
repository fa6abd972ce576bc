"""Environment backends are built from config by one factory, and serve the episode seam."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from grpo.config import EnvConfig
from toolenvs.backend import ClientLimits, FleetBackendConfig, LocalBackendConfig, make_backend, task_problems
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
    assert task_problems(LocalBackendConfig(), [local]) == [] and task_problems(FleetBackendConfig(), [hosted, hosted_hotel]) == []
    on_local = task_problems(LocalBackendConfig(), [local, hosted, hosted_hotel])
    assert len(on_local) == 2 and "env_key(s) booking are not local apps" in on_local[0] and "hotel-f" in on_local[1]
    (on_fleet,) = task_problems(FleetBackendConfig(), [hosted, local])
    assert on_fleet.startswith("1 task(s) have no verifier_func") and on_fleet.endswith(local.task_key)


def test_the_local_backend_serves_episodes_and_stops_its_servers(tasks):
    task = tasks[0]
    backend = make_backend(LocalBackendConfig(), [task.env_key, task.env_key], ClientLimits(max_concurrent=4, call_timeout_s=5.0))

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
