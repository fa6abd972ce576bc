"""The fake Fleet service (``tests/support/fake_fleet.py``) against the real ``fleet-python`` SDK and OpenEnv's
real ``FleetTaskEnv``: provisioning, tools over MCP, verifiers, the ``None`` reward, closing, the API key.

Nothing of the SDK or OpenEnv is patched: ``FLEET_BASE_URL`` points the SDK at the fake, whose instances are
episodes on our local hotel app. One batch of four episodes runs concurrently (a module fixture), so
OpenEnv's fixed 8 s wait before listing tools and its 3 + 6 + 12 s verifier retries are paid once.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.fleet_stack import require

OPENENV_SRC = require()
import httpx  # noqa: E402
from envs.fleet_env import FleetMCPTools, FleetTaskEnv  # noqa: E402
from fleet._async import AsyncFleet  # noqa: E402
from fleet._async.exceptions import FleetAuthenticationError  # noqa: E402

from tests.support.fake_fleet import FakeFleet, fleet_dataset, fleet_form, openenv_task_config  # noqa: E402
from toolenvs.local import hotel  # noqa: E402
from toolenvs.task import load_tasks, parse_task  # noqa: E402

pytestmark = pytest.mark.fleet

API_KEY = "fake-fleet-test-key"
HOTEL_TASKS = Path(__file__).resolve().parents[2] / "toolenvs" / "data" / "hotel.jsonl"
VERIFY_BACKOFF_S = 3 + 6 + 12  # OpenEnv's task_env.py: 4 attempts, 3.0 * 2**attempt between them


def _env_vars(monkeypatch: pytest.MonkeyPatch, fake: FakeFleet) -> None:
    monkeypatch.setenv("FLEET_BASE_URL", fake.base_url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def _tool_names(observation: dict[str, Any]) -> list[str]:
    return [t.get("function", t)["name"] for t in observation["tools"]]


async def _episode(fake: FakeFleet, record: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One episode through FleetTaskEnv: reset, the calls, done (the reward), close; what happened."""
    env = FleetTaskEnv(openenv_task_config(record), api_key=API_KEY, ttl_seconds=600, max_steps=20, request_timeout_s=30, reset_timeout_s=10)
    out: dict[str, Any] = {"results": []}
    started = time.monotonic()
    sdk_env = None
    try:
        observation = await env.reset_async()
        out["reset_s"] = time.monotonic() - started
        out["tools"] = _tool_names(observation)
        sdk_env = env._orch._fleet_env  # the SDK's AsyncEnv: FleetTaskEnv._orch (FleetEnvClient)._fleet_env
        out["instance_id"] = sdk_env.instance_id
        for name, arguments in calls:
            step_observation, _, _, info = await env.step_async({"tool": name, "params": arguments})
            out["results"].append((step_observation["observation"], info.get("tool_error")))
        verifying = time.monotonic()
        _, out["reward"], out["done"], _ = await env.step_async({"done": True})
        out["verify_s"] = time.monotonic() - verifying
        out["verifier_stdout"], out["verifier_error"] = env.verifier_stdout, env.verifier_error
    finally:
        await env.close_async()
        if sdk_env is not None:
            # close_async hands the SDK's async close to a thread that never awaits it (client.py:440-443)
            out["open_after_close_async"] = sdk_env.instance_id in fake.open_ids()
            await sdk_env.close()
    return out


@pytest.fixture(scope="module")
def booking_tasks():
    tasks = [t for t in load_tasks(HOTEL_TASKS) if (t.verifier or {}).get("type") == "booking_made"]
    return tasks[:4]


@pytest.fixture(scope="module")
def batch(hotel_server, booking_tasks):
    """Four concurrent episodes on one fake: the reference solution, a wrong booking, a verifier that raises,
    one whose judge errors."""
    solved, wrong, raising, judged = booking_tasks
    records = {
        "solution": fleet_form(solved),
        "wrong": fleet_form(wrong),
        "raise": fleet_form(raising, failure="raise"),
        "judge_error": fleet_form(judged, failure="judge_error"),
    }
    spec = wrong.verifier
    calls = {
        "solution": [(c.name, c.arguments) for c in solved.solution],
        "wrong": [("book_hotel", {"hotel_id": spec["hotel_id"], "check_in": spec["check_in"], "nights": spec["nights"] + 1})],
        "raise": [(c.name, c.arguments) for c in raising.solution],
        "judge_error": [(c.name, c.arguments) for c in judged.solution],
    }
    datasets = {k: v for t in booking_tasks for k, v in fleet_dataset(t).items()}
    with FakeFleet({"hotel": hotel_server.base_url}, datasets, API_KEY) as fake, pytest.MonkeyPatch.context() as monkeypatch:
        _env_vars(monkeypatch, fake)

        async def run_all():
            names = list(records)
            done = await asyncio.gather(*(_episode(fake, records[n], calls[n]) for n in names))
            return dict(zip(names, done))

        started = time.monotonic()
        results = asyncio.run(run_all())
        yield {"fake": fake, "results": results, "records": records, "tasks": booking_tasks, "wall_s": time.monotonic() - started}


def test_fleet_form_is_a_task_our_loader_reads(booking_tasks):
    record = fleet_form(booking_tasks[0])
    assert set(record) == {"key", "prompt", "env_id", "version", "data_id", "data_version", "env_variables", "verifier_func", "task_modality"}
    task = parse_task(record, "fleet_form")
    assert (task.task_key, task.env_key, task.data_key, task.verifier_func) == (record["key"], "hotel", record["data_id"], record["verifier_func"])


def test_reset_lists_the_hotel_tools_once_each(batch):
    fake, results = batch["fake"], batch["results"]
    for result in results.values():
        assert sorted(result["tools"]) == sorted(hotel.TOOLS)  # both MCP endpoints answer; OpenEnv dedupes by name
    body = fake.make_requests[0]
    task = next(t for t in batch["tasks"] if body["data_key"] == f"{t.task_key}-data")
    assert (body["env_key"], body["env_version"], body["data_version"]) == ("hotel", "v1", "v1")
    assert body["env_variables"] == task.env_variables
    assert fake.resets == 4  # OpenEnv's reset posts to the manager once per episode


def test_reference_solution_scores_one(batch):
    result = batch["results"]["solution"]
    assert result["reward"] == 1.0 and result["done"] is True
    assert result["results"][0][1] is None and result["results"][0][0]["booking_id"]  # the tool's JSON, parsed
    assert "[C] 1 new booking was created" in result["verifier_stdout"]


def test_wrong_booking_scores_zero(batch):
    result = batch["results"]["wrong"]
    assert result["reward"] == 0.0
    assert "Expected nights" in result["verifier_stdout"]


def test_failed_verification_is_none_after_openenv_retries(batch):
    fake, results = batch["fake"], batch["results"]
    for name in ("raise", "judge_error"):
        result = results[name]
        assert result["reward"] is None, name
        assert VERIFY_BACKOFF_S <= result["verify_s"] < VERIFY_BACKOFF_S + 5, (name, result["verify_s"])
        runs = [r for r in fake.verifier_runs if r["instance_id"] == result["instance_id"]]
        assert len(runs) == 4, name  # OpenEnv's _VERIFY_MAX_ATTEMPTS
    assert results["raise"]["verifier_error"] == "Verifier failed: result=None"
    raised = [r for r in fake.verifier_runs if r["instance_id"] == results["raise"]["instance_id"]]
    assert all("injected verifier failure" in (r["error"] or {}).get("message", "") for r in raised), raised
    assert results["judge_error"]["verifier_error"] == "Verifier failed: judge LLM call errored (grade unknown)"


def test_close_frees_every_instance_and_nothing_unexpected_was_called(batch):
    fake, results = batch["fake"], batch["results"]
    assert all(r["open_after_close_async"] for r in results.values())  # OpenEnv's close_async alone leaves it open
    assert fake.created == fake.deleted == 4 and fake.open_instances == 0
    assert fake.peak_instances == 4
    assert fake.unexpected == [] and fake.bad_auth == []


def test_wrong_api_key_is_refused(hotel_server, booking_tasks, monkeypatch):
    record = fleet_form(booking_tasks[0])
    with FakeFleet({"hotel": hotel_server.base_url}, fleet_dataset(booking_tasks[0]), API_KEY) as fake:
        _env_vars(monkeypatch, fake)
        env = FleetTaskEnv(openenv_task_config(record), api_key="not-the-key", ttl_seconds=600)
        started = time.monotonic()
        with pytest.raises(FleetAuthenticationError, match="Invalid API key"):
            asyncio.run(env.reset_async())
        assert time.monotonic() - started < 5  # refused at once: OpenEnv retries only transient make() errors
        assert fake.bad_auth == ["POST /v1/env/instances"] and fake.created == 0
        assert httpx.get(f"{fake.base_url}/v1/env/instances", trust_env=False).status_code == 401


def test_one_mcp_endpoint_missing_is_tolerated_and_manager_reset_reseeds(hotel_server, booking_tasks, monkeypatch):
    """An image serving only ``{root}mcp``: OpenEnv's FleetMCPTools still lists each tool once and calls them;
    the manager's reset puts the episode back to its seed (here a data set with a booking)."""
    task = booking_tasks[0]
    seeded = {"bookings": [{"booking_id": "B7", "hotel_id": "H02", "guest": task.env_variables["LOGGED_IN_USER"],
                            "check_in": "2026-12-01", "nights": 2}]}

    async def run(fake: FakeFleet) -> dict[str, Any]:
        sdk = AsyncFleet(api_key=API_KEY)
        env = await sdk.make(env_key="hotel:1", data_key="seeded:1", env_variables=task.env_variables)
        try:
            tools = FleetMCPTools(api_key=API_KEY, mcp_urls=(f"{env.urls.root}mcp", f"{env.urls.root}api/v1/mcp"), initial_wait=0)
            listed = await tools.list_tools()
            before = await tools.call_tool("list_bookings", {})
            booked = await tools.call_tool("book_hotel", {"hotel_id": "H01", "check_in": "2026-12-10", "nights": 1})
            async with httpx.AsyncClient(trust_env=False) as client:
                reset = await client.post(f"{env.urls.manager.api}/reset", json={}, headers={"Authorization": f"Bearer {API_KEY}"})
            after = await tools.call_tool("list_bookings", {})
            return {"names": [t["function"]["name"] for t in listed.tools], "before": before, "booked": booked,
                    "reset": reset.json(), "after": after, "env": env}
        finally:
            await env.close()

    with FakeFleet({"hotel": hotel_server.base_url}, {"seeded": seeded}, API_KEY, mcp_endpoints=("mcp",)) as fake:
        _env_vars(monkeypatch, fake)
        out = asyncio.run(run(fake))
        assert sorted(out["names"]) == sorted(hotel.TOOLS)
        assert [b["booking_id"] for b in out["before"]] == ["B7"]
        assert out["booked"]["hotel_id"] == "H01"
        assert out["reset"] == {"success": True, "message": "Environment reset to its seed"}
        assert [b["booking_id"] for b in out["after"]] == ["B7"]
        assert fake.open_instances == 0 and fake.unexpected == [] and fake.bad_auth == []
