"""Our ``fleet`` backend (``toolenvs.fleet_backend.FleetBackend``, ``toolenvs.fleet``) on OpenEnv's real
``FleetTaskEnv`` and the real ``fleet-python`` SDK, against the fake Fleet service: episodes through the
same seam the trainer uses, the instance cap, closing that deletes, the ``None`` reward as a verifier
error, the conversation reaching a judge-style verifier, and the key kept out of what we say.

Runs in ``.venv-fleet`` (the fleet extra: mcp 1.x); skips with the reason elsewhere.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.fleet_stack import require

OPENENV_SRC = require()

from tests.support.fake_fleet import FakeFleet, fleet_dataset, fleet_form  # noqa: E402
from toolenvs.backend import FleetBackendConfig  # noqa: E402
from toolenvs.errors import EnvError, VerifierError  # noqa: E402
from toolenvs.task import load_tasks, parse_task  # noqa: E402

pytestmark = pytest.mark.fleet

API_KEY = "fake-fleet-key-7c1d0e"
HOTEL_TASKS = Path(__file__).resolve().parents[2] / "toolenvs" / "data" / "hotel.jsonl"
# a judge-style verifier (OpenEnv hands ``conversation`` to a ``verify`` that declares it): passes when the
# transcript holds an assistant turn that called book_hotel
JUDGE = '''
def verify(env, final_answer=None, conversation=None):
    import json
    turns = json.loads(conversation or "[]")
    called = any(t.get("role") == "assistant" and "book_hotel" in t.get("content", "") for t in turns)
    print(f"JUDGED {len(turns)} messages")
    return 1 if called else 0
'''


@pytest.fixture()
def fleet_env(monkeypatch):
    monkeypatch.setenv("FLEET_API_KEY", API_KEY)
    monkeypatch.setenv("OPENENV_PATH", str(OPENENV_SRC))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    return monkeypatch


@pytest.fixture(scope="module")
def booking_tasks():
    return [t for t in load_tasks(HOTEL_TASKS) if (t.verifier or {}).get("type") == "booking_made"][:4]


async def _play(client: Any, task: Any, calls: list[tuple[str, dict[str, Any]]], conversation: list[dict[str, str]]) -> dict[str, Any]:
    out: dict[str, Any] = {"task": task.task_key}
    try:
        async with client.episode(task) as session:
            out["tools"] = sorted(t.name for t in session.tools)
            out["results"] = [await session.call_tool(name, arguments) for name, arguments in calls]
            out["unknown"] = await session.call_tool("no_such_tool", {})
            out["reward"] = await session.score(conversation=conversation)
    except EnvError as exc:
        out["error"] = exc
    return out


def test_episodes_through_the_backend_score_cap_close_and_fail_as_errors(hotel_server, booking_tasks, fleet_env, capsys):
    solved, wrong, judged, failing = booking_tasks
    records = [fleet_form(solved), fleet_form(wrong), {**fleet_form(judged), "key": f"{judged.task_key}-judge", "verifier_func": JUDGE},
               fleet_form(failing, failure="judge_error")]
    tasks = [parse_task(r, "fleet_form") for r in records]
    spec = wrong.verifier
    book_call = ("book_hotel", {"hotel_id": judged.verifier["hotel_id"], "check_in": judged.verifier["check_in"], "nights": judged.verifier["nights"]})
    plays = [
        ([(c.name, c.arguments) for c in solved.solution], []),
        ([("book_hotel", {"hotel_id": spec["hotel_id"], "check_in": spec["check_in"], "nights": spec["nights"] + 1})], []),
        ([book_call], [{"role": "user", "content": judged.prompt}, {"role": "assistant", "content": f"<tool_call>{json.dumps(book_call[0])}</tool_call>"}]),
        ([(c.name, c.arguments) for c in failing.solution], []),
    ]
    datasets = {k: v for t in booking_tasks for k, v in fleet_dataset(t).items()}
    with FakeFleet({"hotel": hotel_server.base_url}, datasets, API_KEY) as fake:
        fleet_env.setenv("FLEET_BASE_URL", fake.base_url)
        backend = FleetBackendConfig(max_instances=2, request_timeout_s=30).open(["hotel"])
        with backend:
            client = backend.clients()["hotel"]

            async def run_all() -> list[dict[str, Any]]:
                return await asyncio.gather(*(_play(client, t, calls, conv) for t, (calls, conv) in zip(tasks, plays)))

            out = asyncio.run(run_all())
        assert fake.peak_instances == 2  # four episodes at once, two instances open at most
        assert fake.created == fake.deleted == 4 and fake.open_instances == 0  # each deleted when its episode closed, not at its TTL
        assert fake.unexpected == [] and fake.bad_auth == []
        runs = {r["instance_id"]: r for r in fake.verifier_runs}
    solution, wrong_booking, judge, judge_failed = out
    assert solution["tools"] and solution["reward"] == 1.0
    assert wrong_booking["reward"] == 0.0
    assert all(not r.is_error for r in solution["results"] + wrong_booking["results"])
    assert solution["unknown"].is_error and solution["unknown"].failure == "unknown_tool"
    assert judge["reward"] == 1.0  # only the conversation we handed over says book_hotel was called
    judged_runs = [r for r in runs.values() if "JUDGED" in (r["stdout"] or "")]
    assert len(judged_runs) == 1 and json.loads(judged_runs[0]["kwargs"]["conversation"])[1]["role"] == "assistant"
    assert "reward" not in judge_failed and isinstance(judge_failed["error"], VerifierError)
    assert "left out, not scored 0" in str(judge_failed["error"])
    assert API_KEY not in capsys.readouterr().out + capsys.readouterr().err + repr(out)
