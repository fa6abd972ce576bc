"""Untrusted verifier_code: a correct one scores; hostile or broken ones are stopped and scored as errors."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from toolenvs.client import EnvClient
from toolenvs.errors import EnvError, VerifierError
from toolenvs.lifeline import alive
from toolenvs.sandbox import SandboxLimits, run_verifier, run_verifier_async
from toolenvs.task import Task
from toolenvs.verify import score

FAST = SandboxLimits(timeout_s=1.5, memory_mb=256)
STATE = {"bookings": {"B100": {"hotel_id": "H01", "check_in": "2026-05-09", "nights": 5, "status": "active"}}}
CORRECT = """
import json
from datetime import date

def verify(final_state):
    print("prints do not disturb the result")
    active = [b for b in final_state["bookings"].values() if b["status"] == "active"]
    ok = len(active) == 1 and date.fromisoformat(active[0]["check_in"]) == date(2026, 5, 9)
    return 1.0 if ok else 0.0
"""


def test_correct_verifier_scores():
    assert run_verifier(CORRECT, STATE, FAST) == 1.0
    assert run_verifier(CORRECT, {"bookings": {}}, FAST) == 0.0


def test_verifier_error_is_an_env_error_never_a_reward():
    assert issubclass(VerifierError, EnvError) and VerifierError.outcome == "verifier_error"


@pytest.mark.parametrize(
    ("name", "body", "message"),
    [
        ("infinite loop", "    while True:\n        pass", "timed out after 1.5s"),
        ("sleep", "    import time\n    time.sleep(60)", "timed out"),
        ("os.system", "    import os\n    os.system('touch {marker}')\n    return 1.0", "os.system is not allowed"),
        ("subprocess", "    import subprocess\n    subprocess.run(['touch', '{marker}'])\n    return 1.0", "import 'subprocess' is not allowed"),
        ("fork", "    import os\n    os.fork()\n    return 1.0", "os.fork is not allowed"),
        ("/etc/passwd", "    return float(len(open('/etc/passwd').read()) > 0)", "open is not allowed"),
        ("file outside", "    return float(open('{secret}').read() == 'secret')", "open is not allowed"),
        ("write a file", "    open('{marker}', 'w').write('x')\n    return 1.0", "open is not allowed"),
        ("socket", "    import socket\n    socket.create_connection(('127.0.0.1', 22))\n    return 1.0", "import 'socket' is not allowed"),
        ("raw _socket", "    import _socket\n    _socket.socket()\n    return 1.0", "import '_socket' is not allowed"),
        ("ctypes", "    import ctypes\n    return 1.0", "import 'ctypes' is not allowed"),
        ("huge allocation", "    blob = bytearray(8 * 1024**3)\n    return 1.0", "MemoryError"),
        ("huge list", "    blob = [0] * 10**9\n    return 1.0", "MemoryError"),
        ("returns a string", "    return 'yes'", "returned str, not a number"),
        ("returns None", "    pass", "returned NoneType, not a number"),
        ("returns NaN", "    return float('nan')", r"not in \[0, 1\]"),
        ("returns 2", "    return 2", r"not in \[0, 1\]"),
        ("raises", "    raise KeyError('bookings')", "KeyError"),
        ("exits silently", "    import os\n    os._exit(0)", "crashed"),
        ("kills itself", "    import os\n    os.kill(os.getpid(), 9)", "os.kill is not allowed"),
        ("reads secrets", "    import os\n    raise ValueError(sorted(os.environ))", r"ValueError: \[('LC_CTYPE')?\]"),
    ],
)
def test_hostile_or_broken_verifier_is_an_error(tmp_path, monkeypatch, name, body, message):
    monkeypatch.setenv("FLEET_API_KEY", "sk-must-not-leak")
    marker, secret = tmp_path / "pwned", tmp_path / "secret.txt"
    secret.write_text("secret")
    code = "def verify(final_state):\n" + body.format(marker=marker, secret=secret) + "\n"
    started = time.monotonic()
    with pytest.raises(VerifierError, match=message):
        run_verifier(code, STATE, FAST)
    assert time.monotonic() - started < FAST.timeout_s + 3, name
    assert not marker.exists(), f"{name}: the verifier acted outside the sandbox"


def test_module_level_code_is_sandboxed_too(tmp_path):
    code = f"open({str(tmp_path / 'x')!r}, 'w')\n\ndef verify(final_state):\n    return 1.0\n"
    with pytest.raises(VerifierError, match="open is not allowed"):
        run_verifier(code, STATE, FAST)


def test_async_runs_concurrently_and_cancellation_kills_the_child():
    hang = "def verify(final_state):\n    while True:\n        pass\n"

    async def go():
        started = time.monotonic()
        rewards = await asyncio.gather(*[run_verifier_async(CORRECT, STATE, FAST) for _ in range(4)])
        task = asyncio.ensure_future(run_verifier_async(hang, STATE, SandboxLimits(timeout_s=30)))
        await asyncio.sleep(0.5)
        children = _children()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return rewards, time.monotonic() - started, children

    rewards, elapsed, children = asyncio.run(go())
    assert rewards == [1.0] * 4 and elapsed < 10
    assert children, "the hanging verifier should have been running"
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in children)


def _children() -> list[int]:
    """PIDs of this process's sandbox children (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if b"sandbox_child.py" in cmdline and parent == os.getpid():
                found.append(int(entry))
    return found


def _code_task(code: str) -> Task:
    return Task(task_key="code", prompt="Book H01 on 2026-05-09 for 5 nights.", env_key="hotel", verifier_code=code,
                env_variables={"CURRENT_DATE": "2026-04-22", "LOGGED_IN_USER": "dan"})


def test_verify_score_routes_verifier_code_to_the_sandbox():
    assert score(_code_task(CORRECT), {}, STATE, FAST) == 1.0


def test_episode_with_verifier_code_through_the_live_server(hotel_server):
    good = _code_task(CORRECT)
    bad = _code_task("def verify(final_state):\n    return open('/etc/passwd').read()\n")

    async def play(task: Task):
        async with EnvClient(hotel_server.base_url).episode(task) as session:
            await session.call_tool("book_hotel", {"hotel_id": "H01", "check_in": "2026-05-09", "nights": 5})
            return await session.score()

    assert asyncio.run(play(good)) == 1.0
    with pytest.raises(VerifierError, match="open is not allowed"):
        asyncio.run(play(bad))
