"""Environment backends are built from config by one factory, and serve the episode seam."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from grpo.config import EnvConfig
from toolenvs.backend import ClientLimits, LocalBackendConfig, make_backend


def test_the_config_names_the_backend_by_type():
    assert EnvConfig().backend == LocalBackendConfig()
    assert EnvConfig.model_validate({"backend": "local"}).backend.type == "local"
    with pytest.raises(ValidationError, match="does not match any of the expected tags: 'local'"):
        EnvConfig.model_validate({"backend": {"type": "nowhere"}})


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
