"""How the client opens episodes against a live server: the server asked once, later episodes seeded only,
one connection pool per client (its failure modes are in test_client_faults.py)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from toolenvs import mcpcompat
from toolenvs.client import EPISODES_PER_POOL, EnvClient


async def _replay(client: EnvClient, task, seen: list) -> float:
    async with client.episode(task) as session:
        seen.append(session)
        for call in task.solution:
            await session.call_tool(call.name, call.arguments)
        return await session.score()


def test_the_server_is_asked_once_and_every_episode_after_that_is_only_seeded(hotel_server, tasks):
    client = EnvClient(hotel_server.base_url, max_concurrent=8)
    seen: list = []

    async def go():
        return await asyncio.gather(*[_replay(client, t, seen) for t in tasks[:16]])

    assert asyncio.run(go()) == [1.0] * 16
    assert (client.stats.discovered, client.stats.opened) == (1, 16)
    if mcpcompat.V2:  # the stateless protocol: one POST per call, no SDK session
        assert all(s._caller is not None and s._mcp is None for s in seen)
    else:  # mcp 1.x speaks only stateful protocols: each episode is an SDK session
        assert all(s._caller is None and s._mcp is not None for s in seen)
    assert len({id(s._state.http) for s in seen}) == 16 // EPISODES_PER_POOL  # episodes share HTTP clients, 8 a client
    assert client._pools == []  # the last episode of each pool closed it
    assert httpx.get(f"{hotel_server.base_url}/health").json()["episodes"] == 0  # every episode freed its state


def test_the_tools_it_remembers_are_those_an_sdk_session_lists(hotel_server, tasks):
    async def tools(fast_calls: bool):
        async with EnvClient(hotel_server.base_url, fast_calls=fast_calls).episode(tasks[0]) as session:
            return session.tools, session._mcp is None

    (remembered, lean), (listed, sdk_lean) = asyncio.run(tools(True)), asyncio.run(tools(False))
    assert remembered == listed and lean == mcpcompat.V2 and not sdk_lean  # no fast path on mcp 1.x


def test_one_client_serves_one_event_loop_after_another(hotel_server, tasks):
    """The trainer's clients live in one asyncio.run each; a client used across runs must not keep a pool
    bound to a closed loop."""
    client = EnvClient(hotel_server.base_url)
    seen: list = []
    first = asyncio.run(_replay(client, tasks[0], seen))
    second = asyncio.run(_replay(client, tasks[1], seen))
    assert (first, second) == (1.0, 1.0) and (client.stats.discovered, client.stats.opened) == (1, 2)


def test_scoring_reads_and_frees_the_state_in_one_request_and_ends_the_episode(hotel_server, tasks):
    task = next(t for t in tasks if t.verifier["type"] == "booking_made")
    health = f"{hotel_server.base_url}/health"

    async def go():
        async with EnvClient(hotel_server.base_url).episode(task) as session:
            for call in task.solution:
                await session.call_tool(call.name, call.arguments)
            before = httpx.get(health).json()["episodes"]
            reward = await session.score()
            after = httpx.get(health).json()["episodes"]
            final = await session.final_state()  # the state it scored, no longer on the server
            with pytest.raises(RuntimeError, match="was scored"):
                await session.call_tool(task.solution[0].name, task.solution[0].arguments)
            return reward, before - after, final

    reward, freed, final = asyncio.run(go())
    assert (reward, freed) == (1.0, 1) and len(final["bookings"]) == 1
