"""Every local app as a real MCP server: the ``mcp`` SDK's own ClientSession lists and calls its tools, and
a sample of each shipped task set replays through our client exactly as it does in-process."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from toolenvs import mcpcompat
from toolenvs.check import shipped_task_files
from toolenvs.client import EnvClient
from toolenvs.local import APPS, get_app
from toolenvs.local.launch import LocalEnvServer
from toolenvs.local.server import EPISODE_HEADER
from toolenvs.protocol import format_result
from toolenvs.task import Task, load_task_files

pytestmark = pytest.mark.slow
SAMPLE_PER_ENV = 12


@pytest.fixture(scope="module")
def servers():
    started: dict[str, LocalEnvServer] = {}
    try:
        for env_key in APPS:
            started[env_key] = LocalEnvServer(env_key).start()
        yield started
    finally:
        for server in started.values():
            server.stop()


@pytest.fixture(scope="module")
def shipped() -> list[Task]:
    return load_task_files(shipped_task_files())


def _hardest(tasks: list[Task], env_key: str) -> Task:
    return max((t for t in tasks if t.env_key == env_key), key=lambda t: (t.difficulty, t.task_key))


async def _sdk_episode(base_url: str, task: Task):
    """Seed an episode, then drive it with the installed SDK's own client session only (2.x or 1.x, through
    ``mcpcompat``'s few renames): list tools, replay, one bad call."""
    from toolenvs import mcpcompat

    episode_id = f"sdk-{uuid.uuid4().hex[:8]}"
    async with mcpcompat.http.AsyncClient(base_url=base_url, timeout=10) as admin:
        body = {"episode_id": episode_id, "env_variables": task.env_variables, "initial_state": task.initial_state}
        start = (await admin.post("/episodes", json=body)).json()["state"]
        async with mcpcompat.http.AsyncClient(headers={EPISODE_HEADER: episode_id}, timeout=10) as http:
            async with mcpcompat.session(f"{base_url}/mcp", http, 10) as (session, _):
                tools = (await session.list_tools()).tools
                results = [await mcpcompat.call_tool(session, c.name, c.arguments, 10) for c in task.solution]
                bad = await mcpcompat.call_tool(session, task.solution[-1].name, {}, 10)  # required arguments missing
        final = (await admin.get(f"/episodes/{episode_id}")).json()
        await admin.delete(f"/episodes/{episode_id}")
    return tools, results, bad, start, final


@pytest.mark.parametrize("env_key", sorted(APPS))
def test_the_mcp_sdk_client_lists_and_calls_every_app(env_key, servers, shipped):
    app, task = get_app(env_key), _hardest(shipped, env_key)
    tools, results, bad, start, final = asyncio.run(_sdk_episode(servers[env_key].base_url, task))

    assert [t.name for t in tools] == list(app.TOOLS)
    schemas = [mcpcompat.input_schema(t) for t in tools]
    for schema in schemas:  # typed JSON-schema arguments, required where the function has no default
        assert schema["type"] == "object" and all("type" in p or "anyOf" in p for p in schema["properties"].values())
    integer_args = {name for schema in schemas for name, p in schema["properties"].items() if p.get("type") == "integer"}
    assert integer_args, f"{env_key} has no typed integer argument"

    _, _, local = app.replay(task.env_variables, task.initial_state, [(c.name, c.arguments) for c in task.solution])
    assert [text for text, _, _ in results] == [format_result(r) for r in local]
    assert not any(failed for _, failed, _ in results) and bad[1]
    assert app.verify(final, start, task.verifier) == 1.0


def test_a_sample_of_every_task_set_replays_live_as_in_process(servers, shipped):
    """An even spread of about SAMPLE_PER_ENV tasks per env over its families, all difficulties among them."""
    sample = []
    for env_key in sorted(APPS):
        tasks = sorted((t for t in shipped if t.env_key == env_key), key=lambda t: t.task_key)
        sample += tasks[:: max(1, len(tasks) // SAMPLE_PER_ENV)]
    clients = {key: EnvClient(server.base_url, max_concurrent=8) for key, server in servers.items()}

    async def replay(task: Task):
        async with clients[task.env_key].episode(task) as session:
            results = [await session.call_tool(c.name, c.arguments) for c in task.solution]
            return results, await session.score()

    async def go():
        return await asyncio.gather(*[replay(t) for t in sample])

    for task, (results, reward) in zip(sample, asyncio.run(go())):
        _, _, local = get_app(task.env_key).replay(task.env_variables, task.initial_state, [(c.name, c.arguments) for c in task.solution])
        assert [r.text for r in results] == [format_result(r) for r in local], task.task_key
        assert not any(r.is_error for r in results) and reward == 1.0, task.task_key
    assert {t.difficulty for t in sample} >= {1, 2, 3, 4, 5}


def test_errors_reach_the_agent_as_results(servers, shipped):
    """Permission denied, not found, validation and past dates come back as error results, not failures."""
    first = {env_key: next(t for t in shipped if t.env_key == env_key) for env_key in APPS}
    event_id = first["ticketmaster"].initial_state["events"][0]["event_id"]
    cases = {
        "github": ("close_issue", {"repo": "carol/infra", "number": 1}, "repo carol/infra not found"),
        "outlook": ("create_event", {"title": "X", "when": "2020-01-01 10:00"}, "in the past"),
        "ticketmaster": ("buy_tickets", {"event_id": event_id, "quantity": 99}, "quantity must be 1 to 8"),
        "zillow": ("search_listings", {"city": "Tampa", "min_beds": "many"}, "min_beds"),
    }

    async def go(env_key: str):
        name, arguments, _ = cases[env_key]
        async with EnvClient(servers[env_key].base_url).episode(first[env_key]) as session:
            return await session.call_tool(name, arguments)

    for env_key, (_, _, message) in cases.items():
        result = asyncio.run(go(env_key))
        assert result.is_error and message in result.text, (env_key, result.text)


def test_envs_check_command_takes_several_files(tmp_path):
    """``python -m sweep envs check A B``: one table over both files' envs, with a total row."""
    import subprocess
    import sys
    from pathlib import Path

    paths = []
    for env_key in ("github", "zillow"):
        lines = (shipped_task_files()[0].parent / f"{env_key}.jsonl").read_text().splitlines()
        paths.append(tmp_path / f"{env_key}.jsonl")
        paths[-1].write_text("\n".join(lines[::16]) + "\n")
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-m", "sweep", "envs", "check", *map(str, paths)], cwd=root, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {line.split("│")[1].strip(): line for line in run.stdout.splitlines() if line.count("│") > 5}
    assert {"github", "zillow", "all"} <= set(rows) and "100.0" in rows["all"]
