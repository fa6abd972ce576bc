"""A local app started by hand serves any MCP client: the SDK's own client, with no seed call and no
``x-episode-id`` header, lists the tools and calls them on the server's default episode (a task's world with
``--task``), on the port given; the trainer's servers (``--no-default-episode``) keep every episode isolated.

The client here is the ``mcp`` SDK's, used as its documentation shows (not ``toolenvs.client``), in whichever
major version this venv has (2.x in ``.venv``, 1.x in ``.venv-fleet``).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.ports import free_port
from toolenvs import mcpcompat
from toolenvs.client import EnvClient
from toolenvs.task import load_tasks
from toolenvs.verify import score

ROOT = Path(__file__).resolve().parents[2]
TASK = next(t for t in load_tasks(ROOT / "toolenvs" / "data" / "hotel.jsonl") if t.task_key == "hotel-book_id-00")


@contextmanager
def by_hand(*args: str) -> Iterator[tuple[str, str]]:
    """``python -m toolenvs.local.server ARGS`` as a person starts it: (its base URL, what it told them)."""
    process = subprocess.Popen([sys.executable, "-m", "toolenvs.local.server", *args], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        ready = process.stdout.readline().strip()
        assert ready.startswith("READY "), ready + process.stderr.read()
        told = process.stderr.readline().strip() if "--no-default-episode" not in args else ""
        yield f"http://127.0.0.1:{ready.split()[1]}", told
    finally:
        process.kill()
        process.communicate()  # reaps it and closes both pipes


async def sdk_calls(url: str, calls: list[tuple[str, dict]]) -> tuple[list[str], list[tuple[str, bool]]]:
    """The SDK's own client on ``url``: its tool names, and each call's (text, is_error)."""
    from mcp.client.streamable_http import streamable_http_client

    if mcpcompat.V2:
        from mcp import Client

        async with Client(streamable_http_client(url)) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            results = [await client.call_tool(name, arguments) for name, arguments in calls]
            return tools, [("".join(block.text for block in r.content), r.is_error) for r in results]
    from mcp import ClientSession

    async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        tools = [t.name for t in (await session.list_tools()).tools]
        results = [await session.call_tool(name, arguments) for name, arguments in calls]
        return tools, [("".join(block.text for block in r.content), r.isError) for r in results]


def state(base: str, episode: str = "default") -> dict:
    with urllib.request.urlopen(f"{base}/episodes/{episode}", timeout=10) as response:
        return json.loads(response.read())


def test_the_sdks_own_client_drives_an_app_started_by_hand_on_a_known_port():
    port = free_port()
    with by_hand("--app", "hotel", "--port", str(port), "--task", TASK.task_key) as (base, told):
        assert base == f"http://127.0.0.1:{port}" and TASK.prompt in told and "/episodes/default" in told, told
        start = state(base)
        assert start["today"] == TASK.env_variables["CURRENT_DATE"] and start["bookings"] == {}  # the task's world
        calls = [(c.name, c.arguments) for c in TASK.solution]
        tools, results = asyncio.run(sdk_calls(f"{base}/mcp", calls))
        assert "book_hotel" in tools and not any(failed for _, failed in results), results
        final = state(base)
        assert len(final["bookings"]) == 1 and score(TASK, start, final) == 1.0  # the state changed as the task asks
        _, again = asyncio.run(sdk_calls(f"{base}/mcp", [("list_bookings", {})]))  # a second client shares the episode
        assert "H01" in again[0][0], again

        async def trainer_episode() -> float:  # our client's episodes stay isolated by their header
            async with EnvClient(base).episode(TASK) as session:
                for call in TASK.solution:
                    await session.call_tool(call.name, call.arguments)
                return await session.score()

        assert asyncio.run(trainer_episode()) == 1.0
        assert state(base) == final  # the default episode did not see it


def test_a_server_without_a_default_episode_refuses_calls_without_the_header_by_name():
    with by_hand("--app", "hotel", "--no-default-episode") as (base, _):
        seed = urllib.request.Request(f"{base}/episodes", data=json.dumps({"episode_id": "default"}).encode(), method="POST")
        urllib.request.urlopen(seed, timeout=10).close()  # an episode that happens to be named so: still the header's only
        _, results = asyncio.run(sdk_calls(f"{base}/mcp", [("list_bookings", {})]))
    (text, failed), = results
    assert failed and "no x-episode-id header, and this server has no default episode" in text, text


def test_a_taken_port_or_an_unknown_task_is_named():
    port = free_port()
    with by_hand("--app", "hotel", "--port", str(port)):
        taken = subprocess.run([sys.executable, "-m", "toolenvs.local.server", "--app", "hotel", "--port", str(port)], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
    assert taken.returncode == 1 and f"--port {port}: cannot listen on 127.0.0.1:{port}" in taken.stderr, taken.stderr
    unknown = subprocess.run([sys.executable, "-m", "toolenvs.local.server", "--app", "hotel", "--task", "hotel-nope"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 1 and "--task hotel-nope: no hotel task of that key" in unknown.stderr, unknown.stderr
