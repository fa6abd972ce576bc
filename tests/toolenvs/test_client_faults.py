"""The client against real servers that fail: killed, slow, refusing, answering 5xx, overloaded; and servers
that outlive nothing (a killed trial takes its env servers with it)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from toolenvs import mcpcompat
from toolenvs.client import EnvClient, EnvError
from toolenvs.local.launch import EnvServerPool, LocalEnvServer
from toolenvs.task import Task

FAULT_APP = "tests.toolenvs.fault_app"


def _task() -> Task:
    return Task(task_key="t", prompt="Echo.", env_key="faulty", verifier_code="def verify(final_state):\n    return 1.0\n")


@pytest.fixture(scope="module")
def fault_server():
    with LocalEnvServer(FAULT_APP) as server:
        yield server


@pytest.fixture
def own_server():
    """A server this test may kill."""
    server = LocalEnvServer(FAULT_APP).start()
    yield server
    server.stop()


def _kill(server: LocalEnvServer) -> None:
    server.process.kill()
    server.process.wait()


BOTH_CALL_PATHS = pytest.mark.parametrize("fast_calls", [True, False], ids=["one-post", "sdk-call"])


@BOTH_CALL_PATHS
def test_server_killed_between_calls_is_env_error_then_reopen_retries(own_server, fast_calls):
    client = EnvClient(own_server.base_url, call_timeout_s=2.0, open_attempts=3, backoff_s=0.05, fast_calls=fast_calls)

    async def go():
        with pytest.raises(EnvError, match="tool call echo"):
            async with client.episode(_task()) as session:
                assert (await session.call_tool("echo", {"text": "hi"})).text == '{"text": "hi"}'
                _kill(own_server)
                started = time.monotonic()
                try:
                    await session.call_tool("echo", {"text": "again"})
                finally:
                    assert time.monotonic() - started < 2.0  # no hang: well before the call timeout
        before = client.stats.open_retries
        with pytest.raises(EnvError, match="after 3 tries"):
            async with client.episode(_task()):
                pass
        return client.stats.open_retries - before

    assert asyncio.run(go()) == 2
    assert (client.stats.opened, client.stats.env_errors) == (1, 2)


@BOTH_CALL_PATHS
def test_server_killed_mid_call_is_env_error_without_waiting_for_the_timeout(own_server, fast_calls):
    client = EnvClient(own_server.base_url, call_timeout_s=20.0, fast_calls=fast_calls)

    async def go():
        async with client.episode(_task()) as session:
            asyncio.get_running_loop().call_later(0.3, own_server.process.kill)
            await session.call_tool("slow", {"seconds": 10})

    started = time.monotonic()
    with pytest.raises(EnvError, match="tool call slow"):
        asyncio.run(go())
    assert time.monotonic() - started < 5.0


@BOTH_CALL_PATHS
def test_slow_tool_times_out_as_env_error_and_the_server_serves_on(fault_server, fast_calls):
    client = EnvClient(fault_server.base_url, call_timeout_s=0.5, fast_calls=fast_calls)

    async def go():
        with pytest.raises(EnvError, match="timed out"):
            async with client.episode(_task()) as session:
                started = time.monotonic()
                await session.call_tool("slow", {"seconds": 5})
        elapsed = time.monotonic() - started  # the call's timeout and the close, not the tool's 5 s
        async with client.episode(_task()) as session:
            echoed = await session.call_tool("echo", {"text": "still here"})
        return elapsed, echoed

    elapsed, echoed = asyncio.run(go())
    assert 0.5 <= elapsed < 3.0 and not echoed.is_error


def test_a_bug_in_the_caller_is_not_an_env_error(fault_server):
    async def go():
        async with EnvClient(fault_server.base_url).episode(_task()):
            raise KeyError("the caller's own bug")

    with pytest.raises(KeyError):
        asyncio.run(go())


class _Recorder(BaseHTTPRequestHandler):
    """Answers every request with the server's ``status`` and records when it came."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.seen.append(time.monotonic())
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps({"error": "unavailable"}).encode()
        self.send_response(self.server.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def status_server():
    def start(status: int) -> tuple[str, list[float]]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
        server.status, server.seen = status, []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", server.seen

    servers: list[ThreadingHTTPServer] = []
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


BACKOFF_S = 0.05
ATTEMPTS = 4


def _open(url: str) -> tuple[EnvClient, float, str]:
    client = EnvClient(url, open_attempts=ATTEMPTS, backoff_s=BACKOFF_S, call_timeout_s=2.0)

    async def go():
        async with client.episode(_task()):
            pass

    started = time.monotonic()
    with pytest.raises(EnvError) as info:
        asyncio.run(go())
    return client, time.monotonic() - started, str(info.value)


def test_5xx_is_retried_with_exponential_backoff_and_jitter(status_server):
    url, seen = status_server(503)
    client, _, message = _open(url)
    assert len(seen) == ATTEMPTS and client.stats.open_retries == ATTEMPTS - 1
    assert "after 4 tries" in message and "503" in message
    for attempt, gap in enumerate(b - a for a, b in zip(seen, seen[1:])):
        low = BACKOFF_S * 2**attempt  # jitter factor in [1, 2)
        assert low * 0.95 <= gap <= 2 * low + 0.25, (attempt, gap)


def test_4xx_is_not_retried_and_says_what_the_server_said(status_server):
    url, seen = status_server(404)
    client, _, message = _open(url)
    assert len(seen) == 1 and client.stats.open_retries == 0 and "not retried" in message
    assert f"HTTP 404 Not Found from POST {url}/episodes: unavailable" in message  # the server's reason, not httpx's link


def test_an_error_status_is_described_with_the_servers_reason_in_one_short_line():
    from toolenvs.faults import REASON_CHARS, describe

    http = mcpcompat.http  # httpx, or httpx2 under MCP 2
    request = http.Request("POST", "http://127.0.0.1:1/episodes")

    def said(status: int, **body: object) -> str:
        response = http.Response(status, request=request, **body)
        return describe(http.HTTPStatusError("x", request=request, response=response))

    unfit = said(422, json={"error": "initial_state does not fit"})  # its reason phrase as the HTTP library names it
    assert unfit.startswith("HTTP 422 Unprocessable ") and unfit.endswith(" from POST http://127.0.0.1:1/episodes: initial_state does not fit")
    assert said(400, json={"detail": "bad field"}).endswith(": bad field")  # FastAPI's key
    assert said(502, text="<html>\n  <b>Bad gateway</b>\n</html>").endswith(": <html> <b>Bad gateway</b> </html>")  # one line
    assert said(500, text="").endswith("from POST http://127.0.0.1:1/episodes")  # nothing said: the status alone
    long = said(500, text="x" * 5000)
    assert long.endswith("...") and len(long.split(": ", 1)[1]) == REASON_CHARS


def test_connection_refused_is_retried_with_backoff():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client, elapsed, message = _open(f"http://127.0.0.1:{port}")
    floor = sum(BACKOFF_S * 2**k for k in range(ATTEMPTS - 1))  # 0.35 s
    assert client.stats.open_retries == ATTEMPTS - 1 and "ConnectError" in message
    assert floor * 0.95 <= elapsed <= 2 * floor + 1.5


def test_backoff_is_capped():
    client = EnvClient("http://127.0.0.1:1", backoff_s=1.0, max_backoff_s=3.0)
    assert all(1.0 <= client.backoff(0) < 2.0 for _ in range(50))
    assert client.backoff(10) == 3.0


@pytest.mark.slow
def test_64_episodes_with_a_cap_of_8_never_open_more_than_8(fault_server):
    client = EnvClient(fault_server.base_url, max_sessions=8)
    open_now, peak_client = [0], [0]

    async def episode(i: int) -> str:
        async with client.episode(_task()) as session:
            open_now[0] += 1
            peak_client[0] = max(peak_client[0], open_now[0])
            await session.call_tool("slow", {"seconds": 0.02})
            text = (await session.call_tool("echo", {"text": str(i)})).text
            open_now[0] -= 1
            return text

    async def go():
        return await asyncio.gather(*[episode(i) for i in range(64)])

    texts = asyncio.run(go())
    health = httpx.get(f"{fault_server.base_url}/health").json()
    assert texts == [json.dumps({"text": str(i)}) for i in range(64)]
    assert health["peak_episodes"] == 8 and peak_client[0] == 8  # measured on the server: the cap held and was used
    assert health["episodes"] == 0 and client.waiting == 0  # every episode freed its state


def test_batched_turns_go_on_while_episodes_wait_for_a_session(fault_server):
    """8 episodes, a cap of 2 sessions, two turns each through the generation batcher (a batch waits for every live
    episode): an episode waiting for a session leaves the batches (``queued``), so every episode ends. Before, the
    2 holding sessions waited for a batch that needed the 6 waiting for them."""
    from grpo.episodes import GenerationBatcher
    from grpo.rollout import Completion, SamplingParams

    class OneToken:  # the batcher's generator (its batches are what is tested): one token per prompt
        batches: list[int] = []

        def generate(self, prompts, sampling):
            self.batches.append(len(prompts))
            return [Completion([1], [0.0], "stop") for _ in prompts]

    client = EnvClient(fault_server.base_url, max_sessions=2)
    generator = OneToken()
    batcher = GenerationBatcher(generator, SamplingParams(max_new_tokens=1), live=8)

    async def episode(i: int) -> str:
        try:
            async with client.episode(_task(), batcher.queued) as session:
                for _ in range(2):
                    await batcher.generate([i], i)
                    text = (await session.call_tool("echo", {"text": str(i)})).text
            return text
        finally:
            batcher.finished()

    async def go():
        return await asyncio.wait_for(asyncio.gather(*[episode(i) for i in range(8)]), 30)

    assert asyncio.run(go()) == [json.dumps({"text": str(i)}) for i in range(8)]
    assert sum(generator.batches) == 16 and max(generator.batches) <= 2 and client.waiting == 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_trial_takes_its_env_servers_with_it():
    script = (
        "import time\nfrom toolenvs.local.launch import EnvServerPool\n"
        "pool = EnvServerPool(['hotel', 'tests.toolenvs.fault_app'])\n"
        "with pool as urls:\n"
        "    print(' '.join(str(s.process.pid) for s in pool.servers.values()), flush=True)\n"
        "    time.sleep(120)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    trial = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=root)
    try:
        pids = [int(p) for p in trial.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        trial.send_signal(signal.SIGKILL)  # no cleanup runs in the trial: only the servers' watchdogs
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in pids), "an env server outlived its trial"
    finally:
        trial.kill()
        trial.wait()
        trial.stdout.close()


def test_pool_starts_all_and_stops_all_also_when_one_fails():
    pool = EnvServerPool(["tests.toolenvs.fault_app", "no_such_app"], ready_timeout_s=30)
    with pytest.raises(RuntimeError, match="'no_such_app' exited with status"):
        with pool:
            pass
    assert all(s.process is None for s in pool.servers.values())
    with EnvServerPool(["tests.toolenvs.fault_app", "tests.toolenvs.fault_app"]) as urls:
        assert list(urls) == ["tests.toolenvs.fault_app"]
        assert httpx.get(f"{urls['tests.toolenvs.fault_app']}/health").json()["env_key"] == "faulty"


def test_one_post_calls_answer_exactly_like_the_sdk(hotel_server):
    """The fast path and the SDK's call_tool give the same results, errors included (on mcp 1.x, which has no
    stateless protocol, both are the SDK's: the client never takes the fast path there)."""
    from grpo.config import DEFAULT_TASKS
    from toolenvs.task import load_tasks

    task = load_tasks(DEFAULT_TASKS)[0]
    calls = [("search_hotels", {"city": "Paris"}), ("search_hotels", {"city": "Atlantis"}),
             ("book_hotel", {"hotel_id": "H01", "check_in": "2030-01-01", "nights": "many"}), ("list_bookings", {})]

    async def run(fast_calls: bool):
        async with EnvClient(hotel_server.base_url, fast_calls=fast_calls).episode(task) as session:
            assert (session._caller is not None) == (fast_calls and mcpcompat.V2)
            return [await session.call_tool(name, args) for name, args in calls]

    fast, sdk = asyncio.run(run(True)), asyncio.run(run(False))
    assert fast == sdk and [r.is_error for r in fast] == [False, True, True, False]
