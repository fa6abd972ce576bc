"""The hotel app as a real MCP server on loopback, through the real client."""

from __future__ import annotations

import asyncio

import pytest

from toolenvs.client import EnvClient, EnvError
from toolenvs.local import get_app, tool_signatures
from toolenvs.local.launch import LocalEnvServer
from toolenvs.protocol import format_result, tool_signature
from toolenvs.task import Task


def _run(coro):
    return asyncio.run(coro)


def test_lists_the_apps_tools_in_order(hotel_server, tasks):
    async def go():
        async with EnvClient(hotel_server.base_url).episode(tasks[0]) as session:
            return [tool_signature(t.name, t.input_schema) for t in session.tools]

    assert _run(go()) == tool_signatures(get_app("hotel"))


def test_every_reference_solution_passes_through_the_server(hotel_server, tasks):
    """Replays all tasks concurrently; results must equal the in-process replay used for warm-start text."""
    app = get_app("hotel")
    client = EnvClient(hotel_server.base_url, max_concurrent=8)

    async def replay(task: Task):
        async with client.episode(task) as session:
            texts = [(await session.call_tool(c.name, c.arguments)).text for c in task.solution]
            return texts, await session.score()

    async def go():
        return await asyncio.gather(*[replay(t) for t in tasks])

    for task, (texts, reward) in zip(tasks, _run(go())):
        _, _, local = app.replay(task.env_variables, task.initial_state, [(c.name, c.arguments) for c in task.solution])
        assert texts == [format_result(r) for r in local], task.task_key
        assert reward == 1.0, task.task_key


def test_episodes_are_isolated_and_errors_are_results(hotel_server, tasks):
    task = next(t for t in tasks if t.verifier["type"] == "booking_made")
    client = EnvClient(hotel_server.base_url)

    async def go():
        async with client.episode(task) as a, client.episode(task) as b:
            first = await a.call_tool(task.solution[-1].name, task.solution[-1].arguments)
            missing = await a.call_tool("book_hotel", {"hotel_id": "H99", "check_in": "2030-01-01", "nights": 1})
            bad_type = await a.call_tool("book_hotel", {"hotel_id": "H01", "check_in": "2030-01-01", "nights": "many"})
            unknown = await a.call_tool("delete_everything", {})
            return first, missing, bad_type, unknown, await a.score(), await b.score(), len(await b.final_state())

    first, missing, bad_type, unknown, score_a, score_b, _ = _run(go())
    assert not first.is_error
    assert missing.is_error and "hotel H99 not found" in missing.text
    assert bad_type.is_error and "nights" in bad_type.text
    assert unknown.is_error and "unknown tool" in unknown.text
    assert (score_a, score_b) == (1.0, 0.0)


def test_unreachable_server_is_an_env_error(tasks):
    server = LocalEnvServer("hotel").start()
    url = server.base_url
    server.stop()

    async def go():
        async with EnvClient(url, call_timeout_s=2).episode(tasks[0]):
            pass

    with pytest.raises(EnvError):
        _run(go())


def test_server_stops_with_its_owner():
    server = LocalEnvServer("hotel").start()
    process = server.process
    server.stop()
    assert process.poll() is not None


def test_env_failures_are_told_from_the_callers_own_errors():
    from toolenvs.client import is_env_failure
    from toolenvs.mcpcompat import http

    connect = http.ConnectError("refused")
    assert is_env_failure(connect)
    assert is_env_failure(ExceptionGroup("tg", [connect, ExceptionGroup("inner", [http.ReadTimeout("slow")])]))
    assert not is_env_failure(ValueError("a bug in the caller"))
    assert not is_env_failure(ExceptionGroup("tg", [connect, KeyError("bug")]))


def test_a_bug_in_the_episode_body_is_not_hidden_as_an_env_error(hotel_server, tasks):
    async def go():
        async with EnvClient(hotel_server.base_url).episode(tasks[0]):
            raise KeyError("bug")

    with pytest.raises(KeyError):
        _run(go())


def test_an_idle_connection_outlives_a_generation_pause(hotel_server):
    """A trial's clients idle while a generation batch runs (tens of seconds). uvicorn's default keep-alive of
    5 s closed those connections under them, and a request sent as the server closed failed (ReadError:
    6 of 384 episodes that idled 5 s): the server keeps an idle connection open far longer."""
    import http.client
    import time

    conn = http.client.HTTPConnection("127.0.0.1", hotel_server.port, timeout=10)
    try:
        conn.request("GET", "/health")
        assert conn.getresponse().read()
        sock = conn.sock
        time.sleep(6.0)  # past uvicorn's default keep-alive
        conn.request("GET", "/health")  # on the same socket: a closed one raises RemoteDisconnected here
        assert conn.getresponse().status == 200 and conn.sock is sock
    finally:
        conn.close()


@pytest.mark.parametrize(("body", "status", "says"), [
    (b"{not json", 400, "the body is not JSON"),
    (b"[1, 2]", 400, "must be a JSON object with episode_id, env_variables, initial_state, got list"),
    (b'{"env_variables": {}}', 400, "the body has no episode_id"),
    (b'{"episode_id": "e1", "initial_sate": {}}', 400, "unknown field(s) initial_sate; allowed: episode_id"),
    (b'{"episode_id": "e1", "env_variables": "LOGGED_IN_USER=ana"}', 400, "env_variables must be dict or null, got str"),
    (b'{"episode_id": "e1", "initial_state": {"bookings": [{"hotel_id": "H01"}]}}', 422, "initial_state does not fit the hotel app: KeyError"),
    (b'{"episode_id": "e1", "initial_state": {"bookings": 7}}', 422, "initial_state does not fit the hotel app: TypeError"),
])
def test_a_malformed_seed_gets_a_4xx_that_says_why_and_the_server_goes_on(hotel_server, tasks, body, status, says):
    import httpx

    answer = httpx.post(f"{hotel_server.base_url}/episodes", content=body, headers={"content-type": "application/json"}, trust_env=False)
    assert answer.status_code == status and says in answer.json()["error"], answer.text
    assert answer.json()["error"].startswith("POST /episodes: ")

    async def still_serves():
        async with EnvClient(hotel_server.base_url).episode(tasks[0]) as session:
            return len(session.tools)

    assert _run(still_serves()) > 0


@pytest.mark.parametrize(("arguments", "says"), [
    ({"hotel_id": "H01", "check_in": "2026-12-01", "nights": "2"}, 'book_hotel: nights: input should be a valid integer, got "2"'),
    ({"hotel_id": "H01", "check_in": "2026-12-01", "nights": True}, "book_hotel: nights: input should be a valid integer, got true"),
    ({"hotel_id": "H01", "check_in": "2026-12-01", "nights": 2.0}, "book_hotel: nights: input should be a valid integer, got 2.0"),
    ({"hotel_id": 1, "check_in": "2026-12-01", "nights": 2}, "book_hotel: hotel_id: input should be a valid string, got 1"),
    ({"hotel_id": "H01", "check_in": "2026-12-01", "nights": 2, "guests": 2},
     "book_hotel: unknown argument guests (arguments: hotel_id, check_in, nights)"),
    ({"hotel_id": "H01"}, "book_hotel: missing argument check_in; missing argument nights"),
])
def test_arguments_are_checked_strictly_against_the_schema(hotel_server, tasks, arguments, says):
    """No coercion ("2" or true for an integer), nothing unknown, nothing missing: an invalid_argument result
    the agent reads, the episode's state untouched; the same call with its declared types succeeds."""

    async def call():
        async with EnvClient(hotel_server.base_url).episode(tasks[0]) as session:
            refused = await session.call_tool("book_hotel", arguments)
            listed = await session.call_tool("list_bookings", {})
            booked = await session.call_tool("book_hotel", {"hotel_id": "H01", "check_in": "2026-12-01", "nights": 2})
            return refused, listed, booked

    refused, listed, booked = _run(call())
    assert (refused.is_error, refused.failure, refused.text) == (True, "invalid_argument", says)
    assert listed.text == "[]" and not booked.is_error


def test_every_tool_parameter_of_every_app_is_described():
    import inspect

    from toolenvs.local import APPS
    from toolenvs.local.server import argument_checks, tool_signatures

    for key in APPS:
        app = get_app(key)
        for name, fn in app.TOOLS.items():
            params = list(inspect.signature(fn).parameters)[1:]
            assert all(app.PARAMETERS.get(p) for p in params), (key, name, [p for p in params if p not in app.PARAMETERS])
            assert list(argument_checks(tool_signatures(app))[name].model_fields) == params
        assert set(app.PARAMETERS) == {p for fn in app.TOOLS.values() for p in list(inspect.signature(fn).parameters)[1:]}, key


def test_the_schema_carries_the_descriptions(hotel_server, tasks):
    async def tools():
        async with EnvClient(hotel_server.base_url).episode(tasks[0]) as session:
            return {t.name: t.input_schema for t in session.tools}

    schemas = _run(tools())
    hotel = get_app("hotel")
    for schema in schemas.values():
        assert {p: spec["description"] for p, spec in schema["properties"].items()} == {p: hotel.PARAMETERS[p] for p in schema["properties"]}
